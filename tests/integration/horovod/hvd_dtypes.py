#!/usr/bin/env python3
"""Horovod's own hvd.allreduce on CPU tensors of every dtype Horovod supports.

horovod.torch 0.28.1 allreduces int32, int64, float16, float32 and float64 CPU tensors; for uint8
and int8 it raises "Tensor type torch.ByteTensor/CharTensor is not supported" (its extension
defines no allreduce for them), so those two go through hvd.allgather and hvd.broadcast (which
SlimReduce does not touch) and the script records that allreduce refused them.

Run under mpirun (4 ranks) once without SlimReduce and once per compressor; each run saves every
result (rank 0, --out FILE, torch.save) and whether all ranks got the same bits. check.py then
compares a run with the run without SlimReduce by this rule:

  * every call SlimReduce must not compress is bit-identical: the integer dtypes, float16
    (Horovod's own 2-byte MPI datatype and MPI_Op), float64, MIN/MAX/PRODUCT, and float32
    SUM/AVERAGE below SLIMREDUCE_MIN_BYTES (64 KiB; 16383 elements is the largest such call);
  * float32 SUM/AVERAGE of at least 64 KiB (16384 elements exactly, and 262144) is compressed:
    under fp16/bf16 within the ring's documented error bound (docs/architecture.md), under top-k
    (first call on a fresh key: no residual yet) equal to the sum, in rank order, of each rank's
    k = ceil(ratio * n) largest-magnitude entries, bit for bit; under `none` bit-identical.

Every call is blocking (one tensor per Horovod cycle), so Horovod fuses nothing here and the
number of compressed calls is known: exactly the float32 SUM/AVERAGE cases of >= 64 KiB.
"""
import argparse
import hashlib
import sys

import torch

WORLD_SEED = 20261202
SMALL = 1000            # elements
FP32_BELOW = 16383      # 65532 bytes: below the 64 KiB threshold
FP32_AT = 16384         # 65536 bytes: exactly the threshold, eligible
LARGE = 262144          # 1 MiB of float32


ALLREDUCE_DTYPES = ("int32", "int64", "float16", "float32", "float64")
BYTE_DTYPES = ("uint8", "int8")  # not allreducible in horovod.torch 0.28.1


def cases():
    """(name, dtype, elements, op name). The same list in every run."""
    out = []
    for dt in BYTE_DTYPES:
        for n in (SMALL, LARGE):
            out.append((f"{dt}_{n}_allgather", dt, n, "allgather"))
            out.append((f"{dt}_{n}_broadcast", dt, n, "broadcast"))
    for dt in ALLREDUCE_DTYPES:
        for n in (SMALL, LARGE):
            out.append((f"{dt}_{n}_sum", dt, n, "Sum"))
            if dt.startswith("float"):
                out.append((f"{dt}_{n}_average", dt, n, "Average"))
            out.append((f"{dt}_{n}_max", dt, n, "Max"))
            out.append((f"{dt}_{n}_min", dt, n, "Min"))
    out.append(("float32_small_product", "float32", SMALL, "Product"))
    out.append(("int32_small_product", "int32", SMALL, "Product"))
    for n in (FP32_BELOW, FP32_AT):
        out.append((f"float32_{n}_sum", "float32", n, "Sum"))
        out.append((f"float32_{n}_average", "float32", n, "Average"))
    return out


def compressible(dtype, n, op):
    return dtype == "float32" and op in ("Sum", "Average") and 4 * n >= 65536


def make_input(name, dtype, n, op, rank):
    """Deterministic per (case, rank); integers stay small enough not to overflow."""
    seed = WORLD_SEED + 7919 * rank + int(hashlib.sha1(name.encode()).hexdigest()[:6], 16)
    g = torch.Generator().manual_seed(seed)
    if op == "Product":
        if dtype == "int32":
            return torch.randint(1, 4, (n,), generator=g, dtype=torch.int32)
        return (0.5 + torch.rand(n, generator=g)).to(getattr(torch, dtype))
    if dtype == "uint8":
        return torch.randint(0, 60, (n,), generator=g, dtype=torch.uint8)
    if dtype == "int8":
        return torch.randint(-30, 31, (n,), generator=g, dtype=torch.int8)
    if dtype in ("int32", "int64"):
        return torch.randint(-10**6, 10**6, (n,), generator=g, dtype=getattr(torch, dtype))
    return torch.randn(n, generator=g, dtype=torch.float32).to(getattr(torch, dtype))


def digest(t):
    return int.from_bytes(hashlib.sha1(t.contiguous().numpy().tobytes()).digest()[:8],
                          "little", signed=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    args = p.parse_args()
    torch.set_num_threads(1)
    import horovod.torch as hvd
    hvd.init()
    rank = hvd.rank()
    results = {}
    keep_alive = []  # distinct output buffers: no residual key is ever reused in this run
    refused = {}
    for dt in BYTE_DTYPES:  # confirm what the docstring says, so a newer Horovod is noticed
        try:
            hvd.allreduce(make_input("probe", dt, 8, "Sum", rank), name=f"probe_{dt}", op=hvd.Sum)
            refused[dt] = ""
        except ValueError as e:
            refused[dt] = str(e)
    for name, dtype, n, op in cases():
        x = make_input(name, dtype, n, op, rank)
        if op == "allgather":
            y = hvd.allgather(x, name=name)
        elif op == "broadcast":
            y = hvd.broadcast(x, root_rank=1, name=name)
        else:
            y = hvd.allreduce(x, name=name, op=getattr(hvd, op))
        keep_alive.append(y)
        results[name] = y.clone()
    digests = torch.tensor([digest(results[c[0]]) for c in cases()], dtype=torch.int64)
    gathered = hvd.allgather(digests.unsqueeze(0), name="dtype_digests")
    same_on_all_ranks = bool((gathered == gathered[0]).all())
    if rank == 0:
        torch.save({"results": results, "same_on_all_ranks": same_on_all_ranks,
                    "world_size": hvd.size(), "allreduce_refused": refused}, args.out)
        print(f"hvd_dtypes: {len(results)} allreduces, same bits on every rank: "
              f"{same_on_all_ranks}", flush=True)
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
