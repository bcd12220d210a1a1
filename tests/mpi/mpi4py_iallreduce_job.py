"""mpi4py's Iallreduce on numpy buffers reaches SlimReduce's MPI_Iallreduce:
eight float32 SUM calls of 65536 values (compressible) queued, then completed
by MPI.Request.Waitall, then four more completed by Testall polling, and one
int32 call (passed through) among them; then two named tensors through the
native API (slimreduce_enqueue on the numpy buffers, slimreduce_synchronize). Inputs are small integers, exact in
16 bits, so the sums must be exact; the library must count every call as
MPI_Iallreduce and compress the float ones. Run under mpirun with
libslimreduce.so preloaded and SLIMREDUCE_COMPRESSOR=fp16 or bf16."""
import ctypes
import sys

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
library = ctypes.CDLL(None)
get_counter = library.slimreduce_get_counter
get_counter.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_double)]


def counter(key):
    value = ctypes.c_double(-1)
    return value.value if get_counter(key.encode(), ctypes.byref(value)) == 0 else -1


n = 65536
index = np.arange(n)
wrong = 0
calls_before, compressed_before = counter("calls.iallreduce"), counter("calls.compressed")
for completion in ("waitall", "testall"):
    tensors = 8 if completion == "waitall" else 4
    grads = [((index + rank + t) % 8).astype(np.float32) for t in range(tensors)]
    requests = [comm.Iallreduce(MPI.IN_PLACE, g, op=MPI.SUM) for g in grads]
    flags = np.full(10, rank, dtype=np.int32)
    total = np.empty_like(flags)
    requests.append(comm.Iallreduce(flags, total, op=MPI.SUM))
    if completion == "waitall":
        MPI.Request.Waitall(requests)
    else:
        while not MPI.Request.Testall(requests):
            pass
    for t, g in enumerate(grads):
        expected = sum(((index + r + t) % 8).astype(np.float32) for r in range(size))
        wrong += int(np.count_nonzero(g != expected))
    wrong += int(total[0] != size * (size - 1) // 2)
# The native API on numpy buffers: named tensors, then one synchronize.
enqueue = library.slimreduce_enqueue
enqueue.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p,
                    ctypes.c_int]
synchronize = library.slimreduce_synchronize
synchronize.argtypes = [ctypes.c_void_p]
handle = ctypes.c_void_p(MPI._handleof(comm))  # Open MPI's MPI_Comm is a pointer
named = [((index + rank + t) % 8).astype(np.float32) for t in range(2)]
for t, g in enumerate(named):
    wrong += enqueue(f"tensor{t}".encode(), g.ctypes.data, g.size, handle, 0) != 0
wrong += synchronize(handle) != 0
for t, g in enumerate(named):
    expected = sum(((index + r + t) % 8).astype(np.float32) for r in range(size))
    wrong += int(np.count_nonzero(g != expected))
calls = counter("calls.iallreduce") - calls_before
compressed = counter("calls.compressed") - compressed_before
if calls != 16 or compressed != 14:
    print(f"rank {rank}: counted {calls} MPI_Iallreduce calls and {compressed} compressed, "
          "expected 16 and 14", file=sys.stderr)
    wrong += 1
if wrong:
    print(f"rank {rank}: {wrong} wrong values or counts", file=sys.stderr)
sys.exit(1 if wrong else 0)
