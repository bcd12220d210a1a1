"""python -m slimreduce [--json]: what this install holds.

Prints the installed version, the MPI ABI of the default library, and each
installed library with what it serves and its path:

    SlimReduce 0.1.0, installed in /opt/slimreduce/lib
    MPI ABIs: openmpi mpich (default: openmpi)
      openmpi  /opt/slimreduce/lib/libslimreduce.so  (Open MPI)
      mpich    /opt/slimreduce/lib/libslimreduce-mpich.so  (the MPICH family (MPICH, ...))

--json prints the same as one JSON object (keys
version, mpi_abi, mpi_abis, libraries). Exits 1, with one line on stderr,
when no library is installed next to the package.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

import slimreduce

PROG = "python -m slimreduce"
WHAT = {"nccl": "NCCL without MPI"}


def installed_version(library_dir):
    """The version the CMake package beside the libraries says (cmake --install
    and pip both write it), or None."""
    path = os.path.join(library_dir, "cmake", "SlimReduce", "SlimReduceConfigVersion.cmake")
    try:
        with open(path) as stream:
            match = re.search(r'set\(PACKAGE_VERSION "([0-9.]+)"\)', stream.read())
    except OSError:
        return None
    return match.group(1) if match else None


def describe():
    """What the install holds, as a dict (the --json object)."""
    libraries = slimreduce.libraries()
    abis = slimreduce.mpi_abis()
    folder = os.path.dirname(next(iter(libraries.values()))) if libraries else None
    return {
        "version": installed_version(folder) if folder else None,
        "mpi_abi": abis[0] if abis else None,
        "mpi_abis": abis,
        "libraries": libraries,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(prog=PROG, description="Says which SlimReduce libraries are "
                                     "installed and which MPI ABI each is built for.")
    parser.add_argument("--json", action="store_true", help="print it as one JSON object")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    info = describe()
    if not info["libraries"]:
        looked = ", ".join(str(d) for d in slimreduce._library_dirs())
        print(f"{PROG}: error: no SlimReduce library is installed next to this package; looked in "
              f"{looked}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(info, indent=1))
        return 0
    folder = os.path.dirname(next(iter(info["libraries"].values())))
    print(f"SlimReduce {info['version'] or '(version unknown)'}, installed in {folder}")
    if info["mpi_abis"]:
        print(f"MPI ABIs: {' '.join(info['mpi_abis'])} (default: {info['mpi_abi']})")
    else:
        print("MPI ABIs: none (an NCCL-only build)")
    for key, path in info["libraries"].items():
        what = slimreduce.ABI_NAMES.get(key) or WHAT[key]
        print(f"  {key:<8} {path}  ({what})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
