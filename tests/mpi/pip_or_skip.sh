# Sourced by the scripts that make a venv from PyPI for the MPICH family's
# tests (mpich_python.sh, intel_mpi.sh):
#   pip_or_skip WHAT COMMAND...
# runs COMMAND (a pip call), its output kept aside; where it fails because
# PyPI cannot be reached (or has no such release), prints why and exits 77, a
# skip that scripts/not_run.sh refuses in CI unless PyPI's refusal is
# confirmed; on any other failure prints the output and exits 1.
pip_offline='Failed to establish a new connection|Temporary failure in name resolution|No matching distribution found|Could not find a version that satisfies|Network is unreachable|ProxyError'
pip_or_skip() {
  local what=$1 log rc=0
  shift
  log=$(mktemp)
  PIP_DISABLE_PIP_VERSION_CHECK=1 "$@" >"$log" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ]; then
    if grep -Eq "$pip_offline" "$log"; then
      echo "SKIPPED: PyPI is not reachable for $what:"
      tail -5 "$log"
      rm -f "$log"
      exit 77
    fi
    cat "$log"
    rm -f "$log"
    exit 1
  fi
  rm -f "$log"
}
