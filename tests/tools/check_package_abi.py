#!/usr/bin/env python3
"""Which MPI ABI each installed library holds, as the CMake package and the
Python package say it (docs/tools.md, "Which MPI each library is for"); run by
ctest from tests/tools/CMakeLists.txt:

  check_package_abi.py cmake --build B --mpich-build M --work W [--nccl] -- MPIEXEC...
      installs the Open MPI tree B and the MPICH tree M into fresh prefixes: B
      alone, M alone, B then M's component mpich, B then M whole, M then B
      whole. A consumer project's find_package(SlimReduce) must give a target
      per library there, with its ABI, and the ABI variables; a component the
      prefix lacks must fail with a message naming it. One program is linked
      against SlimReduce::slimreduce_mpich with MPICH's mpicc and run under
      MPIEXEC (mpiexec.mpich). Without M: the checks of B alone, then 77.
  check_package_abi.py python --prefix P --work W
      `python -m slimreduce` and slimreduce.mpi_abi()/mpi_abis()/libraries() in
      copies of the installed package P holding each set of libraries, laid
      out as cmake --install does and as a wheel does; slimreduce-run in the
      wheel layout picks libslimreduce-mpich.so under a Hydra launcher.

Each prints what it checked and exits 1 on the first failure.
"""
import argparse
import json
import os
import re
import shutil
import sys

from check_launcher_mpi import HYDRA_VERSION, STUB
from check_tools import Failure, clean_env, expect, fresh, run, version_of

FILES = {"openmpi": "libslimreduce.so", "mpich": "libslimreduce-mpich.so", "nccl": "libslimreduce_nccl.so"}
TARGETS = {"openmpi": "SlimReduce::slimreduce", "mpich": "SlimReduce::slimreduce_mpich",
           "nccl": "SlimReduce::slimreduce_nccl"}
COMPONENT = {"openmpi": "mpi", "mpich": "mpich", "nccl": "nccl"}

# A consumer that asks for COMPONENTS and writes down what the package gave.
PROBE = r"""cmake_minimum_required(VERSION 3.16)
project(SlimReduceAbiProbe NONE)
find_package(SlimReduce 0.1 REQUIRED COMPONENTS ${COMPONENTS})
set(out "abis=${SlimReduce_MPI_ABIS}\nabi=${SlimReduce_MPI_ABI}\n")
string(APPEND out "default_target=${SlimReduce_MPI_TARGET}\n")
foreach(abi openmpi mpich)
  string(APPEND out "target_of_${abi}=${SlimReduce_${abi}_TARGET}\n")
endforeach()
foreach(name slimreduce slimreduce_mpich slimreduce_nccl)
  if(TARGET SlimReduce::${name})
    get_target_property(location SlimReduce::${name} IMPORTED_LOCATION)
    get_target_property(abi SlimReduce::${name} SLIMREDUCE_MPI_ABI)
    string(APPEND out "target=SlimReduce::${name}|${location}|${abi}\n")
  endif()
endforeach()
file(WRITE ${CMAKE_BINARY_DIR}/probe.txt "${out}")
"""

# consumer.c linked against the MPICH library, built with MPICH's wrapper.
MPICH_CONSUMER = r"""cmake_minimum_required(VERSION 3.16)
project(SlimReduceMpichConsumer LANGUAGES C)
find_package(SlimReduce 0.1 REQUIRED COMPONENTS mpich)
find_package(MPI REQUIRED COMPONENTS C)
add_executable(consumer_mpich ${CONSUMER_SOURCE})
target_link_libraries(consumer_mpich PRIVATE SlimReduce::slimreduce_mpich MPI::MPI_C)
"""


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as stream:
        stream.write(text)


def probe(args, prefix, components, name):
    """find_package against prefix; (rc, what it gave as a dict, its output)."""
    source = os.path.join(args.work, "probe")
    write(os.path.join(source, "CMakeLists.txt"), PROBE)
    build = os.path.join(args.work, "probe-" + re.sub(r"\W+", "-", name))
    rc, out, err = run([args.cmake, "-S", source, "-B", build, f"-DCMAKE_PREFIX_PATH={prefix}",
                        "-DCOMPONENTS=" + ";".join(components)], env=clean_env())
    found = {"targets": {}}
    if rc == 0:
        with open(os.path.join(build, "probe.txt")) as stream:
            for line in stream.read().splitlines():
                key, _, value = line.partition("=")
                if key == "target":
                    target, location, abi = value.split("|")
                    found["targets"][target] = (location, abi)
                else:
                    found[key] = value
    return rc, found, out + err


def expect_package(args, prefix, held, name):
    """find_package of every component held must give one target per library,
    each at its file in prefix/lib with its ABI, and the ABI variables."""
    components = [COMPONENT[k] for k in held]
    rc, found, output = probe(args, prefix, components, name)
    expect(rc == 0, f"{name}: find_package(SlimReduce COMPONENTS {components}) failed:\n{output}")
    abis = [k for k in ("openmpi", "mpich") if k in held]
    expect(found["abis"] == ";".join(abis), f"{name}: SlimReduce_MPI_ABIS {found['abis']!r}, expected {abis}")
    expect(found["abi"] == abis[0], f"{name}: SlimReduce_MPI_ABI {found['abi']!r}, expected {abis[0]}")
    expect(found["default_target"] == TARGETS[abis[0]],
           f"{name}: SlimReduce_MPI_TARGET {found['default_target']!r}, expected {TARGETS[abis[0]]}")
    for abi in ("openmpi", "mpich"):
        want = TARGETS[abi] if abi in held else ""
        expect(found[f"target_of_{abi}"] == want, f"{name}: SlimReduce_{abi}_TARGET is "
               f"{found[f'target_of_{abi}']!r}, expected {want!r}")
    expect(sorted(found["targets"]) == sorted(TARGETS[k] for k in held),
           f"{name}: targets {sorted(found['targets'])}, expected those of {held}")
    for key in held:
        location, abi = found["targets"][TARGETS[key]]
        expect(os.path.samefile(location, os.path.join(prefix, "lib", FILES[key])),
               f"{name}: {TARGETS[key]} is {location}")
        want = key if key != "nccl" else "abi-NOTFOUND"
        expect(abi == want, f"{name}: {TARGETS[key]}'s SLIMREDUCE_MPI_ABI is {abi!r}, expected {want!r}")
    print(f"ok: {name}: {', '.join(TARGETS[k] for k in held)}; SlimReduce_MPI_ABIS={found['abis']}")


def expect_missing(args, prefix, component, held_text, needs_text, name):
    rc, _, output = probe(args, prefix, [component], name)
    flat = " ".join(output.split())
    expect(rc != 0, f"{name}: find_package(SlimReduce COMPONENTS {component}) succeeded")
    expect(f"component {component} is not installed in" in flat and f"which holds {held_text}" in flat
           and needs_text in flat, f"{name}: the failure does not say what is missing:\n{output}")
    print(f"ok: {name}: COMPONENTS {component} refused, naming what the prefix holds")


def install(args, tree, prefix, component=None):
    argv = [args.cmake, "--install", tree, "--prefix", prefix]
    run(argv + (["--component", component] if component else []), check=0)


def case_cmake(args):
    fresh(args.work)
    extra = ["nccl"] if args.nccl else []
    ompi = os.path.join(args.work, "openmpi-only")
    install(args, args.build, ompi)
    expect_package(args, ompi, ["openmpi"] + extra, "Open MPI tree alone")
    expect_missing(args, ompi, "mpich", "libslimreduce.so", "-DSLIMREDUCE_MPI_ABI=mpich",
                   "Open MPI tree alone")
    mpich_build = args.mpich_build
    if not (mpich_build and os.path.isfile(os.path.join(mpich_build, "CMakeCache.txt"))):
        print(f"SKIPPED the rest: no MPICH build in {mpich_build} (scripts/test.sh builds build-mpich "
              "where MPICH is installed)")
        sys.exit(77)

    alone = os.path.join(args.work, "mpich-only")
    install(args, mpich_build, alone)
    expect_package(args, alone, ["mpich"], "MPICH tree alone")
    expect_missing(args, alone, "mpi", "libslimreduce-mpich.so", "libslimreduce.so (Open MPI's ABI)",
                   "MPICH tree alone")
    _, flags, _ = run(["pkg-config", "--libs", "slimreduce-mpich"],
                      env=clean_env(PKG_CONFIG_PATH=os.path.join(alone, "lib", "pkgconfig")), check=0)
    expect("-lslimreduce-mpich" in flags.split(), f"pkg-config --libs slimreduce-mpich: {flags}")

    both = ["openmpi", "mpich"] + extra
    orders = {"Open MPI tree, then the mpich component": [(args.build, None), (mpich_build, "mpich")],
              "Open MPI tree, then the MPICH tree": [(args.build, None), (mpich_build, None)],
              "MPICH tree, then the Open MPI tree": [(mpich_build, None), (args.build, None)]}
    for number, (name, steps) in enumerate(orders.items()):
        prefix = os.path.join(args.work, f"both-{number}")
        for tree, component in steps:
            install(args, tree, prefix, component)
        expect_package(args, prefix, both, name)
        env = clean_env(PKG_CONFIG_PATH=os.path.join(prefix, "lib", "pkgconfig"))
        for package, library in (("slimreduce", "-lslimreduce"), ("slimreduce-mpich", "-lslimreduce-mpich")):
            _, flags, _ = run(["pkg-config", "--libs", package], env=env, check=0)
            expect(library in flags.split(), f"{name}: pkg-config --libs {package}: {flags}")
    print("ok: slimreduce.pc and slimreduce-mpich.pc side by side, each naming its library")

    # Link and run: consumer.c against SlimReduce::slimreduce_mpich, MPICH's wrapper, mpiexec.mpich.
    mpicc = shutil.which("mpicc.mpich")
    if not (mpicc and args.mpiexec and shutil.which(args.mpiexec[0])):
        print("SKIPPED the MPICH consumer: no mpicc.mpich or MPICH launcher")
        sys.exit(77)
    source = os.path.join(args.work, "consumer-mpich")
    write(os.path.join(source, "CMakeLists.txt"), MPICH_CONSUMER)
    build = source + "-build"
    example = os.path.join(args.source, "examples", "cmake_consumer", "consumer.c")
    run([args.cmake, "-S", source, "-B", build, f"-DCMAKE_PREFIX_PATH={os.path.join(args.work, 'both-0')}",
         f"-DMPI_C_COMPILER={mpicc}", f"-DCONSUMER_SOURCE={example}"], env=clean_env(), check=0)
    run([args.cmake, "--build", build], env=clean_env(), check=0)
    program = os.path.join(build, "consumer_mpich")
    _, needed, _ = run(["readelf", "-d", program], check=0)
    expect("[libslimreduce-mpich.so]" in needed and "[libslimreduce.so]" not in needed,
           f"the MPICH consumer does not need libslimreduce-mpich.so alone:\n{needed}")
    _, out, _ = run(args.mpiexec + ["-n", "2", program], env=clean_env(), check=0)
    expect(f"SlimReduce {version_of(args.source)}, compressor fp16: 1 compressed, 1 passed through" in out,
           f"the MPICH consumer: {out}")
    print("ok: SlimReduce::slimreduce_mpich linked with mpicc.mpich; it ran on 2 ranks: " + out.strip())


# ---- python -------------------------------------------------------------------------------------


def layout(real, where, names, wheel):
    """A copy of the installed package with only `names` in its library folder
    (stand-ins: nothing is loaded): as cmake --install lays it out (PREFIX/lib,
    the package in PREFIX/share/slimreduce/python), or as a wheel does
    (site-packages/slimreduce/lib). Returns (PYTHONPATH, the library folder)."""
    package = os.path.join(real, "share", "slimreduce", "python", "slimreduce")
    if wheel:
        site = os.path.join(where, "site-packages")
        lib = os.path.join(site, "slimreduce", "lib")
        shutil.copytree(package, os.path.join(site, "slimreduce"))
        bin_dir = os.path.join(site, "slimreduce", "bin")
    else:
        site = os.path.join(where, "share", "slimreduce", "python")
        lib = os.path.join(where, "lib")
        shutil.copytree(package, os.path.join(site, "slimreduce"))
        bin_dir = os.path.join(where, "bin")
    os.makedirs(os.path.join(lib, "cmake", "SlimReduce"))
    shutil.copy(os.path.join(real, "lib", "cmake", "SlimReduce", "SlimReduceConfigVersion.cmake"),
                os.path.join(lib, "cmake", "SlimReduce"))
    os.makedirs(bin_dir)
    os.symlink(os.path.join(real, "bin", "slimreduce-settings"), os.path.join(bin_dir, "slimreduce-settings"))
    for name in names:
        open(os.path.join(lib, FILES[name]), "w").close()
    return site, lib


def report(site, *argv):
    return run([sys.executable, "-m", "slimreduce"] + list(argv), env=clean_env(PYTHONPATH=site),
               cwd="/")


def case_python(args):
    fresh(args.work)
    version = version_of(args.source)
    # The real install: what it reports is what lies in its lib/.
    real_site = os.path.join(args.prefix, "share", "slimreduce", "python")
    _, out, _ = report(real_site, "--json")
    info = json.loads(out)
    held = {k: os.path.join(args.prefix, "lib", f) for k, f in FILES.items()
            if os.path.isfile(os.path.join(args.prefix, "lib", f))}
    expect({k: os.path.realpath(v) for k, v in info["libraries"].items()} ==
           {k: os.path.realpath(v) for k, v in held.items()}, f"the install's libraries: {info}")
    expect(info["version"] == version, f"the install's version: {info}")
    print(f"ok: the installed package reports {sorted(held)} in {args.prefix}/lib, version {version}")

    sets = [["openmpi", "mpich", "nccl"], ["openmpi"], ["mpich"], ["nccl"], ["openmpi", "nccl"]]
    for wheel in (False, True):
        kind = "wheel" if wheel else "cmake --install"
        for number, names in enumerate(sets):
            site, lib = layout(args.prefix, os.path.join(args.work, f"{kind[:5]}-{number}"), names, wheel)
            abis = [k for k in ("openmpi", "mpich") if k in names]
            _, out, _ = report(site, "--json")
            info = json.loads(out)
            expect(info["mpi_abis"] == abis and info["mpi_abi"] == (abis[0] if abis else None) and
                   info["libraries"] == {k: os.path.join(lib, FILES[k]) for k in names} and
                   info["version"] == version, f"{kind} with {names}: {info}")
            _, text, _ = report(site)
            lines = text.splitlines()
            expect(lines[0] == f"SlimReduce {version}, installed in {lib}", f"{kind}, {names}: {text}")
            expect(lines[1] == (f"MPI ABIs: {' '.join(abis)} (default: {abis[0]})" if abis else
                                "MPI ABIs: none (an NCCL-only build)"), f"{kind}, {names}: {text}")
            expect([l.split()[:2] for l in lines[2:]] == [[k, os.path.join(lib, FILES[k])] for k in names],
                   f"{kind}, {names}: {text}")
            code = "import slimreduce as s; print(s.mpi_abis()); print(s.mpi_abi())"
            rc, out, err = run([sys.executable, "-c", code], env=clean_env(PYTHONPATH=site), cwd="/")
            if abis:
                expect(rc == 0 and out.split("\n")[:2] == [str(abis), abis[0]], f"{kind}, {names}: {out}{err}")
            else:
                expect(rc == 1 and "FileNotFoundError: neither libslimreduce.so nor "
                       "libslimreduce-mpich.so is installed" in err, f"{kind}, {names}: {err}")
        print(f"ok: {kind} layout: python -m slimreduce and mpi_abi() for each of {sets}")

    # No library at all: one line, exit 1.
    site, _ = layout(args.prefix, os.path.join(args.work, "none"), [], True)
    rc, _, err = report(site)
    expect(rc == 1 and err.count("\n") == 1 and "no SlimReduce library is installed" in err,
           f"no library: {rc} {err}")

    # slimreduce-run in a wheel holding both: Hydra's launcher gets the MPICH library.
    site, lib = layout(args.prefix, os.path.join(args.work, "wheel-run"), ["openmpi", "mpich"], True)
    stubs = os.path.join(args.work, "stubs")
    os.makedirs(stubs)
    write(os.path.join(stubs, "mpiexec.mpich"),
          STUB.format(family="Hydra", version=HYDRA_VERSION, record=os.path.join(args.work, "record")))
    os.chmod(os.path.join(stubs, "mpiexec.mpich"), 0o755)
    env = clean_env(PYTHONPATH=site, PATH=stubs + os.pathsep + os.environ["PATH"])
    _, out, _ = run([sys.executable, "-m", "slimreduce.run", "--dry-run", "--", "mpiexec.mpich", "-n", "2",
                     "./job"], env=env, cwd="/", check=0)
    want = os.path.join(lib, FILES["mpich"])
    expect(out.split()[:4] == ["mpiexec.mpich", "-genv", "LD_PRELOAD", want],
           f"slimreduce-run in a wheel under Hydra: {out}")
    print("ok: no library: one line; slimreduce-run in a wheel picks libslimreduce-mpich.so under Hydra")


def main():
    argv = sys.argv[1:]
    mpiexec = []
    if "--" in argv:
        at = argv.index("--")
        argv, mpiexec = argv[:at], argv[at + 1:]
    parser = argparse.ArgumentParser()
    parser.add_argument("case", choices=["cmake", "python"])
    parser.add_argument("--prefix")
    parser.add_argument("--build")
    parser.add_argument("--mpich-build")
    parser.add_argument("--work", required=True)
    parser.add_argument("--source", default=os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))
    parser.add_argument("--cmake", default="cmake")
    parser.add_argument("--nccl", action="store_true")
    args = parser.parse_args(argv)
    args.mpiexec = mpiexec
    try:
        globals()["case_" + args.case](args)
    except Failure as failure:
        print(f"FAILED: {failure}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
