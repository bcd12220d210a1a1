"""slimreduce-run: runs a job's launcher with SlimReduce preloaded.

    slimreduce-run [--compressor fp16|bf16|int8|int4|int2|fp8|topk:0.01|powersgd:4|auto|none] [--report stderr|PREFIX]
                   [--timeline PREFIX] [--env SLIMREDUCE_X=Y ...] [--library mpi|nccl|PATH]
                   [--dry-run] -- LAUNCHER ARGS...

It puts the installed libslimreduce.so in front of LD_PRELOAD (keeping what is
preloaded already) and sets the SLIMREDUCE_* variables, forwarded the way the
launcher needs them: `-x NAME=VALUE` options right after Open MPI's
mpirun/mpiexec/orterun/prterun (which do not pass the environment to other
nodes); `-genv NAME VALUE` after the MPICH family's mpiexec (Hydra); the
environment for horovodrun, torchrun, srun and any other command.
An MPI launcher is asked which MPI it is (`--version`): under the MPICH family
the library is libslimreduce-mpich.so, installed beside libslimreduce.so, since
a library built for the other family's ABI cannot run in the job.
Every setting is checked first, by the library's own rules (the installed
slimreduce-settings), so a typo stops here and not at MPI_Init on every rank.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import slimreduce

PROG = "slimreduce-run"
PREFIX = "SLIMREDUCE_"
# MPI launchers, also with a suffix that names the MPI (Debian: mpiexec.mpich,
# mpirun.openmpi, mpiexec.hydra); which MPI each is, --version says.
MPI_LAUNCHERS = {"mpirun", "mpiexec", "orterun", "prterun", "oshrun"}
OPEN_MPI, MPICH = "openmpi", "mpich"
FAMILY_NAMES = {OPEN_MPI: "Open MPI", MPICH: "the MPICH family"}


class UsageError(Exception):
    """What is wrong with the command line, in one line."""


def _parser():
    parser = argparse.ArgumentParser(
        prog=PROG,
        usage=f"{PROG} [options] -- LAUNCHER ARGS...",
        description="Runs LAUNCHER ARGS... with SlimReduce preloaded and configured.",
        epilog="Examples:\n"
        f"  {PROG} --compressor fp16 --report stderr -- mpirun -np 4 ./train\n"
        f"  {PROG} --compressor topk:0.01 -- horovodrun -np 4 python3 train.py\n"
        f"  {PROG} --compressor bf16 -- torchrun --nproc-per-node 8 train.py",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--compressor",
        metavar="NAME",
        help="none, fp16, bf16, int8, int4, int2, quant, fp8, topk, topk:RATIO, powersgd, "
        "powersgd:RANK, or auto "
        "(measures the candidates on the job's own calls and sends each size class with the "
        "fastest; MPI, and NCCL calls made outside a group) (sets SLIMREDUCE_COMPRESSOR, and "
        "SLIMREDUCE_TOPK_RATIO or "
        "SLIMREDUCE_POWERSGD_RANK)",
    )
    parser.add_argument(
        "--adaptive",
        action="store_true",
        help="with --compressor topk:GENTLE,HARD or powersgd:GENTLE,HARD (e.g. topk:0.01,0.001), "
        "or quant with --env SLIMREDUCE_QUANT_BITS=8,4: "
        "the gentle level in critical windows, the hard one otherwise (sets "
        "SLIMREDUCE_ADAPTIVE=accordion)",
    )
    parser.add_argument(
        "--candidates",
        metavar="LIST",
        help="with --compressor auto: what it chooses from, as none,fp16,int8 (the default) "
        "(sets SLIMREDUCE_AUTO_CANDIDATES)",
    )
    parser.add_argument("--report", metavar="stderr|PREFIX", help="sets SLIMREDUCE_REPORT")
    parser.add_argument("--timeline", metavar="PREFIX", help="sets SLIMREDUCE_TIMELINE")
    parser.add_argument(
        "--env",
        metavar="SLIMREDUCE_X=Y",
        action="append",
        default=[],
        help="any other setting (docs/configuration.md); repeat as needed",
    )
    parser.add_argument(
        "--library",
        metavar="mpi|nccl|PATH",
        help="which library to preload: mpi (the default: libslimreduce.so, or "
        "libslimreduce-mpich.so under the MPICH family's launcher), nccl "
        "(libslimreduce_nccl.so, for NCCL jobs without MPI; the default under torchrun when "
        "installed), or a path",
    )
    parser.add_argument("--dry-run", action="store_true", help="print the command it would run, and exit")
    return parser


def _split(argv):
    """(our options, the launcher's command): the command follows the first `--`."""
    if "--" not in argv:
        if any(a in ("-h", "--help") for a in argv):
            return argv, []
        raise UsageError("no job given: put the launcher's command after --, as in "
                         f"{PROG} --compressor fp16 -- mpirun -np 4 ./train")
    at = argv.index("--")
    return argv[:at], argv[at + 1 :]


def compressor_settings(spec):
    """--compressor's value as SLIMREDUCE_* settings ("topk:0.01": name and ratio;
    "powersgd:4": name and rank)."""
    name, colon, value = spec.partition(":")
    if not name:
        raise UsageError(f"--compressor {spec!r}: no compressor name")
    out = {"SLIMREDUCE_COMPRESSOR": name}
    if colon:
        if name == "powersgd":
            out["SLIMREDUCE_POWERSGD_RANK"] = value
            return out
        if name != "topk":
            raise UsageError(f"--compressor {spec!r}: only topk takes a ratio (topk:0.01), "
                             "and powersgd a rank (powersgd:4)")
        out["SLIMREDUCE_TOPK_RATIO"] = value
    return out


def _env_setting(text):
    name, equals, value = text.partition("=")
    if not equals or not name:
        raise UsageError(f"--env {text!r}: expected NAME=VALUE")
    if not name.startswith(PREFIX):
        raise UsageError(f"--env {text!r}: only {PREFIX}* settings (LD_PRELOAD is set by {PROG})")
    return name, value


def _folder_of(prefix):
    folder = os.path.dirname(prefix)
    return folder or "."


def settings_from(args):
    """The SLIMREDUCE_* settings the options ask for, in order."""
    settings = {}
    for text in args.env:
        name, value = _env_setting(text)
        settings[name] = value
    if args.compressor is not None:
        settings.update(compressor_settings(args.compressor))
    if args.adaptive:
        settings["SLIMREDUCE_ADAPTIVE"] = "accordion"
    if args.candidates is not None:
        settings["SLIMREDUCE_AUTO_CANDIDATES"] = args.candidates
    if args.report is not None:
        settings["SLIMREDUCE_REPORT"] = args.report
    if args.timeline is not None:
        settings["SLIMREDUCE_TIMELINE"] = args.timeline
    report = settings.get("SLIMREDUCE_REPORT", "stderr")
    if report != "stderr" and not os.path.isdir(_folder_of(report)):
        # The library would take it, and fail to write the report at the end of the job.
        raise UsageError(f"--report {report}: the folder {_folder_of(report)} does not exist")
    return settings


def is_mpi_launcher(name):
    return name.split(".", 1)[0] in MPI_LAUNCHERS


def version_family(text):
    """The MPI family a launcher's --version text names, or None."""
    # Open MPI: "mpirun (Open MPI) 4.1.4"; its PRRTE launcher (Open MPI 5):
    # "prterun (PMIx Reference RunTime Environment)". MPICH's Hydra: "HYDRA build
    # details:"; Intel MPI (MPICH's ABI): "Intel(R) MPI Library".
    if "Open MPI" in text or "OpenRTE" in text or "PMIx Reference RunTime" in text:
        return OPEN_MPI
    if "HYDRA" in text or "MPICH" in text or "Intel(R) MPI" in text:
        return MPICH
    return None


def launcher_family(launcher):
    """Which MPI an MPI launcher belongs to, as its --version says; when it says
    neither (or cannot be asked), its name: a .mpich or .hydra suffix, or else
    Open MPI, the family the default library is built for."""
    try:
        result = subprocess.run([launcher, "--version"], capture_output=True, text=True,
                                stdin=subprocess.DEVNULL, timeout=30)
        family = version_family(result.stdout + result.stderr)
    except (OSError, subprocess.TimeoutExpired):
        family = None
    if family is None:
        suffix = os.path.basename(launcher).partition(".")[2]
        family = MPICH if suffix in ("mpich", "hydra") else OPEN_MPI
    return family


def _mpi_library(family, launcher):
    """The installed library for the launcher's MPI family; a missing one is
    refused, naming the launcher's MPI and the library it needs."""
    name = os.path.basename(launcher)
    want, other = ((slimreduce.MPICH_LIBRARY, slimreduce.LIBRARY) if family == MPICH
                   else (slimreduce.LIBRARY, slimreduce.MPICH_LIBRARY))
    try:
        return slimreduce.library_path(mpich=family == MPICH)
    except FileNotFoundError:
        pass
    try:
        found = slimreduce.library_path(mpich=family != MPICH)
    except FileNotFoundError as error:
        raise UsageError(str(error)) from None
    build = ("a build with -DSLIMREDUCE_MPI_ABI=mpich, installed beside it "
             "(cmake --install BUILD --component mpich --prefix PREFIX)" if family == MPICH
             else "the default build")
    raise UsageError(f"{name} is {FAMILY_NAMES[family]}'s launcher, but only {other} "
                     f"(built for {FAMILY_NAMES[OPEN_MPI if family == MPICH else MPICH]}) is "
                     f"installed, in {os.path.dirname(found)}: {want} needs {build}; "
                     "or give --library PATH")


def find_library(choice, launcher, family=None):
    """The library to preload, as an absolute path; `family`: the MPI of an MPI
    launcher (launcher_family), which picks the MPI library of its ABI."""
    if choice is None:
        choice = "mpi"
        if launcher == "torchrun":
            try:
                return slimreduce.library_path(nccl=True)
            except FileNotFoundError:
                pass
    if choice == "mpi" and family is not None:
        return _mpi_library(family, launcher)
    if choice in ("mpi", "nccl"):
        try:
            return slimreduce.library_path(nccl=choice == "nccl")
        except FileNotFoundError as error:
            raise UsageError(str(error)) from None
    path = Path(choice)
    if not path.is_file():
        raise UsageError(f"--library {choice}: no such file")
    return str(path.resolve())


def _settings_tool(library):
    """slimreduce-settings, installed next to the library (or in a build tree)."""
    folder = Path(library).parent
    for candidate in (folder.parent / "bin" / "slimreduce-settings",
                      folder.parent / "core" / "slimreduce-settings"):
        if os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("slimreduce-settings")


def check_settings(library, environment, ours):
    """Checks every SLIMREDUCE_* variable the job will see, with the library's
    own rules, before anything starts; raises UsageError naming the problem."""
    tool = _settings_tool(library)
    if tool is None:
        raise UsageError(f"slimreduce-settings, which checks the settings, is not installed next to {library}")
    env = {k: v for k, v in environment.items() if k.startswith(PREFIX)}
    env["PATH"] = os.environ.get("PATH", "")
    result = subprocess.run([tool, "--check"], env=env, capture_output=True, text=True)
    if result.returncode == 0:
        return
    line = (result.stderr.strip().splitlines() or ["settings rejected"])[-1]
    line = line.removeprefix("slimreduce: error: ")
    variable = line.split("=", 1)[0]
    if variable == "SLIMREDUCE_COMPRESSOR" and "SLIMREDUCE_COMPRESSOR" in ours:
        accepted = line.partition("; expected ")[2] or "see docs/configuration.md"
        raise UsageError(f"--compressor {ours[variable]}: unknown compressor; expected "
                         f"{accepted}, or topk:RATIO, powersgd:RANK")
    where = "" if variable in ours else " (set in the environment)"
    raise UsageError(line + where)


def merge_preload(library, existing):
    """LD_PRELOAD with `library` first, then what was there, without duplicates."""
    entries = [library]
    seen = {os.path.realpath(library)}
    for entry in existing.replace(":", " ").split():
        key = os.path.realpath(entry) if "/" in entry else entry
        if key not in seen:
            seen.add(key)
            entries.append(entry)
    return ":".join(entries)


def _pull_openmpi_preload(args):
    """Takes `-x LD_PRELOAD[=V]` out of an mpirun command line: (its value or None, the rest)."""
    rest, value, i = [], None, 0
    while i < len(args):
        if args[i] in ("-x", "--x") and i + 1 < len(args) and args[i + 1].split("=", 1)[0] == "LD_PRELOAD":
            name, equals, text = args[i + 1].partition("=")
            value = text if equals else os.environ.get("LD_PRELOAD", "")
            i += 2
            continue
        rest.append(args[i])
        i += 1
    return value, rest


def _pull_hydra_preload(args):
    """Takes `-genv LD_PRELOAD V` out of a Hydra mpiexec command line: (V or None, the rest)."""
    rest, value, i = [], None, 0
    while i < len(args):
        if args[i] in ("-genv", "--genv") and i + 2 < len(args) and args[i + 1] == "LD_PRELOAD":
            value = args[i + 2]
            i += 3
            continue
        rest.append(args[i])
        i += 1
    return value, rest


def build(command, library, settings, environ, family=None):
    """(argv, environment, the environment's additions) for the job; `family`:
    the MPI of an MPI launcher (launcher_family)."""
    environment = dict(environ)
    if family is not None:
        # As options, so that the launcher itself is not preloaded and ranks on
        # other nodes get them too (Open MPI hands the environment to local
        # ranks only).
        pull = _pull_hydra_preload if family == MPICH else _pull_openmpi_preload
        preloaded, rest = pull(command[1:])
        if preloaded is None:
            preloaded = environ.get("LD_PRELOAD", "")
        exports = {"LD_PRELOAD": merge_preload(library, preloaded)}
        exports.update({k: v for k, v in environ.items() if k.startswith(PREFIX)})
        exports.update(settings)
        options = []
        for name, value in exports.items():
            options += ["-genv", name, value] if family == MPICH else ["-x", f"{name}={value}"]
        return [command[0]] + options + rest, environment, {}
    added = {"LD_PRELOAD": merge_preload(library, environ.get("LD_PRELOAD", ""))}
    added.update(settings)
    environment.update(added)
    return list(command), environment, added


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    try:
        ours, command = _split(argv)
        args = _parser().parse_args(ours)
        if not command:
            raise UsageError("no job given after --")
        settings = settings_from(args)
        launcher = command[0]
        if shutil.which(launcher) is None:
            where = "is not executable" if "/" in launcher else "is not on PATH"
            raise UsageError(f"{launcher}: the launcher {where}")
        family = launcher_family(launcher) if is_mpi_launcher(os.path.basename(launcher)) else None
        library = find_library(args.library, os.path.basename(launcher), family)
        environment = dict(os.environ)
        environment.update(settings)
        check_settings(library, environment, settings)
        job, env, added = build(command, library, settings, os.environ, family)
    except UsageError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
    line = " ".join(f"{k}={shlex.quote(v)}" for k, v in added.items())
    line = (line + " " if line else "") + shlex.join(job)
    if args.dry_run:
        print(line)
        return 0
    sys.stdout.flush()
    try:
        os.execvpe(job[0], job, env)
    except OSError as error:
        print(f"{PROG}: error: cannot run {job[0]}: {error.strerror}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main())
