#!/usr/bin/env bash
# run_fuzz.sh SECONDS [BUILD_DIR]: builds each libFuzzer target in tests/fuzz
# (clang++ -fsanitize=fuzzer,address,undefined, from the library's own
# sources) and runs it for SECONDS on a copy of its seed corpus
# (tests/fuzz/corpus/<target>/). Prints each target's executions; exits 1 on
# a crash, a sanitizer report or a failed check (libFuzzer keeps the input as
# crash-* in BUILD_DIR), 2 when clang's libFuzzer is missing.
set -euo pipefail
seconds=${1:-30}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=${2:-$root/build/fuzz}
mkdir -p "$out"
command -v clang++ >/dev/null || { echo "run_fuzz.sh: clang++ not found (apt-get install clang)" >&2; exit 2; }

flags=(-std=c++20 -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined
       -fno-sanitize-recover=undefined -I"$root" -pthread)
kernels=()
for source in "$root"/kernels/*.cc; do kernels+=("$source"); done  # no_device.cc included
declare -A sources=(
  [topk_payload]="${kernels[*]}"
  [quant8_block]="${kernels[*]}"
  [sharded_parts]="$(ls "$root"/compressors/*.cc | tr '\n' ' ') ${kernels[*]}"
  [settings]="$root/core/runtime/settings.cc $(ls "$root"/compressors/*.cc | tr '\n' ' ') ${kernels[*]}"
)
status=0
for target in topk_payload quant8_block sharded_parts settings; do
  binary=$out/fuzz_$target
  # shellcheck disable=SC2086
  clang++ "${flags[@]}" "$root/tests/fuzz/fuzz_$target.cc" ${sources[$target]} -o "$binary" \
    2> "$out/fuzz_$target.build.log" || {
    echo "run_fuzz.sh: fuzz_$target did not build:"; tail -20 "$out/fuzz_$target.build.log"; exit 2; }
  corpus=$out/corpus_$target
  rm -rf "$corpus" && cp -r "$root/tests/fuzz/corpus/$target" "$corpus"
  if (cd "$out" && "$binary" -max_total_time="$seconds" -print_final_stats=1 "$corpus" \
        > "$out/fuzz_$target.log" 2>&1); then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/fuzz_$target.log")
    echo "fuzz_$target: ${seconds} s, ${runs:-?} executions, no crash ($(ls "$corpus" | wc -l) inputs in its corpus)"
  else
    echo "fuzz_$target: FAILED"; grep -E "ERROR|SUMMARY|runtime error|abort" "$out/fuzz_$target.log" | head -10
    status=1
  fi
done
exit $status
