#!/usr/bin/env python3
"""slimreduce-run under both MPI families (docs/architecture.md, "Two MPI
builds"), run by ctest from tests/tools/CMakeLists.txt against the
`cmake --install`ed prefix of tools_install:

  check_launcher_mpi.py detect --prefix P
      stand-in launchers on PATH that print each family's `--version` text: the
      library of the launcher's MPI is preloaded, with -x (Open MPI) or -genv
      (Hydra); a missing library for the launcher's family is refused in one line
      naming both; --library overrides
  check_launcher_mpi.py job --prefix P --mpich-build B --work W -- MPIEXEC...
      a real 2-rank job under MPICH's mpiexec through slimreduce-run, which must
      pick libslimreduce-mpich.so from P (installed there by tools_install from B);
      B's train_mlp, built against MPICH, is the job

Each prints what it checked and exits 1 on the first failure (77: the MPICH
build is not there, a skip that the test command's last lines report).
"""
import argparse
import glob
import os
import shutil
import sys
import tempfile

from check_tools import Failure, clean_env, expect, fp16_reports, fresh, one_error_line, run

# What each family's launcher prints first for --version (Open MPI 4.1, MPICH 4.0's Hydra).
OPEN_MPI_VERSION = "mpirun (Open MPI) 4.1.4\\n\\nReport bugs to http://www.open-mpi.org/community/help/"
HYDRA_VERSION = "HYDRA build details:\\n    Version:                                 4.0.2"
# Intel MPI's launcher (Hydra too, of the MPICH family), as impi-rt 2021.13's says it.
INTEL_VERSION = "Intel(R) MPI Library for Linux* OS, Version 2021.13 Build 20240701 (id: 179630a)"

STUB = """#!/bin/sh
# A stand-in launcher: answers --version as {family} does; otherwise records how
# it was started, and starts nothing.
if [ "$1" = --version ]; then printf '{version}\\n'; exit 0; fi
{{
  for a in "$@"; do printf 'arg=%s\\n' "$a"; done
  printf 'LD_PRELOAD=%s\\n' "${{LD_PRELOAD-}}"
}} > "{record}.$(basename "$0")"
"""


def make_prefix(real, where, libraries):
    """A copy of the installed tool and its package in `where`, with only
    `libraries` (name -> file to link) in its lib/: which libraries a prefix
    holds is what the launcher's choice depends on."""
    os.makedirs(os.path.join(where, "bin"))
    os.makedirs(os.path.join(where, "lib"))
    shutil.copy(os.path.join(real, "bin", "slimreduce-run"), os.path.join(where, "bin"))
    os.symlink(os.path.join(real, "bin", "slimreduce-settings"),
               os.path.join(where, "bin", "slimreduce-settings"))
    # Copied, not linked: the package finds lib/ from its own resolved path.
    shutil.copytree(os.path.join(real, "share"), os.path.join(where, "share"))
    for name, target in libraries.items():
        os.symlink(target, os.path.join(where, "lib", name))
    return os.path.join(where, "bin", "slimreduce-run"), os.path.join(where, "lib")


def case_detect(args):
    real_lib = os.path.realpath(os.path.join(args.prefix, "lib", "libslimreduce.so"))
    with tempfile.TemporaryDirectory() as tmp:
        stubs = os.path.join(tmp, "stubs")
        os.mkdir(stubs)
        record = os.path.join(tmp, "record")
        # mpiexec here is Hydra's, as where the alternatives point to MPICH.
        launchers = {"mpirun": ("Open MPI", OPEN_MPI_VERSION), "mpiexec": ("Hydra", HYDRA_VERSION),
                     "mpiexec.mpich": ("Hydra", HYDRA_VERSION),
                     "mpiexec.hydra": ("Hydra", HYDRA_VERSION),
                     "mpiexec.intel": ("Intel MPI's Hydra", INTEL_VERSION)}
        for name, (family, version) in launchers.items():
            with open(os.path.join(stubs, name), "w") as stream:
                stream.write(STUB.format(family=family, version=version, record=record))
            os.chmod(os.path.join(stubs, name), 0o755)
        env = clean_env(PATH=stubs + os.pathsep + os.environ["PATH"], LD_PRELOAD="libm.so.6")

        # Both libraries installed (the MPICH one a stand-in: nothing is loaded here).
        stand_in = os.path.join(tmp, "libslimreduce-mpich.so")
        open(stand_in, "w").close()
        tool, lib_dir = make_prefix(args.prefix, os.path.join(tmp, "both"),
                                    {"libslimreduce.so": real_lib, "libslimreduce-mpich.so": stand_in})
        ompi = os.path.join(lib_dir, "libslimreduce.so")
        mpich = os.path.join(lib_dir, "libslimreduce-mpich.so")
        opts = ["--compressor", "fp16", "--dry-run", "--"]
        genv = f"-genv LD_PRELOAD {mpich}:libm.so.6 -genv SLIMREDUCE_COMPRESSOR fp16"
        cases = {
            "mpirun": (["mpirun", "-np", "2", "./job"],
                       f"mpirun -x LD_PRELOAD={ompi}:libm.so.6 -x SLIMREDUCE_COMPRESSOR=fp16 -np 2 ./job"),
            "mpiexec": (["mpiexec", "-n", "2", "./job"], f"mpiexec {genv} -n 2 ./job"),
            "mpiexec.mpich": (["mpiexec.mpich", "-n", "2", "./job"], f"mpiexec.mpich {genv} -n 2 ./job"),
            "mpiexec.hydra": (["mpiexec.hydra", "-n", "2", "./job"], f"mpiexec.hydra {genv} -n 2 ./job"),
            "mpiexec.intel": (["mpiexec.intel", "-n", "2", "./job"], f"mpiexec.intel {genv} -n 2 ./job"),
            "its own -genv LD_PRELOAD": (
                ["mpiexec.mpich", "-genv", "LD_PRELOAD", "/opt/a.so", "-n", "2", "./job"],
                f"mpiexec.mpich -genv LD_PRELOAD {mpich}:/opt/a.so -genv SLIMREDUCE_COMPRESSOR fp16 "
                "-n 2 ./job"),
        }
        for what, (command, line) in cases.items():
            _, out, _ = run([tool] + opts + command, env=env, check=0)
            expect(out.strip() == line, f"--dry-run, {what}:\n got      {out.strip()}\n expected {line}")
        expect(not glob.glob(record + ".*"), "a --dry-run started a launcher")
        print(f"ok: --dry-run lines by each launcher's --version: {', '.join(cases)}")

        # Run: Hydra gets the settings as -genv options, and is not preloaded itself.
        run([tool, "--compressor", "fp16", "--", "mpiexec.mpich", "-n", "2", "./job"], env=env, check=0)
        with open(record + ".mpiexec.mpich") as stream:
            seen = stream.read().splitlines()
        os.remove(record + ".mpiexec.mpich")
        expect(seen[:4] == ["arg=-genv", "arg=LD_PRELOAD", f"arg={mpich}:libm.so.6", "arg=-genv"],
               f"mpiexec.mpich was not given -genv LD_PRELOAD first: {seen}")
        expect("LD_PRELOAD=libm.so.6" in seen, f"mpiexec.mpich itself was preloaded: {seen}")
        # --library overrides the choice.
        _, out, _ = run([tool, "--library", ompi, "--dry-run", "--", "mpiexec.mpich", "./job"], env=env,
                        check=0)
        expect(out.split()[:4] == ["mpiexec.mpich", "-genv", "LD_PRELOAD", f"{real_lib}:libm.so.6"],
               f"--library under Hydra: {out}")
        print("ok: Hydra run with -genv, itself not preloaded; --library overrides")

        # A prefix without the launcher's library: one line naming both, nothing started.
        tool, _ = make_prefix(args.prefix, os.path.join(tmp, "openmpi-only"), {"libslimreduce.so": real_lib})
        rc, _, err = run([tool, "--", "mpiexec.mpich", "-n", "2", "./job"], env=env)
        one_error_line(rc, err, "slimreduce-run", "mpiexec.mpich is the MPICH family's launcher, but only "
                       "libslimreduce.so (built for Open MPI) is installed", "no MPICH library")
        expect("libslimreduce-mpich.so needs a build with -DSLIMREDUCE_MPI_ABI=mpich" in err, err)
        tool, _ = make_prefix(args.prefix, os.path.join(tmp, "mpich-only"),
                              {"libslimreduce-mpich.so": stand_in})
        rc, _, err = run([tool, "--", "mpirun", "-np", "2", "./job"], env=env)
        one_error_line(rc, err, "slimreduce-run", "mpirun is Open MPI's launcher, but only "
                       "libslimreduce-mpich.so (built for the MPICH family) is installed",
                       "no Open MPI library")
        expect(not glob.glob(record + ".*"), "a launcher was started despite an error")
        print("ok: a missing library for the launcher's MPI refused in one line, both ways")


def case_job(args):
    mpich_lib = os.path.join(args.prefix, "lib", "libslimreduce-mpich.so")
    train = os.path.join(args.mpich_build, "examples", "train_mlp")
    if not (os.path.isfile(mpich_lib) and os.access(train, os.X_OK) and shutil.which(args.mpiexec[0])):
        print(f"SKIPPED: no MPICH build or launcher: {mpich_lib}, {train} or {args.mpiexec[0]} is "
              "missing (scripts/test.sh builds build-mpich where MPICH is installed)")
        sys.exit(77)
    fresh(args.work)
    fp16 = os.path.join(args.work, "fp16")
    argv = [os.path.join(args.prefix, "bin", "slimreduce-run"), "--compressor", "fp16", "--report", fp16,
            "--"] + args.mpiexec + ["-n", "2", train, "--steps", "20"]
    run(argv, env=clean_env(), check=0)
    print(f"ok: a 2-rank job under {os.path.basename(args.mpiexec[0])} through slimreduce-run, "
          f"libslimreduce-mpich.so preloaded: {fp16_reports(fp16, 2)[0]['calls']['compressed']} calls "
          "compressed per rank")


def main():
    argv = sys.argv[1:]
    mpiexec = []
    if "--" in argv:
        at = argv.index("--")
        argv, mpiexec = argv[:at], argv[at + 1:]
    parser = argparse.ArgumentParser()
    parser.add_argument("case", choices=["detect", "job"])
    parser.add_argument("--prefix", required=True)
    parser.add_argument("--mpich-build")
    parser.add_argument("--work")
    args = parser.parse_args(argv)
    args.mpiexec = mpiexec or ["mpiexec.mpich"]
    try:
        globals()["case_" + args.case](args)
    except Failure as failure:
        print(f"FAILED: {failure}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
