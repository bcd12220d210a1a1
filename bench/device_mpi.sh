# shellcheck shell=bash
# Sourced by bench/device_check.sh on the GPU machine (no network, no MPI there):
#   source bench/device_mpi.sh; device_mpi_setup /tmp/mpiroot
# If a runnable mpicc is already on PATH, nothing is done (DEVICE_MPI_C_COMPILER
# is set to it). Otherwise the .deb files fetched
# here by bench/device_deps.sh (Debian 12's Open MPI 4.1 with its external
# PMIx 4.2 and runtime libraries) are unpacked into PREFIX_DIR (never over /),
# and the environment is pointed at them so that the relocated mpicc, mpirun
# and CMake's FindMPI work:
#   PATH             PREFIX/usr/bin (mpicc, mpirun, orted; the plain names are
#                    symlinks made here, as update-alternatives would)
#   LD_LIBRARY_PATH  PREFIX/usr/lib/x86_64-linux-gnu/openmpi/lib (libmpi.so, the
#                    link-time name), PREFIX/usr/lib/x86_64-linux-gnu (libmpi.so.40,
#                    libopen-*, libpmix, hwloc, libevent, ...), PREFIX/lib/x86_64-
#                    linux-gnu (libnl-3), PREFIX/usr/lib/libpsm1 (libfabric needs it)
#   OPAL_PREFIX      Open MPI's install prefix (PREFIX/usr): its libdir, pkglibdir
#                    (MCA components), includedir, pkgdatadir (wrapper data, help)
#                    are all derived from it
#   OPAL_SYSCONFDIR  /etc/openmpi is not below the prefix, so it does not move with
#                    OPAL_PREFIX: without it Debian's openmpi-mca-params.conf (which
#                    turns off the ucx/ofi/openib transports) is not read
#   PMIX_MCA_mca_base_component_path, PMIX_PKGLIBDIR, PMIX_PKGDATADIR
#                    Debian's Open MPI uses the external PMIx 4.2, whose own dirs
#                    (absolute paths under /usr/lib/x86_64-linux-gnu/pmix2) follow
#                    neither OPAL_PREFIX nor PMIX_PREFIX: without them its DSO
#                    components (pcompress/zlib, prm) and its help texts are not
#                    found ("Sorry! ... help-pcompress.txt: No such file"). The
#                    component path goes in the environment because it beats
#                    Debian's pmix-mca-params.conf, which hard-codes the /usr path
#                    (that file is read only where it sits at /usr/...; PMIx's
#                    sysconfdir is deliberately not relocated)
#   OMPI_MCA_plm=isolated  only when neither ssh nor rsh is on PATH: Open MPI 4.1's
#                    default launcher then aborts even a one-node job ("plm_rsh_agent:
#                    ssh : rsh ... could not be found"); isolated launches locally
# DEVICE_MPI_C_COMPILER is set to the mpicc to hand to CMake (-DMPI_C_COMPILER=).
# Returns non-zero with a message on failure; never exits, never sets -e.

_DEVICE_MPI_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" 2>/dev/null && pwd)

# A runnable $1 on PATH (bash's command -v also reports non-executable files).
_device_mpi_have() {
  local p
  p=$(command -v "$1" 2>/dev/null) && [ -f "$p" ] && [ -x "$p" ]
}

device_mpi_setup() {
  local prefix=${1:-}
  if [ -z "$prefix" ]; then
    echo "device_mpi_setup: usage: device_mpi_setup PREFIX_DIR" >&2
    return 2
  fi
  local have
  # Only an Open MPI one: the checks pass Open MPI's flags (--showme, --mca);
  # another MPI's mpicc (a pip package's, say) is passed over for the .debs.
  if _device_mpi_have mpicc && mpicc --showme:version 2>&1 | grep -q 'Open MPI'; then
    have=$(command -v mpicc)
    DEVICE_MPI_C_COMPILER=$have
    export DEVICE_MPI_C_COMPILER
    echo "device_mpi_setup: Open MPI's mpicc already on PATH ($have): nothing to do"
    return 0
  fi

  local root=${ROOT:-}
  if [ -z "$root" ]; then root=$(cd "$_DEVICE_MPI_HERE/.." 2>/dev/null && pwd); fi
  local debdir=$root/.device-deps
  local -a debs=()
  local f
  for f in "$debdir"/*.deb; do
    if [ -f "$f" ]; then debs+=("$f"); fi
  done
  if [ ${#debs[@]} -eq 0 ]; then
    echo "device_mpi_setup: no mpicc on PATH and no .deb files in $debdir (run bench/device_deps.sh where apt works)" >&2
    return 1
  fi

  if ! mkdir -p "$prefix" 2>/dev/null; then
    echo "device_mpi_setup: cannot create $prefix" >&2
    return 1
  fi
  prefix=$(cd "$prefix" && pwd)
  if [ "$prefix" = / ]; then
    echo "device_mpi_setup: refusing to unpack over /" >&2
    return 1
  fi

  # Unpack (once: a stamp records which .deb files the prefix holds).
  local stamp=$prefix/.device_mpi_debs want how
  want=$(cd "$debdir" && ls -1 -- *.deb) || want=""
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$prefix/usr/bin/opal_wrapper" ]; then
    how="already unpacked"
  else
    if _device_mpi_have dpkg; then
      how="unpacked with dpkg -x"
      for f in "${debs[@]}"; do
        if ! dpkg -x "$f" "$prefix"; then
          echo "device_mpi_setup: dpkg -x $f failed" >&2
          return 1
        fi
      done
    elif _device_mpi_have ar && _device_mpi_have tar; then
      how="unpacked with ar + tar"
      local tmp data
      tmp=$(mktemp -d) || { echo "device_mpi_setup: mktemp failed" >&2; return 1; }
      for f in "${debs[@]}"; do
        rm -f "$tmp"/*
        data=$(cd "$tmp" && ar t "$f" | grep '^data\.tar' | head -1) || data=""
        if [ -z "$data" ] || ! (cd "$tmp" && ar x "$f" "$data") ||
           ! tar -xf "$tmp/$data" -C "$prefix"; then
          echo "device_mpi_setup: could not unpack $f with ar + tar" >&2
          rm -rf "$tmp"
          return 1
        fi
      done
      rm -rf "$tmp"
    else
      echo "device_mpi_setup: neither dpkg nor ar + tar to unpack the .deb files" >&2
      return 1
    fi
    # What the packages' maintainer scripts (update-alternatives) would have made.
    local name
    for name in mpicc mpicxx mpic++ mpirun mpiexec; do
      if [ -e "$prefix/usr/bin/$name.openmpi" ]; then
        ln -sfn "$name.openmpi" "$prefix/usr/bin/$name"
      fi
    done
    local psm
    psm=$(cd "$prefix/usr/lib/libpsm1" 2>/dev/null && ls libpsm_infinipath.so.1.* 2>/dev/null | head -1) || psm=""
    if [ -n "$psm" ]; then
      ln -sfn "$psm" "$prefix/usr/lib/libpsm1/libpsm_infinipath.so.1"
    fi
    printf '%s\n' "$want" > "$stamp"
  fi

  local cc=$prefix/usr/bin/mpicc
  if [ ! -x "$prefix/usr/bin/opal_wrapper" ] || [ ! -e "$cc" ] || [ ! -x "$prefix/usr/bin/orterun" ]; then
    echo "device_mpi_setup: $prefix lacks Open MPI's mpicc/orterun after unpacking (is openmpi-bin/libopenmpi-dev in $debdir?)" >&2
    return 1
  fi

  local multi=x86_64-linux-gnu
  export PATH="$prefix/usr/bin${PATH:+:$PATH}"
  export LD_LIBRARY_PATH="$prefix/usr/lib/$multi/openmpi/lib:$prefix/usr/lib/$multi:$prefix/lib/$multi:$prefix/usr/lib/libpsm1${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export OPAL_PREFIX="$prefix/usr"
  export OPAL_SYSCONFDIR="$prefix/etc/openmpi"
  export PMIX_MCA_mca_base_component_path="$prefix/usr/lib/$multi/pmix2/lib/pmix"
  export PMIX_PKGLIBDIR="$prefix/usr/lib/$multi/pmix2/lib/pmix"
  export PMIX_PKGDATADIR="$prefix/usr/lib/$multi/pmix2/share/pmix"
  local launcher=""
  if ! _device_mpi_have ssh && ! _device_mpi_have rsh; then
    export OMPI_MCA_plm=isolated
    launcher=" (no ssh/rsh: OMPI_MCA_plm=isolated)"
  fi
  hash -r 2>/dev/null

  # The unpacked tools must load from here (and find what they need on this
  # image); only then is DEVICE_MPI_C_COMPILER set, which tells the caller MPI is there.
  local missing
  missing=$(ldd "$prefix/usr/lib/$multi/libmpi.so.40" "$prefix/usr/bin/orterun" 2>&1 | grep 'not found' | sort -u) || missing=""
  if [ -n "$missing" ]; then
    echo "device_mpi_setup: libraries missing on this machine for the unpacked Open MPI:" >&2
    echo "$missing" >&2
    return 1
  fi
  if ! "$cc" --showme:version >/dev/null 2>&1; then
    echo "device_mpi_setup: the unpacked mpicc does not run: $("$cc" --showme:version 2>&1 | head -3)" >&2
    return 1
  fi
  DEVICE_MPI_C_COMPILER=$cc
  export DEVICE_MPI_C_COMPILER
  echo "device_mpi_setup: $("$cc" --showme:version 2>&1 | grep -o 'Open MPI [0-9][0-9.]*' | head -1) from ${#debs[@]} .deb files $how into $prefix; DEVICE_MPI_C_COMPILER=$cc$launcher"
  return 0
}
