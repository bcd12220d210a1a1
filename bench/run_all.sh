#!/usr/bin/env bash
# bench/run_all.sh: regenerates every figure and table of docs/performance.md.
#
#   bench/run_all.sh [--build DIR] [--out DIR] [--rate RATE] [--np N] [--quick]
#
#   --build DIR  CMake build folder (default: build); configured and the needed
#                targets built (-j2) if missing
#   --out DIR    results: CSV, JSON, PNG, Markdown tables, logs (default: docs/perf)
#   --rate RATE  emulated link for the netem sweeps (default: 1gbit)
#   --np N       ranks (default: 4)
#   --quick      a tiny sweep, to check the script itself
#   --only LIST  some steps only, comma-separated: netem,shm,wirecheck,overhead,kernels
#
# What it runs (each step writes <out>/<step>.*):
#   netem_<rate>  size sweep over TCP on a rate-limited loopback (bench/netem.sh; root)
#   shm           the same sweep over shared memory
#   wirecheck     per compressor, SlimReduce's byte count against the emulated wire's
#   overhead      bench/overhead_latency (C) and overhead_latency_f (Fortran), with and
#                 without the library, alternated
#   bench_cast, bench_topk, bench_pack  the Google Benchmark kernel binaries, if built
# Top-k ratios are read by the library at MPI_Init, so each ratio is its own
# run (with its own "none" baseline); plot_bench.py merges them.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
out=$root/docs/perf
rate=1gbit
np=4
sweep=(-b 16K -e 64M -f 4 -n 5 -w 1 -c 1)
# Shared memory is quick but noisy on a shared machine: more iterations.
shm_sweep=(-b 16K -e 64M -f 4 -n 20 -w 2 -c 1)
overhead_args=(-n 400 -k 50)
only=netem,shm,wirecheck,overhead,kernels
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) build=$(realpath -m "$2"); shift 2 ;;
    --out) out=$(realpath -m "$2"); shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --np) np=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --quick)
      sweep=(-b 32K -e 256K -f 8 -n 2 -w 1 -c 1)
      shm_sweep=("${sweep[@]}")
      overhead_args=(-n 5 -k 10)
      shift
      ;;
    *) sed -n "2,22p" "$0" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
# Results must not depend on the caller's shell: no stray SLIMREDUCE_* settings.
while read -r name; do unset "$name"; done < <(compgen -e | grep '^SLIMREDUCE_' || true)

log() { echo "run_all: $*" >&2; }

build_targets() {
  if [[ ! -f $build/CMakeCache.txt ]]; then
    cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  fi
  cmake --build "$build" -j2 --target slimreduce slimreduce-bench overhead_latency null_preload \
    >/dev/null
  cmake --build "$build" -j2 --target overhead_latency_f >/dev/null 2>&1 || true
  # The kernel benchmarks are optional: the figures that need them are skipped.
  cmake --build "$build" -j2 --target bench_cast bench_topk bench_pack >/dev/null 2>&1 ||
    log "a kernel benchmark did not build; its section is skipped"
}

lib() { echo "$build/interpose/libslimreduce.so"; }
bench_bin() { echo "$build/bench/slimreduce-bench"; }
mpirun_base=(mpirun --allow-run-as-root --oversubscribe -np "$np")
shm_flags=(--mca btl_vader_single_copy_mechanism none)
# shellcheck disable=SC2054 # "tcp,self" is one argument
tcp_flags=(--mca btl tcp,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)

# sweep_run NAME RATIO COMPRESSORS TRANSPORT: one bench process (one top-k ratio).
sweep_run() {
  local name=$1 ratio=$2 compressors=$3 transport=$4 label
  local command=("${mpirun_base[@]}") args=("${sweep[@]}")
  if [[ $transport == shm ]]; then
    command+=("${shm_flags[@]}")
    args=("${shm_sweep[@]}")
    label="shared memory, $np ranks"
  else
    command+=("${tcp_flags[@]}")
    label="TCP over loopback limited to $rate (netem.sh), $np ranks"
  fi
  command+=(-x "LD_PRELOAD=$(lib)" -x "SLIMREDUCE_TOPK_RATIO=$ratio" "$(bench_bin)"
    "${args[@]}" --compressors "$compressors" --label "$label"
    --csv "$out/$name.csv" --json "$out/$name.json")
  if [[ $transport == shm ]]; then
    "${command[@]}" | tee "$out/$name.txt"
  else
    "$root/bench/netem.sh" "$rate" -- "${command[@]}" | tee "$out/$name.txt"
  fi
}

# sweeps TRANSPORT PREFIX: both ratios, then the charts and the table.
sweeps() {
  local transport=$1 prefix=$2
  log "$prefix: $transport sweep (see <out>/${prefix}_a.txt for the arguments)"
  sweep_run "${prefix}_a" 0.01 none,fp16,bf16,topk:0.01 "$transport"
  sweep_run "${prefix}_b" 0.001 none,topk:0.001 "$transport"
  python3 "$root/bench/plot_bench.py" "$out/${prefix}_a.json" "$out/${prefix}_b.json" \
    --out "$out/$prefix" --markdown "$out/$prefix.md" --title "$(title_of "$transport")"
}

title_of() {
  if [[ $1 == shm ]]; then
    echo "$np ranks, shared memory, $(nproc)-core VM"
  else
    echo "$np ranks, TCP over loopback limited to $rate (tbf), $(nproc)-core VM"
  fi
}

# Plain and preloaded runs alternate, three of each, so that drift on a shared
# machine hits both alike; the ratio is taken per size from the medians. Each
# run also times PMPI_Allreduce (never intercepted) in blocks alternating with
# MPI_Allreduce's, and reports the median ratio of neighbouring blocks: in the
# preloaded runs that is the overhead within one process, in the plain runs
# (same path twice) the noise floor. A third kind of run preloads
# bench/null_preload.c, an interposer that only calls PMPI_Allreduce: what any
# interposition costs on this machine. The median over the three runs is shown.
overhead() {
  log "overhead: overhead_latency ${overhead_args[*]}, 2 ranks"
  local command=(mpirun --allow-run-as-root --oversubscribe -np 2 "${shm_flags[@]}")
  local program=("$build/bench/overhead_latency" "${overhead_args[@]}")
  : >"$out/overhead.txt"
  for round in 1 2 3; do
    "${command[@]}" "${program[@]}" | tee -a "$out/overhead.txt" >"$out/overhead_plain_$round.tmp"
    # fp16 is on, but every message (<= 64 KiB) is below the 128 KiB threshold:
    # each call goes through the whole decision and then passes through.
    "${command[@]}" -x "LD_PRELOAD=$(lib)" -x SLIMREDUCE_COMPRESSOR=fp16 \
      -x SLIMREDUCE_MIN_BYTES=128K "${program[@]}" |
      tee -a "$out/overhead.txt" >"$out/overhead_preloaded_$round.tmp"
    "${command[@]}" -x "LD_PRELOAD=$build/bench/libnull_preload.so" "${program[@]}" |
      tee -a "$out/overhead.txt" >"$out/overhead_null_$round.tmp"
  done
  python3 - "$out" <<'EOF'
import glob, statistics, sys
out = sys.argv[1]
def runs(kind):  # [{bytes: (latency_us, pmpi_us, paired_ratio)}] per run
    found = []
    for path in sorted(glob.glob(f"{out}/overhead_{kind}_*.tmp")):
        rows = [l.split() for l in open(path) if l.strip() and not l.startswith("#")]
        found.append({int(b): (float(us), float(pmpi), float(r)) for b, us, pmpi, r in rows})
    return found
plain, pre, null = runs("plain"), runs("preloaded"), runs("null")
med = statistics.median
with open(f"{out}/overhead.csv", "w") as csv, open(f"{out}/overhead.md", "w") as md:
    csv.write("bytes,plain_us,preloaded_us,ratio_runs,ratio_in_process,ratio_control,"
              "ratio_null_preload\n")
    md.write("| bytes | plain (us) | preloaded (us) | ratio, separate runs | "
             "ratio MPI/PMPI, preloaded | ratio MPI/PMPI, plain (noise) | "
             "ratio MPI/PMPI, do-nothing preload |\n"
             "|---:|---:|---:|---:|---:|---:|---:|\n")
    for size in sorted(plain[0]):
        a, b = med(r[size][0] for r in plain), med(r[size][0] for r in pre)
        inproc = med(r[size][2] for r in pre)
        control = med(r[size][2] for r in plain)
        floor = med(r[size][2] for r in null)
        csv.write(f"{size},{a:.3f},{b:.3f},{b / a:.4f},{inproc:.4f},{control:.4f},{floor:.4f}\n")
        md.write(f"| {size} | {a:.3f} | {b:.3f} | {b / a:.3f} | {inproc:.3f} | {control:.3f} "
                 f"| {floor:.3f} |\n")
print(open(f"{out}/overhead.md").read())
EOF
  rm -f "$out"/overhead_*.tmp
  overhead_fortran
}

# The same from Fortran (`use mpi`), through the library's Fortran entry points.
overhead_fortran() {
  local program=$build/bench/overhead_latency_f
  if [[ ! -x $program ]]; then
    log "overhead_latency_f: not built (no Fortran compiler), skipped"
    return
  fi
  local args=("${overhead_args[1]}" "${overhead_args[3]}")  # blocks, calls
  log "overhead: overhead_latency_f ${args[*]}, 2 ranks"
  local command=(mpirun --allow-run-as-root --oversubscribe -np 2 "${shm_flags[@]}")
  : >"$out/overhead_fortran.txt"
  for round in 1 2 3; do
    "${command[@]}" "$program" "${args[@]}" |
      tee -a "$out/overhead_fortran.txt" >"$out/overhead_f_plain_$round.tmp"
    "${command[@]}" -x "LD_PRELOAD=$(lib)" -x SLIMREDUCE_COMPRESSOR=fp16 \
      -x SLIMREDUCE_MIN_BYTES=128K "$program" "${args[@]}" |
      tee -a "$out/overhead_fortran.txt" >"$out/overhead_f_preloaded_$round.tmp"
  done
  python3 - "$out" <<'EOF'
import glob, statistics, sys
out = sys.argv[1]
def runs(kind):  # [{bytes: paired_ratio}] per run
    found = []
    for path in sorted(glob.glob(f"{out}/overhead_f_{kind}_*.tmp")):
        rows = [l.split() for l in open(path) if l.strip() and not l.startswith("#")]
        found.append({int(b): float(r) for b, _, _, r in rows})
    return found
plain, pre = runs("plain"), runs("preloaded")
med = statistics.median
with open(f"{out}/overhead_fortran.md", "w") as md:
    md.write("| bytes | ratio MPI/PMPI_ALLREDUCE, preloaded | ratio, plain (noise) |\n"
             "|---:|---:|---:|\n")
    for size in sorted(plain[0]):
        md.write(f"| {size} | {med(r[size] for r in pre):.3f} | "
                 f"{med(r[size] for r in plain):.3f} |\n")
print(open(f"{out}/overhead_fortran.md").read())
EOF
  rm -f "$out"/overhead_f_*.tmp
}

# Short runs, one per compressor and size, under netem: the bytes SlimReduce
# counted (all ranks, every intercepted call) against lo's tx_bytes.
wire_check() {
  log "wirecheck: 64K (50 calls) and 16M (3 calls), one run per compressor, netem $rate"
  local table=$out/wirecheck.md
  echo "| size | compressor | SlimReduce wire_sent (bytes) | lo tx_bytes | packets | tx / counted | (tx - 66 B x packets) / counted |" >"$table"
  echo "|---:|---|---:|---:|---:|---:|---:|" >>"$table"
  for size_iters in 64K:50 16M:3; do
    for compressor in none fp16 bf16 topk:0.01 topk:0.001; do
      local ratio=0.01 size=${size_iters%:*} iters=${size_iters#*:}
      [[ $compressor == topk:0.001 ]] && ratio=0.001
      "$root/bench/netem.sh" "$rate" -- "${mpirun_base[@]}" "${tcp_flags[@]}" \
        -x "LD_PRELOAD=$(lib)" -x "SLIMREDUCE_TOPK_RATIO=$ratio" "$(bench_bin)" -b "$size" \
        -e "$size" -n "$iters" -w 0 -c 0 --no-baseline --compressors "$compressor" \
        >"$out/wirecheck.tmp"
      python3 - "$size" "$compressor" "$out/wirecheck.tmp" >>"$table" <<'EOF'
import re, sys
text = open(sys.argv[3]).read()
counted = float(re.search(r"total wire_sent, all ranks, every intercepted call: (\d+)", text)[1])
tx, packets = map(int, re.search(r"wire carried (\d+) bytes in (\d+) packets", text).groups())
print(f"| {sys.argv[1]} | {sys.argv[2]} | {counted:.0f} | {tx} | {packets} | {tx / counted:.4f} | "
      f"{(tx - 66 * packets) / counted:.4f} |")
EOF
    done
  done
  rm -f "$out/wirecheck.tmp"
  cat "$table"
}

kernel_benchmarks() {
  for name in bench_cast bench_topk bench_pack; do
    local binary=$build/bench/$name
    if [[ ! -x $binary ]]; then
      log "$name: not built, skipped"
      continue
    fi
    log "$name: --benchmark_min_time=0.05"
    "$binary" --benchmark_min_time=0.05 --benchmark_out="$out/$name.json" \
      --benchmark_out_format=json | tee "$out/$name.txt"
  done
}

build_targets
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB," \
    "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
  echo "kernel: $(uname -r); $(mpirun --version | head -n 1)"
  echo "commit: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)" \
    "(plus uncommitted changes: $(git -C "$root" status --porcelain 2>/dev/null | wc -l) files)"
} | tee "$out/machine.txt"
wants() { [[ ,$only, == *,$1,* ]]; }
if wants netem; then sweeps netem "netem_$rate"; fi
if wants shm; then sweeps shm shm; fi
if wants wirecheck; then wire_check; fi
if wants overhead; then overhead; fi
if wants kernels; then kernel_benchmarks; fi
log "done: results in $out"
