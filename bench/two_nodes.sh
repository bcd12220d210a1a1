#!/usr/bin/env bash
# two_nodes.sh [--shm] RATE LOCAL -- mpirun ARGS... PROGRAM ARGS...
#
# Runs an MPI job as two emulated nodes on one machine, in a fresh network
# namespace: node 0 is the address 198.18.0.1, node 1 is 198.18.1.1 (each on
# an interface of its own), and world rank r belongs to node r / LOCAL. MPI
# uses TCP alone; each rank publishes only its node's address (the wrapper
# sets OMPI_MCA_btl_tcp_if_include per rank). All of it travels over the
# namespace's loopback, where tc sorts it by address: node 0 -> node 1 and
# node 1 -> node 0 each go through a class limited to RATE (a full-duplex
# link of RATE); everything inside a node goes unshaped. Give the
# job SLIMREDUCE_LOCAL_SIZE=LOCAL so that SlimReduce sees the same nodes.
# Prints the bytes that crossed the link each way (the classes' counters).
#
# --shm: Open MPI itself sees two nodes, so the ranks of a node talk through
# shared memory (its vader transport), as on a real machine, and only ranks
# of different nodes over TCP, through the link. mpirun starts one daemon per
# node through a stand-in for ssh that runs it here with the node's TCP
# interface, temporary folder and shared-memory folder (one per node: the
# two nodes' segment names would otherwise meet). Give mpirun
# $(bench/two_nodes.sh --shm-flags LOCAL) in place of $(bench/two_nodes.sh --flags).
#
#   bench/two_nodes.sh 1gbit 2 -- mpirun --allow-run-as-root --oversubscribe -np 4 \
#     $(bench/two_nodes.sh --flags) -x LD_PRELOAD=build/interpose/libslimreduce.so \
#     -x SLIMREDUCE_LOCAL_SIZE=2 build/bench/slimreduce-bench ...
#
# Needs root (ip netns, tc). The program is the first argument after
# mpirun's own that is an executable file; it runs under a small wrapper.
set -euo pipefail

TWO_NODES_MPI_FLAGS="--mca btl tcp,self --mca oob_tcp_if_include lo"
if [[ ${1:-} == --flags ]]; then
  echo "$TWO_NODES_MPI_FLAGS"
  exit 0
fi
# --shm's daemons: a stand-in for ssh, and a hostfile of two nodes of LOCAL slots.
shm_dir=/tmp/slimreduce-two-nodes
if [[ ${1:-} == --shm-flags ]]; then
  [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || { echo "two_nodes.sh --shm-flags LOCAL" >&2; exit 2; }
  mkdir -p "$shm_dir"
  printf 'node0 slots=%s\nnode1 slots=%s\n' "$2" "$2" >"$shm_dir/hosts"
  cat >"$shm_dir/agent" <<'AGENT'
#!/usr/bin/env bash
# ssh's stand-in: "agent HOST COMMAND..." runs COMMAND (a daemon) here, as node HOST.
host=$1
shift
mkdir -p "/tmp/slimreduce-two-nodes/tmp-$host" "/dev/shm/slimreduce-two-nodes-$host"
export TMPDIR=/tmp/slimreduce-two-nodes/tmp-$host PMIX_MCA_gds=hash \
  OMPI_MCA_btl_vader_backing_directory=/dev/shm/slimreduce-two-nodes-$host \
  OMPI_MCA_btl_tcp_if_include=$host
exec bash -c "$*"
AGENT
  chmod +x "$shm_dir/agent"
  echo "--hostfile $shm_dir/hosts --mca btl self,vader,tcp --mca oob_tcp_if_include lo" \
       "-x PMIX_MCA_gds=hash"
  exit 0
fi
shm=0
if [[ ${1:-} == --shm ]]; then
  shm=1
  shift
  [[ -x $shm_dir/agent ]] || { echo "two_nodes.sh --shm: no $shm_dir/agent (--shm-flags makes it)" >&2; exit 2; }
  export OMPI_MCA_plm_rsh_agent=$shm_dir/agent  # mpirun's, in place of ssh
fi

usage() {
  sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

[[ $# -ge 4 && $3 == -- ]] || usage
rate=$1
local_size=$2
shift 3
[[ $local_size =~ ^[1-9][0-9]*$ ]] || usage
if [[ $(id -u) -ne 0 ]]; then
  echo "two_nodes.sh: needs root (ip netns add, tc)" >&2
  exit 2
fi

ns="slimreduce-nodes-$$-$RANDOM"
wrapper=$(mktemp)
cleanup() {
  ip netns del "$ns" 2>/dev/null || true
  rm -f "$wrapper"
}
trap cleanup EXIT

ip netns add "$ns"
ip -n "$ns" link set lo up
# An interface per node carries its address (a veth end: traffic between
# local addresses goes over lo all the same, where tc sees it).
for node in 0 1; do
  ip -n "$ns" link add "node$node" type veth peer name "node$node-peer"
  ip -n "$ns" addr add "198.18.$node.1/32" dev "node$node"
  ip -n "$ns" link set "node$node" up
  ip -n "$ns" link set "node$node-peer" up
done
# Unclassified traffic (inside a node) goes to no class: htb sends it unshaped.
tc -n "$ns" qdisc add dev lo root handle 1: htb default 99
tc -n "$ns" class add dev lo parent 1: classid 1:20 htb rate "$rate" burst 128kb
tc -n "$ns" class add dev lo parent 1: classid 1:30 htb rate "$rate" burst 128kb
tc -n "$ns" filter add dev lo parent 1: protocol ip prio 1 u32 \
  match ip src 198.18.0.1/32 match ip dst 198.18.1.1/32 flowid 1:20
tc -n "$ns" filter add dev lo parent 1: protocol ip prio 1 u32 \
  match ip src 198.18.1.1/32 match ip dst 198.18.0.1/32 flowid 1:30

# With --shm each node's daemon sets its interface (the agent); the wrapper only checks.
cat >"$wrapper" <<EOF
#!/usr/bin/env bash
node=\$(( \${OMPI_COMM_WORLD_RANK:?not started by mpirun} / $local_size ))
(( node <= 1 )) || { echo "two_nodes.sh: rank \$OMPI_COMM_WORLD_RANK is on no node" >&2; exit 1; }
[ $shm = 1 ] || export OMPI_MCA_btl_tcp_if_include=node\$node
exec "\$@"
EOF
chmod +x "$wrapper"

launcher=("$1")
shift
while [[ $# -gt 0 ]]; do
  if [[ -x $1 && -f $1 ]]; then break; fi
  launcher+=("$1")
  shift
done
[[ $# -gt 0 ]] || { echo "two_nodes.sh: no program after the mpirun options" >&2; exit 2; }

sent() { tc -n "$ns" -s class show dev lo classid "$1" | awk '/Sent/ {print $2; exit}'; }
status=0
ip netns exec "$ns" "${launcher[@]}" "$wrapper" "$@" || status=$?
echo "two_nodes.sh: link node 0 -> node 1: $(sent 1:20) bytes, node 1 -> node 0: $(sent 1:30)" \
     "bytes (rate $rate each way, $local_size ranks per node)"
exit "$status"
