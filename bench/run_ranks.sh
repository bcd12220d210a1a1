# Sourced by the side-by-side benchmark scripts (fusion.sh, pipeline.sh,
# priority.sh): run_ranks RATE RANKS ARGS... runs `mpirun -np RANKS ARGS...`
# over an emulated link of RATE (bench/netem.sh: every rank behind one shared
# link, MPI on TCP over lo) or, for RATE `shm`, over shared memory; prints
# what it printed.
run_ranks() {
  local rate=$1 ranks=$2
  shift 2
  local root
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  local mpirun=(mpirun --allow-run-as-root --oversubscribe -np "$ranks")
  if [[ $rate == shm ]]; then
    "${mpirun[@]}" --mca btl_vader_single_copy_mechanism none "$@" 2>&1
  else
    "$root/bench/netem.sh" "$rate" -- "${mpirun[@]}" --mca btl tcp,self \
      --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo "$@" 2>&1
  fi
}

# run_ranks_mpich RATE RANKS ARGS...: the same under MPICH's Hydra
# (mpiexec.mpich -n RANKS ARGS...; settings as -genv NAME VALUE). Debian's MPICH
# talks through UCX, which would take shared memory between ranks of one host:
# UCX_TLS=tcp,self keeps every byte on lo (the emulated wire), and -iface lo
# puts Hydra's own connections there, the namespace's only interface.
run_ranks_mpich() {
  local rate=$1 ranks=$2
  shift 2
  local root
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  local mpiexec=(mpiexec.mpich -n "$ranks")
  if [[ $rate == shm ]]; then
    "${mpiexec[@]}" "$@" 2>&1
  else
    "$root/bench/netem.sh" "$rate" -- env UCX_TLS=tcp,self UCX_NET_DEVICES=lo \
      "${mpiexec[@]}" -iface lo "$@" 2>&1
  fi
}

# The median of the numbers on stdin (whitespace-separated).
median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
