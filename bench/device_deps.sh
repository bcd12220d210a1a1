#!/usr/bin/env bash
# Fetch Debian's Open MPI (and the runtime libraries it needs that a GPU image
# may lack) as .deb files into <repo>/.device-deps/, for the GPU machine: it has
# no network and no MPI, and bench/device_mpi.sh unpacks these there into a
# private prefix (never over /). Also NVIDIA's CCCL headers (a wheel, into
# .device-deps/cccl/) for bench/cub_topk.cu.
#
# Run here (Debian 12 bookworm, as root, apt reaching a mirror):
#   bash bench/device_deps.sh
# Idempotent: a package whose .deb is already there is not fetched again.
#
# The set is the Depends/PreDepends closure of openmpi-bin, openmpi-common,
# libopenmpi3 and libopenmpi-dev (first choice of each "a | b" group; virtual
# packages skipped), pruned at packages every Linux image already has or that
# would be harmful to shadow through LD_LIBRARY_PATH (C/C++ runtimes, zlib,
# systemd/udev, ...), at compilers and Fortran (only the C bindings are used),
# and at build-only -dev packages and optional plugins (see EXCLUDE below).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
ROOT=$(pwd)
DEST=$ROOT/.device-deps
ROOTS=(openmpi-bin openmpi-common libopenmpi3 libopenmpi-dev)
# Pruned, with their own dependencies (unless something kept needs them):
#  - in every image / harmful to shadow: libc6 libgcc-s1 libstdc++6 zlib1g
#    libudev1 libsystemd0 libcrypt1 libuuid1 libatomic1 (gcc's runtime; nvcc
#    needs gcc, so it is there) debconf dpkg perl* tar adduser passwd ...;
#  - compilers/Fortran/Python: gcc* cpp* gfortran* libgfortran* flang* python*;
#  - -dev packages other than libopenmpi-dev (mpicc/mpi.h do not need the
#    headers of hwloc, libevent, PMIx, verbs; zlib1g-dev etc.), libjs-*;
#  - openssh-client: a one-node mpirun launches locally, no ssh;
#  - libhwloc-plugins: dlopen'ed from hwloc's built-in path (not relocated),
#    optional, and it would drag in X11, libxml2, OpenCL.
EXCLUDE='^(libc6|libc6-dev|libc-dev-bin|linux-libc-dev|libgcc-s1|libstdc\+\+6|zlib1g|libudev1|libsystemd0|libcrypt1|libuuid1|libatomic1|libselinux1|debconf|debconf-2\.0|cdebconf|dpkg|tar|debianutils|base-files|adduser|passwd|install-info|perl.*|libperl.*|gcc.*|cpp.*|libgcc-.*|gfortran.*|libgfortran.*|flang.*|python.*|libpython.*|openssh-client|ssh-client|libhwloc-plugins|libjs-.*|.*-dev)$'
KEEP_DEV='^libopenmpi-dev$'

if ! command -v apt-get >/dev/null || ! command -v apt-cache >/dev/null; then
  echo "device_deps: apt-get/apt-cache not found (run this on Debian 12)" >&2; exit 1
fi
if ! apt-cache show libopenmpi3 >/dev/null 2>&1; then
  apt-get update -qq || { echo "device_deps: apt-get update failed" >&2; exit 1; }
fi

excluded() {  # $1 package: 0 when it must not be shipped
  [[ $1 =~ $KEEP_DEV ]] && return 1
  [[ $1 =~ $EXCLUDE ]] && return 0
  apt-cache show "$1" 2>/dev/null | grep -qm1 '^Essential: yes' && return 0
  return 1
}

# Direct Depends/PreDepends of $1, the first of each alternative group, no virtuals.
direct_deps() {
  apt-cache depends --no-recommends --no-suggests --no-conflicts --no-breaks \
      --no-replaces --no-enhances "$1" 2>/dev/null |
    awk '/^ *\|?(Pre)?Depends:/ {
           alt = ($0 ~ /^ *\|/); name = $2
           if (!in_group && name !~ /^</) print name
           in_group = alt; next }
         { in_group = 0 }'
}

declare -A seen=()
queue=("${ROOTS[@]}")
keep=()
while [ ${#queue[@]} -gt 0 ]; do
  p=${queue[0]}; queue=("${queue[@]:1}")
  p=${p%:amd64}
  [ -n "${seen[$p]:-}" ] && continue
  seen[$p]=1
  excluded "$p" && continue
  keep+=("$p")
  while read -r d; do
    [ -n "$d" ] && [ -z "${seen[${d%:amd64}]:-}" ] && queue+=("$d")
  done < <(direct_deps "$p")
done

mkdir -p "$DEST"
cd "$DEST" || exit 1
fail=0
for p in "${keep[@]}"; do
  if compgen -G "${p}_*.deb" >/dev/null; then
    continue
  fi
  apt-get download -q -o APT::Sandbox::User=root "$p" >/dev/null || { echo "device_deps: could not download $p" >&2; fail=1; }
done
[ $fail -eq 0 ] || exit 1

# A CCCL newer than the toolkit's, for bench/cub_topk.cu only (its DeviceTopK
# API is CCCL 3.5's; CUDA 13.0 brings 3.0): NVIDIA's wheel of its headers, from
# PyPI, about 4 MiB, the version cub_topk.cu was compiled against (CCCL 3.5.0).
# Without it, cub_topk's row is a SKIP.
mkdir -p "$DEST/cccl"
if ! compgen -G "$DEST/cccl/nvidia_cuda_cccl-*.whl" >/dev/null; then
  python3 -m pip download --no-deps -q -d "$DEST/cccl" 'nvidia-cuda-cccl==13.3.5.0.6' ||
    echo "device_deps: could not download NVIDIA's CCCL wheel (cub_topk will SKIP)" >&2
fi
ls -1 "$DEST"/cccl/*.whl 2>/dev/null

echo "device_deps: ${#keep[@]} packages in $DEST:"
total=0
for p in "${keep[@]}"; do
  f=$(compgen -G "${p}_*.deb" | head -1)
  s=$(stat -c %s "$f")
  total=$((total + s))
  printf '  %-28s %8d KiB  %s\n' "$p" $((s / 1024)) "$f"
done
printf 'device_deps: total %d.%02d MiB\n' $((total / 1048576)) $(((total % 1048576) * 100 / 1048576))
extra=$(ls -1 ./*.deb 2>/dev/null | wc -l)
[ "$extra" -eq "${#keep[@]}" ] ||
  echo "device_deps: note: $DEST holds $extra .deb files, ${#keep[@]} listed above (stale ones from an older run?)"
if [ $total -gt $((30 * 1048576)) ]; then
  echo "device_deps: warning: more than 30 MiB" >&2
fi
