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

# Each source is compiled once into an object that every target shares,
# through ccache where it is installed (scripts/compiler_cache.sh sets it up
# for the suite), then each target is linked: a warm cache builds all six in
# seconds, a cold one compiles each library source once instead of once per target.
compiler=(clang++)
if [ "${SLIMREDUCE_NO_CCACHE:-0}" != 1 ] && command -v ccache >/dev/null 2>&1; then
  compiler=(ccache clang++)
fi
sanitizers=address,undefined
flags=(-std=c++20 -O1 -g -fno-omit-frame-pointer -fno-sanitize-recover=undefined -I"$root" -pthread)
objects=$out/objects
mkdir -p "$objects"
# object SOURCE: compiles SOURCE (instrumented for the fuzzer, not linked with
# its main) and prints the object's path.
object() {
  local source=$1 name
  name=$(realpath --relative-to="$root" "$source" | tr / _)
  "${compiler[@]}" "${flags[@]}" -fsanitize=fuzzer-no-link,$sanitizers -c "$source" \
    -o "$objects/$name.o" 2> "$objects/$name.log" || {
    echo "run_fuzz.sh: $source did not compile:" >&2; tail -20 "$objects/$name.log" >&2; exit 2; }
  echo "$objects/$name.o"
}
kernels=()
for source in "$root"/kernels/*.cc; do kernels+=("$(object "$source")"); done  # no_device.cc included
compressors=()
for source in "$root"/compressors/*.cc; do compressors+=("$(object "$source")"); done
# The settings table, its value parsers and the checks of settings read together.
settings=""
for source in settings setting_values setting_checks; do
  settings+=" $(object "$root/core/runtime/$source.cc")"
done
declare -A objects_of=(
  [topk_payload]="${kernels[*]}"
  [quant8_block]="${kernels[*]}"
  [quant8_minmax_block]="${kernels[*]}"
  [quant_packed_block]="${kernels[*]}"
  [sharded_parts]="${compressors[*]} ${kernels[*]}"
  [settings]="${settings# } ${compressors[*]} ${kernels[*]}"
)
status=0
for target in topk_payload quant8_block quant8_minmax_block quant_packed_block sharded_parts \
    settings; do
  binary=$out/fuzz_$target
  main=$(object "$root/tests/fuzz/fuzz_$target.cc")
  # shellcheck disable=SC2086
  clang++ "${flags[@]}" -fsanitize=fuzzer,$sanitizers "$main" ${objects_of[$target]} \
    -o "$binary" 2> "$out/fuzz_$target.build.log" || {
    echo "run_fuzz.sh: fuzz_$target did not link:"; tail -20 "$out/fuzz_$target.build.log"; exit 2; }
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
