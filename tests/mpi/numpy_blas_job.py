"""A numpy job whose own matrix products must not change under the preload.

Each rank hashes the bits of several numpy matrix products (float64 and
float32, through numpy's BLAS), then sums a float32 tensor with mpi4py's
Allreduce (under the preload with SLIMREDUCE_COMPRESSOR=powersgd, where
SlimReduce computes its products with its private OpenBLAS), then hashes the
products again. It prints, per rank, one line of key=value fields:

  before, after   sha256 of the products' bits before and after the allreduce
  numpy_blas      the BLAS objects of the process's main link-map namespace
                  (where numpy resolves its symbols), as real paths
  openblas_loads  how many times the OpenBLAS file is mapped (once per copy)
  summed          sha256 of the allreduce's result (every rank must agree)

Run by check_numpy_blas.py with and without LD_PRELOAD.
"""
import ctypes
import hashlib
import os
import sys

import numpy as np
from mpi4py import MPI

OPENBLAS = "/usr/lib/x86_64-linux-gnu/openblas-serial/libopenblas.so.0"
BLAS_WORDS = ("blas", "lapack", "gfortran")
RTLD_DI_LINKMAP = 2


def product_hash():
    rng = np.random.default_rng(20)
    digest = hashlib.sha256()
    for dtype in (np.float64, np.float32):
        a = rng.standard_normal((257, 129)).astype(dtype)
        b = rng.standard_normal((129, 300)).astype(dtype)
        v = rng.standard_normal(129).astype(dtype)
        for result in (a @ b, a.T @ a, a @ v, b.T @ b[:, :7], np.dot(a[:64], b[:, :64])):
            digest.update(np.ascontiguousarray(result).tobytes())
    return digest.hexdigest()


class LinkMap(ctypes.Structure):
    pass


LinkMap._fields_ = [("l_addr", ctypes.c_size_t), ("l_name", ctypes.c_char_p),
                    ("l_ld", ctypes.c_void_p), ("l_next", ctypes.POINTER(LinkMap)),
                    ("l_prev", ctypes.POINTER(LinkMap))]


def main_namespace_blas():
    """The BLAS objects of the main namespace: dlopen(NULL)'s link map, walked."""
    libc = ctypes.CDLL(None)
    libc.dlinfo.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
    libc.dlopen.restype = ctypes.c_void_p
    libc.dlopen.argtypes = [ctypes.c_char_p, ctypes.c_int]
    handle = libc.dlopen(None, os.RTLD_NOW)
    entry = ctypes.POINTER(LinkMap)()
    if libc.dlinfo(handle, RTLD_DI_LINKMAP, ctypes.byref(entry)) != 0:
        raise RuntimeError("dlinfo failed")
    names = set()
    while entry:
        name = (entry.contents.l_name or b"").decode()
        if any(word in os.path.basename(name) for word in BLAS_WORDS):
            names.add(os.path.realpath(name))
        entry = entry.contents.l_next
    return ",".join(sorted(names)) or "none"


def openblas_loads():
    """Copies of the OpenBLAS file in the process: each maps its offset 0 once."""
    target = os.path.realpath(OPENBLAS)
    loads = 0
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            if len(fields) >= 6 and fields[5] == target and int(fields[2], 16) == 0:
                loads += 1
    return loads


def main():
    comm = MPI.COMM_WORLD
    before = product_hash()
    count = 1 << 18  # 512 x 512, well above SLIMREDUCE_MIN_BYTES
    rng = np.random.default_rng(100 + comm.Get_rank())
    summed = np.empty(count, dtype=np.float32)
    for _ in range(3):  # warm start and error feedback in play
        data = rng.standard_normal(count).astype(np.float32)
        comm.Allreduce(data, summed, op=MPI.SUM)
    after = product_hash()
    record = (f"rank={comm.Get_rank()} before={before} after={after} "
              f"numpy_blas={main_namespace_blas()} openblas_loads={openblas_loads()} "
              f"summed={hashlib.sha256(summed.tobytes()).hexdigest()}\n")
    os.write(sys.stdout.fileno(), record.encode())  # one write: one piece for mpirun
    return 0


if __name__ == "__main__":
    sys.exit(main())
