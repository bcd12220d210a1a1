#!/usr/bin/env bash
# Set-up for the Horovod integration test, scripted and cached.
#
#   tests/integration/horovod/setup.sh        # exit 0: ready; 77: SKIPPED (not to be had); 1: failed
#
# 1. Debian packages (apt-get, only those missing): CPU PyTorch 1.13 (python3-torch, libtorch-dev),
#    python3-dev, python3-pip, Open MPI, cmake, g++, and Horovod's run-time Python deps.
# 2. Horovod 0.28.1 from PyPI, built once as a wheel for the system /usr/bin/python3 (the one
#    Debian's torch belongs to) with MPI and PyTorch only, cached under
#    ~/.cache/slimreduce/ keyed by horovod + torch + python + Open MPI versions; later runs only
#    `pip install` the cached wheel (or nothing, when it is already installed).
#
# Exit code 77 (SKIP_RETURN_CODE in ctest) means a registry said no: the package is not to be had.
# It is printed loudly; it is never turned into a pass.
set -uo pipefail

HOROVOD_VERSION="${HOROVOD_VERSION:-0.28.1}"
PY=/usr/bin/python3            # not the pyenv python3 first on PATH: Debian's torch is for this one
SKIP_CODE=77
CACHE_ROOT="${SLIMREDUCE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/slimreduce}"

log()  { echo "[horovod-setup] $*"; }
skip() {
  echo "" >&2
  echo "################################################################################" >&2
  echo "### SKIPPED: Horovod integration test: $*" >&2
  echo "################################################################################" >&2
  exit "$SKIP_CODE"
}
fail() { echo "[horovod-setup] FAILED: $*" >&2; exit 1; }

if [ "${HVD_TEST_SKIP:-0}" = 1 ]; then
  skip "HVD_TEST_SKIP=1 is set (asked not to run)"
fi

SUDO=""
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; else SUDO=""; fi
fi

# ---------------------------------------------------------------- 1. Debian packages
APT_PKGS=(python3-torch libtorch-dev pybind11-dev python3-dev python3-pip python3-setuptools python3-wheel
          python3-cffi python3-cloudpickle python3-psutil python3-yaml python3-packaging
          openmpi-bin libopenmpi-dev cmake g++ make)
missing=()
for p in "${APT_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  log "apt-get install: ${missing[*]}"
  if [ "$(id -u)" != 0 ] && [ -z "$SUDO" ]; then
    fail "missing Debian packages (${missing[*]}) and neither root nor sudo to install them"
  fi
  export DEBIAN_FRONTEND=noninteractive
  APT_OPTS=(-o DPkg::Lock::Timeout=900 -o Acquire::Retries=3)
  $SUDO apt-get "${APT_OPTS[@]}" update -qq >/tmp/slimreduce-hvd-apt-update.log 2>&1 \
    || log "apt-get update had errors (see /tmp/slimreduce-hvd-apt-update.log); trying the install anyway"
  # A package with no candidate is a registry's 'no': skip, loudly.
  for p in "${missing[@]}"; do
    cand="$(apt-cache policy "$p" 2>/dev/null | awk '/Candidate:/ {print $2}')"
    if [ -z "$cand" ] || [ "$cand" = "(none)" ]; then
      skip "Debian package '$p' is not to be had (apt-cache policy: no candidate)"
    fi
  done
  apt_log=/tmp/slimreduce-hvd-apt-install.log
  if ! $SUDO apt-get "${APT_OPTS[@]}" install -y -q --no-install-recommends "${missing[@]}" >"$apt_log" 2>&1; then
    tail -20 "$apt_log" >&2
    if grep -qE "Unable to locate package|has no installation candidate|Unable to fetch some archives|Temporary failure resolving|Could not resolve" "$apt_log"; then
      skip "apt-get could not get ${missing[*]} (see $apt_log)"
    fi
    fail "apt-get install ${missing[*]} (see $apt_log)"
  fi
fi

TORCH_VERSION="$("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null)" \
  || fail "$PY cannot import torch after installing python3-torch"
PY_TAG="$("$PY" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')"
MPI_VERSION="$(ompi_info --version 2>/dev/null | awk '/Open MPI/ {print $NF; exit}')"
MPI_VERSION="${MPI_VERSION:-unknown}"
ARCH="$(uname -m)"
KEY="horovod-${HOROVOD_VERSION}_torch-${TORCH_VERSION}_${PY_TAG}_ompi-${MPI_VERSION}_${ARCH}"
WHEEL_DIR="$CACHE_ROOT/$KEY"
log "torch $TORCH_VERSION, python $PY_TAG, Open MPI $MPI_VERSION; wheel cache: $WHEEL_DIR"

# ---------------------------------------------------------------- 2. Horovod
horovod_ok() {
  # Installed, the right version, built with MPI and with the PyTorch extension.
  (cd / && "$PY" - "$HOROVOD_VERSION" <<'PYEOF'
import sys
import horovod, horovod.torch as hvd
assert horovod.__version__ == sys.argv[1], horovod.__version__
assert hvd.mpi_built(), "horovod built without MPI"
PYEOF
  ) >/dev/null 2>&1
}

if horovod_ok; then
  log "horovod $HOROVOD_VERSION (torch, MPI) already installed for $PY"
  exit 0
fi

wheel="$(ls "$WHEEL_DIR"/horovod-"$HOROVOD_VERSION"-*.whl 2>/dev/null | head -1)"
if [ -z "$wheel" ]; then
  log "no cached wheel: building horovod $HOROVOD_VERSION from PyPI (once; 3-8 minutes on 2 cores)"
  build_dir="$(mktemp -d /tmp/slimreduce-hvd-build.XXXXXX)"
  trap 'rm -rf "$build_dir"' EXIT   # the build log is kept outside it
  dl_log="$build_dir/download.log"
  if ! "$PY" -m pip download --no-deps --no-binary :all: -d "$build_dir/sdist" "horovod==$HOROVOD_VERSION" >"$dl_log" 2>&1; then
    cat "$dl_log" >&2
    if grep -qiE "No matching distribution|Could not find a version|404|Failed to establish a new connection|Temporary failure in name resolution" "$dl_log"; then
      skip "PyPI: horovod==$HOROVOD_VERSION is not to be had"
    fi
    fail "pip download horovod==$HOROVOD_VERSION"
  fi
  sdist="$(ls "$build_dir"/sdist/horovod-*.tar.gz | head -1)"
  # See README.md ("Build notes") for each environment variable here.
  build_log=/tmp/slimreduce-hvd-build.log
  if ! (
      export HOROVOD_WITH_MPI=1 HOROVOD_WITH_PYTORCH=1 \
             HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1 HOROVOD_WITHOUT_GLOO=1 \
             HOROVOD_CPU_OPERATIONS=MPI \
             MAKEFLAGS="-j${HVD_BUILD_JOBS:-2}" \
             PATH="/usr/bin:$PATH"
      unset HOROVOD_GPU_OPERATIONS HOROVOD_GPU_ALLREDUCE HOROVOD_GPU
      nice -n 10 "$PY" -m pip wheel -v --no-deps --no-build-isolation -w "$build_dir/wheel" "$sdist"
    ) >"$build_log" 2>&1; then
    tail -60 "$build_log" >&2
    fail "building the horovod wheel (full log: $build_log, kept)"
  fi
  mkdir -p "$WHEEL_DIR"
  cp "$build_dir"/wheel/horovod-*.whl "$WHEEL_DIR/"
  cp "$build_log" "$WHEEL_DIR/build.log"
  wheel="$(ls "$WHEEL_DIR"/horovod-"$HOROVOD_VERSION"-*.whl | head -1)"
  log "cached $wheel"
fi

log "pip install $wheel"
pip_opts=(--no-deps --force-reinstall --no-index)
pip_help="$("$PY" -m pip install --help 2>/dev/null)"
grep -q -- --break-system-packages <<<"$pip_help" && pip_opts+=(--break-system-packages)
grep -q -- --root-user-action <<<"$pip_help" && pip_opts+=(--root-user-action=ignore)
"$PY" -m pip install -q "${pip_opts[@]}" "$wheel" || fail "pip install $wheel"
horovod_ok || fail "horovod installed but 'import horovod.torch' with MPI failed for $PY"
log "horovod $HOROVOD_VERSION ready"
