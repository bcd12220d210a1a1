#!/usr/bin/env bash
# The GPU path's checks, in one call on a GPU machine (at most 6 minutes):
#   1. build there (CMake, CUDA on, sm_90 only to save time);
#   2. bench/device_check.cu: every kernel against its CPU twin on fresh random
#      inputs (bit-exact; the simulated ring sum also within a stated tolerance
#      of fp64), outputs poisoned first, then CUDA-event timings (median) next
#      to a device-to-device copy of the same run;
#   3. tests/cuda/nccl_app.cu under LD_PRELOAD (libslimreduce.so where MPI was
#      there, else libslimreduce_nccl.so): ncclAllReduce on one rank with each
#      compressor, every result checked bit for bit;
#   4. PyTorch DDP (NCCL backend, world size 1) under LD_PRELOAD of the
#      NCCL-only library, as a torchrun job would use it: interception counted
#      and gradients checked against a model without DDP;
#   5. tests/cuda/mpi_device_app.cu: 2 and 4 MPI ranks sharing the GPU call
#      MPI_Allreduce on device buffers, each checked bit for bit against its
#      host twin (Open MPI brought along as Debian packages when the machine
#      has none: bench/device_mpi.sh);
#   6. compute-sanitizer memcheck over the kernel checks, in the time left;
# then one short table. Logs go to $OUT (at most 8 files come back). Exit
# status 1 if a row failed; a SKIP (the machine lacked something) is not one.
# Usage: bash bench/device_check.sh   (from the repository root; OUT defaults to ./device-out)
# After 2, cub::DeviceTopK against topk_select (bench/cub_topk.cu): with the
# toolkit's CCCL when it has DeviceTopK (3.5 and later), else with NVIDIA's CCCL
# wheel brought in .device-deps/cccl/ (bench/device_deps.sh); a SKIP without.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
OUT=${OUT:-$ROOT/device-out}
B=${BUILD_DIR:-/tmp/slimreduce-gpu-build}
mkdir -p "$OUT" "$B"
[ -d /usr/local/cuda/bin ] && PATH=/usr/local/cuda/bin:$PATH
START=$SECONDS
declare -a ROWS=()
FAILED=0
row() {
  ROWS+=("$(printf '%-28s %-6s %s' "$1" "$2" "$3")")
  case $2 in FAIL | MISSING) FAILED=$((FAILED + 1)) ;; esac
}
# A program's exit code as a row's verdict; 77 is "no GPU seen".
verdict() { case $1 in 0) echo ok ;; 77) echo SKIP ;; *) echo FAIL ;; esac; }
left() { echo $((330 - (SECONDS - START))); }
# At most $1 seconds, and never past the point where $2 seconds are left (10 at least).
cap() { local t=$(($(left) - $2)); [ $t -gt $1 ] && t=$1; [ $t -lt 10 ] && t=10; echo $t; }
log() { echo "[$((SECONDS - START))s] $*"; }

# ---- 0. what the machine has ----------------------------------------------------
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
  command -v nvcc && nvcc --version | tail -2
  cmake --version | head -1
  command -v mpicc || echo "no mpicc"
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())' 2>&1
} > "$OUT/machine.log" 2>&1
cat "$OUT/machine.log"

# MPI: the machine's, else Debian's Open MPI brought along as .deb files in
# .device-deps/ (bench/device_deps.sh, run on the CPU machine; the device call
# carries that folder) and unpacked into the build folder, never over /.
source "$ROOT/bench/device_mpi.sh"
device_mpi_setup "$B/mpi" >> "$OUT/machine.log" 2>&1
tail -1 "$OUT/machine.log"
MPI_HINT=(); [ -n "${DEVICE_MPI_C_COMPILER:-}" ] && MPI_HINT=(-DMPI_C_COMPILER="$DEVICE_MPI_C_COMPILER")

# NCCL headers and library: the toolkit's, else PyTorch's wheel (nvidia-nccl-cu13).
NCCL_INC="" NCCL_LIB=""
for dir in /usr/local/cuda/include /usr/include; do
  [ -f "$dir/nccl.h" ] && NCCL_INC=$dir && break
done
for dir in /usr/local/cuda/lib64 /usr/lib/x86_64-linux-gnu; do
  [ -e "$dir/libnccl.so.2" ] && NCCL_LIB=$dir && break
done
if [ -z "$NCCL_INC" ] || [ -z "$NCCL_LIB" ]; then
  wheel=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null)
  [ -z "$NCCL_INC" ] && [ -f "$wheel/include/nccl.h" ] && NCCL_INC=$wheel/include
  [ -z "$NCCL_LIB" ] && [ -e "$wheel/lib/libnccl.so.2" ] && NCCL_LIB=$wheel/lib
fi
log "nccl.h in ${NCCL_INC:-?}, libnccl.so.2 in ${NCCL_LIB:-?}"

# CCCL for cub_topk alone: the toolkit's if it is 3.5 or later (cub_topk's
# DeviceTopK API), else the newest wheel's brought in .device-deps/cccl/.
# (CUDA 13 keeps CCCL in include/cccl, CUDA 12 in include.)
TOOLKIT_CCCL=$(cat /usr/local/cuda/include/cccl/cuda/std/__cccl/version.h \
  /usr/local/cuda/include/cuda/std/__cccl/version.h 2>/dev/null |
  sed -n 's/^#define CCCL_VERSION \([0-9]*\).*/\1/p' | head -1)
CCCL_INC=""
CCCL_WHEEL=$(ls -1 "$ROOT"/.device-deps/cccl/nvidia_cuda_cccl-*.whl 2>/dev/null | sort -V | tail -1)
if [ "${TOOLKIT_CCCL:-0}" -lt 3005000 ] && [ -n "$CCCL_WHEEL" ] &&
  python3 -m zipfile -e "$CCCL_WHEEL" "$B/cccl"; then
  found=$(ls -d "$B"/cccl/nvidia/*/include/cccl/cub 2>/dev/null | head -1)
  [ -n "$found" ] && CCCL_INC=$(dirname "$found")
fi
log "CCCL for cub_topk: ${CCCL_INC:-the one of the toolkit} (toolkit CCCL_VERSION ${TOOLKIT_CCCL:-unknown})"

# The programs built below use the shared CUDA runtime, like a framework: found next to nvcc.
CUDART_DIR=$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")/../lib64

# ---- 1. build -------------------------------------------------------------------------
# libslimreduce.so (MPI and NCCL) where MPI is there; libslimreduce_nccl.so (NCCL
# alone, for torchrun/DDP jobs) always: CMake builds the NCCL-only library when it
# finds no MPI.
JOBS=$(nproc)
GEN=(); command -v ninja >/dev/null && GEN=(-G Ninja)
HAVE_MPI=0
[ -n "${DEVICE_MPI_C_COMPILER:-}" ] && HAVE_MPI=1  # device_mpi_setup found or brought one
LIB=$B/interpose/libslimreduce.so
NCCL_ONLY_LIB=$B/interpose/libslimreduce_nccl.so
{
  if [ -n "$NCCL_INC" ]; then
    targets=(slimreduce_nccl device_check slimreduce_kernels)
    timeout "$(cap 60 150)" cmake -S "$ROOT" -B "$B" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release -DSLIMREDUCE_CUDA=ON \
      -DCMAKE_CUDA_ARCHITECTURES=90 -DSLIMREDUCE_BUILD_TESTS=OFF -DSLIMREDUCE_BUILD_BENCH=OFF \
      -DSLIMREDUCE_NCCL_INCLUDE_DIR="$NCCL_INC" -DSLIMREDUCE_CCCL_INCLUDE_DIR="$CCCL_INC" \
      "${MPI_HINT[@]}" &&
      timeout "$(cap 240 90)" cmake --build "$B" -j"$JOBS" --target "${targets[@]}"
    # The MPI library apart: an MPI that CMake cannot use costs its rows only.
    [ $HAVE_MPI = 1 ] && timeout "$(cap 120 90)" cmake --build "$B" -j"$JOBS" --target slimreduce
    # And the CUB comparison (one slow file), never at the cost of the rows after it.
    timeout "$(cap 90 180)" cmake --build "$B" -j"$JOBS" --target cub_topk
    DEVICE_CHECK=$B/kernels/cuda/device_check
  else
    # No nccl.h: no library, but the kernels can be checked.
    echo "no nccl.h: building device_check alone"
    mkdir -p "$B/direct" && cd "$B/direct" &&
      for f in "$ROOT"/kernels/*.cc; do
        g++ -std=c++20 -O2 -fPIC -ffp-contract=off -I"$ROOT" -c "$f" -o "$(basename "$f").o" &
      done && wait &&
      timeout "$(cap 180 120)" nvcc -std=c++17 -O3 --fmad=false -arch=sm_90 -I"$ROOT" "$ROOT"/bench/device_check.cu \
        "$ROOT"/bench/device_timing.cu "$ROOT"/bench/device_check_low_rank.cu \
        "$ROOT"/bench/device_check_topk_shards.cu "$ROOT"/bench/device_check_minmax.cu \
        "$ROOT"/bench/device_check_norm.cu "$ROOT"/bench/device_check_quant_packed.cu "$ROOT"/bench/device_check_fp8.cu \
        "$ROOT"/kernels/cuda/*.cu ./*.o -o device_check -Xcompiler -pthread
    cd "$ROOT"
    DEVICE_CHECK=$B/direct/device_check
  fi
  # nccl_app links the NCCL-only library; step 3 preloads the full one over it where built.
  if [ -f "$NCCL_ONLY_LIB" ] && [ -n "$NCCL_LIB" ]; then
    timeout "$(cap 90 120)" nvcc -std=c++17 -O2 -arch=sm_90 -I"$ROOT" -I"$NCCL_INC" "$ROOT/tests/cuda/nccl_app.cu" \
      -o "$B/nccl_app" -L"$B/interpose" -lslimreduce_nccl "$B/kernels/libslimreduce_kernels.a" \
      -L"$NCCL_LIB" -Xlinker -l:libnccl.so.2 -Xlinker -rpath="$B/interpose:$NCCL_LIB:$CUDART_DIR" \
      --cudart shared -Xcompiler -pthread
  fi
  if [ -f "$LIB" ]; then
    # nvcc takes -I, -L and -l as they are; the wrapper's other flags go to the host tools.
    mpi_flags=()
    for flag in $(mpicc --showme:compile) $(mpicc --showme:link); do
      case $flag in
        -I* | -L* | -l*) mpi_flags+=("$flag") ;;
        -Wl,*) mpi_flags+=(-Xlinker "${flag#-Wl,}") ;;
        *) mpi_flags+=(-Xcompiler "$flag") ;;
      esac
    done
    timeout "$(cap 90 120)" nvcc -std=c++17 -O2 -arch=sm_90 -I"$ROOT" "$ROOT/tests/cuda/mpi_device_app.cu" \
      -o "$B/mpi_device_app" -L"$B/interpose" -lslimreduce "${mpi_flags[@]}" \
      -Xlinker -rpath="$B/interpose:$CUDART_DIR" --cudart shared
  fi
} > "$OUT/build.log" 2>&1
tail -3 "$OUT/build.log"
if [ -x "$DEVICE_CHECK" ]; then row build ok "$((SECONDS - START))s"; else row build FAIL "see build.log"; fi
[ $HAVE_MPI = 0 ] && row libslimreduce.so SKIP "no MPI (bench/device_deps.sh brings one)"
for built in "$NCCL_ONLY_LIB" $([ $HAVE_MPI = 1 ] && echo "$LIB"); do
  [ -f "$built" ] || { row "$(basename "$built")" MISSING "see build.log"; continue; }
  { echo "ldd $built:"; ldd "$built"; nm -D --defined-only "$built" | grep -E ' (nccl|slimreduce_)'; } >> "$OUT/build.log"
done
# nccl_app runs under the full library where it was built (a Horovod-like job), else under its own.
APP_PRELOAD=$NCCL_ONLY_LIB
[ -f "$LIB" ] && APP_PRELOAD=$LIB

# ---- 2. kernels against their CPU twins, then timings ---------------------------------
if [ -x "$DEVICE_CHECK" ]; then
  log "device_check"
  timeout "$(cap 150 60)" "$DEVICE_CHECK" > "$OUT/device_check.log" 2>&1
  rc=$?
  summary=$(grep '^device_check:' "$OUT/device_check.log" || echo "rc $rc, see device_check.log")
  row "kernels vs CPU twins" "$(verdict $rc)" "${summary#device_check: }"
  grep -E '^check .* FAIL' "$OUT/device_check.log" | head -5
fi

# cub::DeviceTopK against topk_select: timed, and the same entries chosen.
CUB_TOPK=$B/kernels/cuda/cub_topk
if [ -x "$CUB_TOPK" ] && [ "$(left)" -ge 150 ]; then
  log "cub_topk"
  echo "=== cub_topk" >> "$OUT/device_check.log"
  timeout "$(cap 30 120)" "$CUB_TOPK" >> "$OUT/device_check.log" 2>&1
  rc=$?
  said=$(sed -n '/^=== cub_topk$/,$p' "$OUT/device_check.log" | grep -m1 -E '^(cub_topk|fatal)')
  row "cub DeviceTopK vs ours" "$(verdict $rc)" "rc $rc, $(sed 's/^cub_topk:* *//' <<<"$said" | cut -c1-60)"
elif [ -x "$CUB_TOPK" ]; then
  row "cub DeviceTopK vs ours" SKIP "out of time"
else
  row "cub DeviceTopK vs ours" SKIP "cub_topk not built (see build.log)"
fi

# ---- 3. our CUDA program, ncclAllReduce on one rank, each compressor ---------------------
if [ -x "$B/nccl_app" ]; then
  # topk_sharded: top-k through the sharded algorithm (its parts, sizes read back, owners' step).
  # Calls above 4 MiB are cut into partitions and pipelined over a side stream;
  # *_unpipelined: the same with SLIMREDUCE_PIPELINE=0 (the same bits; its time line to compare).
  for name in none fp16 bf16 topk powersgd int8 topk_sharded fp16_unpipelined topk_unpipelined; do
    compressor=${name%%_*}
    algorithm=$([ "$name" = topk_sharded ] && echo sharded || echo auto)
    pipeline=$([ "${name#*_}" = unpipelined ] && echo 0 || echo auto)
    [ "$(left)" -lt 120 ] && { row "nccl_app $name" SKIP "out of time"; continue; }
    [ "${hung:-}" = nccl_app ] && { row "nccl_app $name" SKIP "an earlier run hung"; continue; }
    log "nccl_app $name"
    echo "=== nccl_app $name" >> "$OUT/nccl_app.log"
    env LD_PRELOAD="$APP_PRELOAD" LD_LIBRARY_PATH="$NCCL_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" SLIMREDUCE_COMPRESSOR=$compressor \
      SLIMREDUCE_TOPK_ALGORITHM=$algorithm SLIMREDUCE_PIPELINE=$pipeline SLIMREDUCE_MIN_BYTES=64K \
      SLIMREDUCE_LOG_LEVEL=info NCCL_DEBUG=WARN NCCL_APP_TIME=1 \
      timeout 60 "$B/nccl_app" >> "$OUT/nccl_app.log" 2>&1
    rc=$?
    [ $rc = 124 ] && hung=nccl_app  # a hang would hang the next runs too: save their time
    [ $rc = 77 ] && no_gpu=1        # the program found no GPU (a SKIP row)
    fails=$(sed -n "/=== nccl_app $name\$/,\$p" "$OUT/nccl_app.log" | grep -c '^FAIL')
    row "nccl_app $name" "$(verdict $rc)" "rc $rc, $fails failed checks"
  done
  # SLIMREDUCE_TIMELINE on the NCCL path: spans from CUDA events, checked as in CI's host simulation.
  for compressor in fp16 int8; do
    [ "${no_gpu:-}" = 1 ] && { row "nccl timeline $compressor" SKIP "no GPU (nccl_app said 77)"; continue; }
    [ "$(left)" -lt 100 ] || [ "${hung:-}" = nccl_app ] && { row "nccl timeline $compressor" SKIP "out of time or hung"; continue; }
    log "nccl timeline $compressor"
    echo "=== timeline $compressor" >> "$OUT/nccl_app.log"
    # fp16's calls above 4 MiB run pipelined: their pieces' spans are checked too (--pipelined).
    pipelined=$([ "$compressor" = fp16 ] && echo --pipelined)
    timeout 90 python3 "$ROOT/tests/mpi/check_timeline.py" --np 1 --nccl $pipelined -- env LD_PRELOAD="$APP_PRELOAD" \
      LD_LIBRARY_PATH="$NCCL_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" SLIMREDUCE_COMPRESSOR=$compressor \
      SLIMREDUCE_MIN_BYTES=64K SLIMREDUCE_TIMELINE=@PREFIX@ NCCL_DEBUG=WARN "$B/nccl_app" >> "$OUT/nccl_app.log" 2>&1
    rc=$?
    said=$(sed -n "/=== timeline $compressor\$/,\$p" "$OUT/nccl_app.log" | grep -m1 -E 'NCCL groups timed|pipelined pieces|FAIL' | cut -c1-70)
    row "nccl timeline $compressor" "$(verdict $rc)" "rc $rc, ${said##*/}"
  done
elif [ -f "$NCCL_ONLY_LIB" ] && [ -n "$NCCL_LIB" ]; then
  row "nccl_app" FAIL "not built (see build.log)"
else
  row "nccl_app" SKIP "no libslimreduce_nccl/libnccl (see build.log)"
fi

# ---- 4. PyTorch DDP, NCCL backend, world size 1 ----------------------------------------
cat > "$B/ddp_check.py" <<'PY'
# DDP over NCCL at world size 1 under LD_PRELOAD=libslimreduce_nccl.so: the bucket
# allreduces must be intercepted, and the gradients must be the plain model's
# passed through the compressor (world size 1: the sum is this rank's payload).
import copy, ctypes, json, math, os, sys
import torch, torch.distributed as dist, torch.nn as nn

class Counters(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in
                ("intercepted", "compressed", "passed_through", "warmup", "ef_cap_fallback",
                 "input_bytes")] + [("wire_baseline", ctypes.c_double), ("wire_sent", ctypes.c_double),
                                    ("ef_resets", ctypes.c_uint64)]  # all of interpose/slimreduce.h

comp = os.environ.get("SLIMREDUCE_COMPRESSOR", "none")
ratio = float(os.environ.get("SLIMREDUCE_TOPK_RATIO", "0.01"))
dist.init_process_group("nccl", rank=0, world_size=1)
torch.manual_seed(0)
torch.backends.cuda.matmul.allow_tf32 = False
model = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 1024)).cuda()
plain = copy.deepcopy(model)
ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=4)
x = torch.randn(64, 1024, device="cuda")
ddp(x).square().mean().backward()
plain(x).square().mean().backward()
torch.cuda.synchronize()
def matches(g, r):
    """g: what came back; r: the plain value. World size 1: the compressor's image of r."""
    if comp == "none":
        return torch.equal(g, r)
    if comp in ("fp16", "bf16"):
        return torch.equal(g, r.to(torch.float16 if comp == "fp16" else torch.bfloat16).float())
    if comp == "powersgd":  # a projection of each bucket (P P^T M): finite, no longer than r
        return bool(torch.isfinite(g).all()) and float(g.norm()) <= float(r.norm()) * (1 + 1e-5)
    if comp == "int8":  # quantized twice (the rank's parts, the owner's sum): near r
        return bool(torch.isfinite(g).all()) and float((g - r).norm()) <= 0.02 * float(r.norm())
    return bool(((g == r) | (g == 0)).all())  # top-k: kept exactly, or not sent

ok, notes, nnz, total = True, [], 0, 0
if comp == "powersgd":  # per bucket, not per parameter: the norms of all of them
    got = torch.cat([p.grad.flatten() for p in model.parameters()])
    ok &= matches(got, torch.cat([q.grad.flatten() for q in plain.parameters()]))
for p, q in zip(model.parameters(), plain.parameters()):
    ok &= comp == "powersgd" or matches(p.grad, q.grad)
    nnz += int((p.grad != 0).sum())
    total += q.grad.numel()
if comp == "topk":
    ok &= 0 < nnz <= ratio * total + 16  # one rounding-up per DDP bucket, at most
notes.append(f"ddp grads ok {bool(ok)}, nonzero {nnz} of {total}")
# The process group's own allreduce, SUM and AVG, on a plain 4 MiB tensor.
for op in (dist.ReduceOp.SUM, dist.ReduceOp.AVG):
    t = torch.randn(1 << 20, device="cuda")
    r = t.clone()
    dist.all_reduce(t, op=op)
    torch.cuda.synchronize()
    good = matches(t, r) and (comp != "topk" or int((t != 0).sum()) <= math.ceil(ratio * t.numel()))
    notes.append(f"all_reduce {op} ok {good}")
    ok &= good
c = Counters()
lib = ctypes.CDLL(None)
got = hasattr(lib, "slimreduce_nccl_get_counters") and lib.slimreduce_nccl_get_counters(ctypes.byref(c)) == 0
intercepted = got and c.intercepted > 0
compressed_ok = c.compressed == 0 if comp == "none" else c.compressed > 0
print(json.dumps({"compressor": comp, "results_ok": bool(ok), "intercepted": c.intercepted,
                  "compressed": c.compressed, "passed_through": c.passed_through,
                  "notes": notes}))
dist.destroy_process_group()
sys.exit(0 if ok and intercepted and compressed_ok else 1)
PY
if [ -f "$NCCL_ONLY_LIB" ] && python3 -c 'import torch' 2>/dev/null; then
  port=29511
  for compressor in none fp16 bf16 topk powersgd int8; do
    [ "$(left)" -lt 45 ] && { row "ddp $compressor" SKIP "out of time"; continue; }
    [ "${hung:-}" = ddp ] && { row "ddp $compressor" SKIP "an earlier run hung"; continue; }
    log "ddp $compressor"
    echo "=== SLIMREDUCE_COMPRESSOR=$compressor" >> "$OUT/ddp.log"
    env LD_PRELOAD="$NCCL_ONLY_LIB" SLIMREDUCE_COMPRESSOR=$compressor SLIMREDUCE_LOG_LEVEL=info \
      MASTER_ADDR=127.0.0.1 MASTER_PORT=$((port++)) RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 NCCL_DEBUG=WARN \
      PYTHONUNBUFFERED=1 timeout "$(cap 90 5)" python3 "$B/ddp_check.py" >> "$OUT/ddp.log" 2>&1
    rc=$?
    [ $rc = 124 ] && hung=ddp
    result=$(sed -n "/=== SLIMREDUCE_COMPRESSOR=$compressor\$/,\$p" "$OUT/ddp.log" | grep '^{' | tail -1)
    row "ddp $compressor" "$([ $rc = 0 ] && echo ok || echo FAIL)" "rc $rc ${result:-no result}"
  done
else
  row "ddp" SKIP "no libslimreduce_nccl or no torch"
fi

# ---- 5. MPI ranks sharing the GPU, device buffers through the MPI path --------------------
# Each device call is checked bit for bit against its host twin (tests/cuda/mpi_device_app.cu).
if [ -x "$B/mpi_device_app" ]; then
  for run in "2 fp16" "2 bf16" "2 topk" "4 topk" "4 fp16" "2 powersgd" "4 powersgd" \
    "2 powersgd MPI_DEVICE_APP_INF=1" "2 int8" "4 int8"; do
    read -r np compressor extra <<<"$run"
    name="mpi device np$np $compressor${extra:+ ${extra#MPI_DEVICE_APP_}}"
    extra=${extra:-MPI_DEVICE_APP_TIME=1}
    [ "$(left)" -lt 75 ] && { row "$name" SKIP "out of time"; continue; }
    [ "${hung:-}" = mpi ] && { row "$name" SKIP "an earlier run hung"; continue; }
    log "mpi_device_app np$np $compressor"
    echo "=== np $np SLIMREDUCE_COMPRESSOR=$compressor" >> "$OUT/mpi_device.log"
    timeout 60 mpirun --allow-run-as-root --oversubscribe -np "$np" --mca pml ob1 --mca btl self,vader \
      --mca btl_vader_single_copy_mechanism none -x LD_PRELOAD="$LIB" \
      -x SLIMREDUCE_COMPRESSOR=$compressor -x SLIMREDUCE_LOG_LEVEL=warn -x "$extra" \
      "$B/mpi_device_app" >> "$OUT/mpi_device.log" 2>&1
    rc=$?
    [ $rc = 124 ] && hung=mpi
    result=$(sed -n "/=== np $np SLIMREDUCE_COMPRESSOR=$compressor\$/,\$p" "$OUT/mpi_device.log" |
      grep '^mpi_device_app' | tail -1)
    row "$name" "$(verdict $rc)" \
      "rc $rc ${result#mpi_device_app: }"
  done
elif [ -f "$LIB" ]; then
  row "mpi device buffers" FAIL "mpi_device_app not built (see build.log)"
else
  row "mpi device buffers" SKIP "no libslimreduce or no MPI (see build.log)"
fi

# ---- 6. memcheck of the kernel checks, if the time and the tool are there ----------------
# The bit-exact checks see wrong values and unwritten outputs; memcheck also sees
# reads and writes outside the buffers. It slows the kernels many times, so it
# runs last, without the timings, and only in the time left (on gVisor the tool
# cannot reach the GPU: its rows say so).
SANITIZER=$(command -v compute-sanitizer ||
  ls /usr/local/cuda*/compute-sanitizer/compute-sanitizer 2>/dev/null | head -n 1)
if [ -x "$DEVICE_CHECK" ] && [ -n "$SANITIZER" ]; then
  if [ "$(left)" -ge 100 ]; then
    log "compute-sanitizer memcheck"
    timeout $(($(left) - 20)) "$SANITIZER" --tool memcheck --leak-check no \
      "$DEVICE_CHECK" --no-timing > "$OUT/memcheck.log" 2>&1
    rc=$?
    if summary=$(grep -m1 'ERROR SUMMARY' "$OUT/memcheck.log"); then
      row "memcheck (kernel checks)" "$(grep -q 'ERROR SUMMARY: 0 errors' "$OUT/memcheck.log" && echo ok || echo FAIL)" \
        "${summary#========= }"
    elif [ $rc = 124 ]; then
      row "memcheck (kernel checks)" SKIP "out of time"
    else  # the tool did not run here (a microVM may refuse it): no verdict on the kernels
      row "memcheck (kernel checks)" SKIP "no summary, rc $rc: $(grep -m1 -i 'error' "$OUT/memcheck.log" | cut -c1-60)"
    fi
  else
    row "memcheck (kernel checks)" SKIP "out of time"
  fi
else
  row "memcheck (kernel checks)" SKIP "no device_check or no compute-sanitizer"
fi

# ---- the table ---------------------------------------------------------------------------
{
  echo
  echo "SlimReduce device check ($((SECONDS - START))s; logs in $OUT)"
  printf '%s\n' "${ROWS[@]}"
  grep '^time' "$OUT/device_check.log" "$OUT/mpi_device.log" "$OUT/nccl_app.log" 2>/dev/null |
    sed 's/^[^:]*://'
  grep -E '^cub_topk n ' "$OUT/device_check.log" 2>/dev/null | sed 's/^/time /'
} | tee "$OUT/summary.txt"
# Exit 1 when a row failed (SKIP is not a failure: the machine lacked something).
exit $((FAILED > 0))
