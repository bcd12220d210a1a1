# Sourced by the ThreadSanitizer checks (tests/check_mpi_threads_tsan.sh,
# tests/hostsim/check_threads_tsan.sh): one case, run and judged.
#   tsan_case LOG LABEL COMMAND...
# runs COMMAND (a function of the caller, which puts "${tsan_wrap[@]}" just
# before its program) with its output in LOG, and exits 1 with the first
# report when it fails or ThreadSanitizer reported anything. Kernels with more
# address randomization (vm.mmap_rnd_bits above 28) stop this GCC's
# ThreadSanitizer before main: the case then runs again under setarch -R.
# The options every case runs under: a report stops the program with exit 66.
tsan_options="halt_on_error=1 exitcode=66"
tsan_wrap=()
tsan_case() {
  local log=$1 label=$2 ok=1
  shift 2
  tsan_wrap=()
  "$@" >"$log" 2>&1 || ok=0
  if [ $ok = 0 ] && grep -q "unexpected memory mapping" "$log"; then
    echo "ThreadSanitizer could not start here (address randomization): again under setarch -R"
    tsan_wrap=(setarch "$(uname -m)" -R)
    ok=1
    "$@" >"$log" 2>&1 || ok=0
  fi
  # Any report fails it: a race's WARNING, and ThreadSanitizer's own errors
  # (a SEGV, a failed CHECK) that may come after the program's verdict.
  local report="(WARNING|ERROR): ThreadSanitizer|ThreadSanitizer: CHECK failed|runtime error:"
  if [ $ok = 0 ] || grep -a -q -E "$report" "$log"; then
    grep -a -A40 -m1 -E "$report" "$log" || tail -30 "$log"
    echo "FAIL: $label under ThreadSanitizer (full log: $log)"
    exit 1
  fi
}
