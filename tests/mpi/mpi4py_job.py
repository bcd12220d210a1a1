"""A plain mpi4py job: 4 float32 SUM allreduces of 65536 values (256 KiB,
compressible), in place, and one int32 allreduce (passed through). Inputs are
small integers, exact in 16 bits, so the sums must be exact."""
import sys

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
n = 65536
index = np.arange(n)
wrong = 0
for step in range(4):
    grads = ((index + rank + step) % 8).astype(np.float32)
    comm.Allreduce(MPI.IN_PLACE, grads, op=MPI.SUM)
    expected = sum(((index + r + step) % 8).astype(np.float32) for r in range(size))
    wrong += int(np.count_nonzero(grads != expected))
flags = np.full(10, rank, dtype=np.int32)
total = np.empty_like(flags)
comm.Allreduce(flags, total, op=MPI.SUM)
wrong += int(total[0] != size * (size - 1) // 2)
if wrong:
    print(f"rank {rank}: {wrong} wrong values", file=sys.stderr)
sys.exit(1 if wrong else 0)
