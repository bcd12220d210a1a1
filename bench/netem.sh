#!/usr/bin/env bash
# netem.sh RATE -- COMMAND...
#
# Runs COMMAND inside a fresh network namespace whose loopback is rate-limited
# to RATE (tc rate syntax: 1gbit, 100mbit, ...) with a token bucket filter, so
# that ranks on one machine talk over a slow "wire" (design notes, section 3).
# Then prints the bytes that really crossed that wire (the namespace's
# lo tx_bytes), and, if COMMAND printed slimreduce-bench's "total wire_sent"
# line, SlimReduce's own count next to it.
#
# The command must keep MPI on TCP over lo, e.g.
#   bench/netem.sh 1gbit -- mpirun --allow-run-as-root --oversubscribe -np 4 \
#     --mca btl tcp,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo \
#     -x LD_PRELOAD=build/interpose/libslimreduce.so build/bench/slimreduce-bench ...
# (NETEM_MPI_FLAGS holds those --mca flags, for scripts.)
#
# Needs root (ip netns, tc). Every rank shares the one lo queue: RATE is the
# aggregate of all ranks, like hosts behind one shared link.
# Options before --: --burst SIZE (default 128kb), --latency TIME (default 100ms).
set -euo pipefail

NETEM_MPI_FLAGS="--mca btl tcp,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo"
export NETEM_MPI_FLAGS

usage() {
  sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

[[ $# -ge 3 ]] || usage
rate=$1
shift
burst=128kb
latency=100ms
while [[ $# -gt 0 && $1 != -- ]]; do
  case $1 in
    --burst) burst=$2; shift 2 ;;
    --latency) latency=$2; shift 2 ;;
    *) usage ;;
  esac
done
[[ ${1:-} == -- ]] || usage
shift
[[ $# -gt 0 ]] || usage
if [[ $(id -u) -ne 0 ]]; then
  echo "netem.sh: needs root (ip netns add, tc)" >&2
  exit 2
fi

# Unique per run, so concurrent runs (or colleagues' runs) never share a wire.
ns="slimreduce-netem-$$-$RANDOM"
output=$(mktemp)
status_file=$(mktemp)
group=
cleanup() {
  ip netns del "$ns" 2>/dev/null || true
  rm -f "$output" "$status_file"
}
# A signal ends the whole command (its own process group), then the EXIT trap
# deletes the namespace. bash runs traps only between commands or in `wait`,
# hence the command runs in the background below.
stop() {
  [[ -n $group ]] && kill "-$1" -- "-$group" 2>/dev/null
  wait
  exit "$2"
}
trap cleanup EXIT
trap 'stop INT 130' INT
trap 'stop TERM 143' TERM

ip netns add "$ns"
ip -n "$ns" link set lo up
tc -n "$ns" qdisc add dev lo root tbf rate "$rate" burst "$burst" latency "$latency"

# `ip netns exec` mounts the namespace's own /sys, so these are its lo counters.
counter() { ip netns exec "$ns" cat "/sys/class/net/lo/statistics/$1"; }
bytes_before=$(counter tx_bytes)
packets_before=$(counter tx_packets)

set -m # job control: the background pipeline gets a process group of its own
{
  code=0
  ip netns exec "$ns" "$@" || code=$?
  echo "$code" >"$status_file"
} | tee "$output" &
group=$(jobs -p %%)
wait || true
set +m
status=$(cat "$status_file")
status=${status:-1}

bytes=$(( $(counter tx_bytes) - bytes_before ))
packets=$(( $(counter tx_packets) - packets_before ))
# Each packet on lo carries 14 (Ethernet) + 20 (IPv4) + 32 (TCP with
# timestamps) bytes of headers; pure ACKs are nothing but those 66 bytes.
headers=$(( packets * 66 ))
echo "# netem: rate $rate (burst $burst, latency $latency), namespace $ns"
echo "# netem: the wire carried $bytes bytes in $packets packets (lo tx_bytes);" \
  "about $headers of them Ethernet/IP/TCP headers (66 B per packet)"
reported=$(sed -n 's/^# total wire_sent, all ranks, every intercepted call: \([0-9]*\) bytes$/\1/p' \
  "$output" | tail -n 1)
if [[ -n $reported && $reported -gt 0 ]]; then
  awk -v wire="$bytes" -v headers="$headers" -v counted="$reported" 'BEGIN {
    printf "# netem: SlimReduce counted %.0f bytes; wire / counted = %.4f, (wire - headers) / counted = %.4f\n",
      counted, wire / counted, (wire - headers) / counted }'
fi
exit "$status"
