#!/usr/bin/env python3
"""Preloading SlimReduce must not change the job's own BLAS.

  check_numpy_blas.py --lib LIB --job numpy_blas_job.py --np N [--mpi openmpi|mpich]
                      [--python PYTHON] -- MPIRUN...

Runs the numpy job (numpy_blas_job.py; by default /usr/bin/python3 with
Debian's numpy and mpi4py, which are Open MPI's; under MPICH a venv's python
whose mpi4py is built against it, tests/mpi/mpich_python.sh) twice under
MPIRUN, each rank's variables in its launcher's words (`-x` for Open MPI's
mpirun, `-genv` for Hydra): plain, and with LIB preloaded,
SLIMREDUCE_COMPRESSOR=powersgd and SLIMREDUCE_POWERSGD_BLAS=openblas (so the
run fails at start unless the private OpenBLAS loads). Then checks:
- numpy's products have the same bits in both runs, before and after the
  PowerSGD allreduces, on every rank;
- the BLAS objects of the main link-map namespace, where numpy resolves its
  symbols, are the same files in both runs;
- the preloaded run maps the OpenBLAS file exactly once more than the plain
  one (SlimReduce's private copy, a second copy even where numpy loaded the
  same file), and its log says the products ran on it;
- every call was compressed (the reports) and every rank holds the same sum.
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

PYTHON = "/usr/bin/python3"  # Debian's numpy and mpi4py are installed for it
# One record per rank; mpirun may join two ranks' lines, so fields, not lines.
FIELDS = ("before", "after", "numpy_blas", "openblas_loads", "summed")
RECORD = re.compile(r"rank=(\d+) before=([0-9a-f]{64}) after=([0-9a-f]{64}) numpy_blas=(\S+?) "
                    r"openblas_loads=(\d+) summed=([0-9a-f]{64})")


def run(command):
    result = subprocess.run(command, capture_output=True, text=True, timeout=240)
    if result.returncode != 0:
        sys.stdout.write(result.stdout)
        sys.stderr.write(result.stderr)
        sys.exit(f"check_numpy_blas: {' '.join(command)} exited {result.returncode}")
    return result


def ranks_of(output, np):
    """{rank: {field: value}} from the job's records; every rank must have one."""
    found = {}
    for rank, *values in RECORD.findall(output):
        found[int(rank)] = dict(zip(FIELDS, values))
    if sorted(found) != list(range(np)):
        sys.exit(f"check_numpy_blas: expected a line from each of {np} ranks:\n{output}")
    return found


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lib", required=True)
    parser.add_argument("--job", required=True)
    parser.add_argument("--np", type=int, default=2)
    parser.add_argument("--mpi", choices=["openmpi", "mpich"], default="openmpi")
    parser.add_argument("--python", default=PYTHON)
    parser.add_argument("mpirun", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    mpirun = [word for word in args.mpirun if word != "--"] + ["-np", str(args.np)]
    job = [args.python, args.job]

    plain = ranks_of(run(mpirun + job).stdout, args.np)
    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "report")
        exports = []
        for name, value in (("LD_PRELOAD", args.lib), ("SLIMREDUCE_COMPRESSOR", "powersgd"),
                            ("SLIMREDUCE_POWERSGD_BLAS", "openblas"),
                            ("SLIMREDUCE_LOG_LEVEL", "info"), ("SLIMREDUCE_REPORT", prefix)):
            exports += ["-genv", name, value] if args.mpi == "mpich" else ["-x", f"{name}={value}"]
        done = run(mpirun + exports + job)
        preloaded = ranks_of(done.stdout, args.np)
        reports = [json.load(open(path)) for path in sorted(glob.glob(prefix + ".*.json"))]

    failed = []
    reference = plain[0]["before"]
    for label, runs in (("plain", plain), ("preloaded", preloaded)):
        for rank, fields in runs.items():
            for when in ("before", "after"):
                if fields[when] != reference:
                    failed.append(f"{label} rank {rank}: numpy's products {when} the allreduce "
                                  f"hash to {fields[when]}, not {reference}")
    for rank in range(args.np):
        if preloaded[rank]["numpy_blas"] != plain[rank]["numpy_blas"]:
            failed.append(f"rank {rank}: numpy's namespace holds {preloaded[rank]['numpy_blas']} "
                          f"preloaded, {plain[rank]['numpy_blas']} plain")
        extra = int(preloaded[rank]["openblas_loads"]) - int(plain[rank]["openblas_loads"])
        if extra != 1:
            failed.append(f"rank {rank}: {extra} more copies of OpenBLAS preloaded, not 1")
    if len({fields["summed"] for fields in preloaded.values()}) != 1:
        failed.append("the ranks hold different sums")
    used = done.stderr.count("powersgd products: cblas_sgemm of a private OpenBLAS")
    if used != args.np:
        failed.append(f"{used} ranks logged the private OpenBLAS, not {args.np}:\n{done.stderr}")
    if len(reports) != args.np:
        failed.append(f"{len(reports)} reports, not {args.np}")
    for report in reports:
        if report["calls"]["compressed"] != 3:
            failed.append(f"rank {report['rank']}: {report['calls']['compressed']} calls "
                          "compressed, not the job's 3")

    print(f"numpy products {reference[:16]}... plain and preloaded; numpy's BLAS "
          f"{plain[0]['numpy_blas']}; OpenBLAS copies {plain[0]['openblas_loads']} plain, "
          f"{preloaded[0]['openblas_loads']} preloaded")
    for failure in failed:
        print(f"FAILED: {failure}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
