"""The `slimreduce` Python module inside a job started by slimreduce-run with
--compressor fp16 (mpi4py, 2 or more ranks): its C API calls reach the
preloaded library, which is loaded once, and they see the job's calls.

  module_job.py VERSION [PACKAGE_FOLDER]   checks inside the preloaded job
  module_job.py --not-loaded LIBRARY       checks in a process without the library
Exits 1 with the failed checks on stderr."""
import os
import sys

failures = []


def check(condition, what):
    if not condition:
        failures.append(what)


def mapped_copies():
    """The distinct files of SlimReduce's libraries mapped into this process."""
    with open("/proc/self/maps") as maps:
        return {line.split()[-1] for line in maps if "libslimreduce" in line}


def finish():
    for failure in failures:
        print(f"module_job: {failure}", file=sys.stderr)
    sys.exit(1 if failures else 0)


import slimreduce  # noqa: E402

if sys.argv[1] == "--not-loaded":
    check(not slimreduce.is_loaded(), "is_loaded() is True in a process without the library")
    try:
        slimreduce.counters()
        check(False, "counters() did not raise without the library")
    except slimreduce.NotLoadedError as error:
        check("LD_PRELOAD" in str(error), f"NotLoadedError does not say how to preload: {error}")
    check(not mapped_copies(), f"the module loaded the library: {mapped_copies()}")
    check(slimreduce.library_path() == os.path.realpath(sys.argv[2]),
          f"library_path() is {slimreduce.library_path()}, expected {sys.argv[2]}")
    finish()

expected_version = sys.argv[1]
if len(sys.argv) > 2:
    check(os.path.realpath(slimreduce.__file__).startswith(os.path.realpath(sys.argv[2])),
          f"the module comes from {slimreduce.__file__}, not from {sys.argv[2]}")
check(slimreduce.is_loaded(), "is_loaded() is False under slimreduce-run")
# Before MPI_Init the runtime is not up: the calls say so.
try:
    slimreduce.counters()
    check(False, "counters() did not raise before MPI_Init")
except slimreduce.SlimReduceError as error:
    check(not isinstance(error, slimreduce.NotLoadedError), f"before MPI_Init: {error!r}")

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
check(slimreduce.version() == expected_version, f"version() is {slimreduce.version()}")
check(slimreduce.compressor() == "fp16", f"compressor() is {slimreduce.compressor()}")
check(slimreduce.setting("SLIMREDUCE_MIN_BYTES") == "65536",
      f"SLIMREDUCE_MIN_BYTES is {slimreduce.setting('SLIMREDUCE_MIN_BYTES')}")
every = slimreduce.settings()
check(list(every) == list(slimreduce.SETTING_NAMES) and every["SLIMREDUCE_COMPRESSOR"] == "fp16",
      f"settings() gave {every}")
try:
    slimreduce.setting("SLIMREDUCE_NO_SUCH")
    check(False, "setting() of an unknown name did not raise")
except slimreduce.SlimReduceError:
    pass

data = np.ones(65536, dtype=np.float32)  # 256 KiB: compressed
for _ in range(2):
    comm.Allreduce(MPI.IN_PLACE, data, op=MPI.SUM)
counts = slimreduce.counters()
check(counts["compressed"] == 2, f"counters() after 2 fp16 calls: {counts}")
check(counts["wire_sent"] < counts["wire_baseline"], f"nothing saved: {counts}")
check(slimreduce.counter("calls.compressed") == 2.0, "counter('calls.compressed') is not 2")
slimreduce.set_compressor("bf16")
check(slimreduce.compressor() == "bf16", f"after set_compressor: {slimreduce.compressor()}")
comm.Allreduce(MPI.IN_PLACE, data, op=MPI.SUM)
check(slimreduce.counter("calls.compressed") == 3.0, "the bf16 call was not compressed")
check(float(data[0]) == float(size ** 3), f"the sums are wrong: {data[0]}")
for bad, call in (("set_compressor('fp17')", lambda: slimreduce.set_compressor("fp17")),
                  ("set_topk_ratio(2)", lambda: slimreduce.set_topk_ratio(2.0)),
                  ("counter('no.such')", lambda: slimreduce.counter("no.such"))):
    try:
        call()
        check(False, f"{bad} did not raise")
    except slimreduce.SlimReduceError:
        pass
copies = mapped_copies()
check(copies == {os.path.realpath(slimreduce.library_path())},
      f"mapped: {copies}; expected only {slimreduce.library_path()}")
if rank == 0 and not failures:
    print(f"module_job: ok on {size} ranks ({counts['compressed']} fp16 calls, then bf16)")
finish()
