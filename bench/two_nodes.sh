#!/usr/bin/env bash
# two_nodes.sh RATE LOCAL -- mpirun ARGS... PROGRAM ARGS...
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

usage() {
  sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2
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

cat >"$wrapper" <<EOF
#!/usr/bin/env bash
node=\$(( \${OMPI_COMM_WORLD_RANK:?not started by mpirun} / $local_size ))
(( node <= 1 )) || { echo "two_nodes.sh: rank \$OMPI_COMM_WORLD_RANK is on no node" >&2; exit 1; }
export OMPI_MCA_btl_tcp_if_include=node\$node
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
