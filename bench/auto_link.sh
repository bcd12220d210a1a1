#!/usr/bin/env bash
# auto_link.sh [RANKS] [BYTES] [PHASE_SECONDS] [RATE...]
#
# SLIMREDUCE_COMPRESSOR=auto on a link that changes while the job runs
# (docs/performance.md): RANKS ranks (default 4) of bench/auto_trace reduce
# BYTES (default 1048576) again and again in a network namespace whose
# loopback starts at the first RATE and is changed (`tc qdisc change`) to the
# next one every PHASE_SECONDS (default 8); rates default to 10gbit 1gbit
# 10gbit. Prints, per phase, the calls it held, each candidate's share, the
# choice that held most of the phase's last half, and after how many calls of
# the phase its first probe round ended (auto measured the new link); writes the trace (CSV) and a plot (time per call against call
# number, colour by candidate, changes marked) under AUTO_LINK_OUT (default
# /tmp/auto_link). Needs root (ip netns, tc). Run from the repository root
# after ./scripts/setup.sh (build/).
set -euo pipefail
ranks=${1:-4}
bytes=${2:-1048576}
phase=${3:-8}
shift $(( $# < 3 ? $# : 3 ))
rates=("$@")
[[ ${#rates[@]} -gt 0 ]] || rates=(10gbit 1gbit 10gbit)
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
lib=$root/build/interpose/libslimreduce.so
trace=$root/build/bench/auto_trace
out=${AUTO_LINK_OUT:-/tmp/auto_link}
[[ -x $trace && -f $lib ]] || { echo "auto_link.sh: build first (./scripts/setup.sh)" >&2; exit 2; }
[[ $(id -u) -eq 0 ]] || { echo "auto_link.sh: needs root (ip netns add, tc)" >&2; exit 2; }
mkdir -p "$out"

ns="slimreduce-autolink-$$-$RANDOM"
trap 'ip netns del "$ns" 2>/dev/null || true' EXIT
ip netns add "$ns"
ip -n "$ns" link set lo up
tc -n "$ns" qdisc add dev lo root tbf rate "${rates[0]}" burst 128kb latency 100ms

seconds=$(( phase * ${#rates[@]} ))
ip netns exec "$ns" mpirun --allow-run-as-root --oversubscribe -np "$ranks" --mca btl tcp,self \
  --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo -x LD_PRELOAD="$lib" \
  -x SLIMREDUCE_COMPRESSOR=auto "$trace" "$seconds" "$bytes" >"$out/trace.csv" &
job=$!
: >"$out/changes.txt"
for rate in "${rates[@]:1}"; do
  sleep "$phase"
  tc -n "$ns" qdisc change dev lo root tbf rate "$rate" burst 128kb latency 100ms
  echo "$(date +%s.%N) $rate" >>"$out/changes.txt"
done
wait "$job"

python=python3
[[ -x /usr/bin/python3 ]] && python=/usr/bin/python3  # Debian's, with matplotlib
"$python" - "$out" "$phase" "${rates[@]}" <<'EOF'
import csv, sys
out, phase, rates = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
lines = open(f"{out}/trace.csv").read().splitlines()
start = float(lines[0].split()[-1])
calls = list(csv.DictReader(lines[1:]))
for c in calls:
    c["begin_s"], c["ms"] = float(c["begin_s"]), float(c["ms"])
# Each phase from its change (the job's clock), the first from the first call.
bounds = [0.0] + [float(l.split()[0]) - start for l in open(f"{out}/changes.txt")] + [1e300]
print(f"# auto_link.sh: {len(calls)} calls; the link {' -> '.join(rates)}, a change every {phase:g} s")
print("%-8s %7s %-22s %-6s %s" % ("link", "calls", "none/fp16/int8 share", "holds",
                                  "probe round ended (calls after the change)"))
names = ("none", "fp16", "int8")
round_of = list(names) * 3  # a probe round: the candidates in turn, 3 calls each
changes = []
for i, rate in enumerate(rates):
    mine = [c for c in calls if bounds[i] <= c["begin_s"] < bounds[i + 1]]
    if not mine:
        continue
    share = {k: sum(c["candidate"] == k for c in mine) / len(mine) for k in names}
    tail = mine[len(mine) // 2:]
    holds = max(names, key=lambda k: sum(c["candidate"] == k for c in tail))
    follows = "-"  # the end of the first probe round that began after the change
    for j in range(len(mine) - len(round_of) + 1):
        if [c["candidate"] for c in mine[j:j + len(round_of)]] == round_of:
            follows = str(j + len(round_of))
            break
    changes.append(int(mine[0]["call"]))
    print("%-8s %7d %-22s %-6s %s" % (rate, len(mine), "/".join("%.2f" % share[k] for k in names),
                                      holds, follows))
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    print("# no matplotlib: no plot")
    sys.exit(0)
colour = {"none": "tab:gray", "fp16": "tab:blue", "int8": "tab:red"}
fig, ax = plt.subplots(figsize=(10, 4.5))
for name, c in colour.items():
    xs = [int(k["call"]) for k in calls if k["candidate"] == name]
    ys = [k["ms"] for k in calls if k["candidate"] == name]
    ax.scatter(xs, ys, s=4, c=c, label=name)
for at, rate in zip(changes, rates):
    ax.axvline(at, color="black", linewidth=0.8)
    ax.text(at, ax.get_ylim()[1] * 0.95, " " + rate, va="top")
ax.set_yscale("log")
ax.set_xlabel("call")
ax.set_ylabel("ms per call (rank 0)")
ax.set_title("SLIMREDUCE_COMPRESSOR=auto while the link changes")
ax.legend(loc="lower right")
fig.savefig(f"{out}/auto_link.png", dpi=100, bbox_inches="tight")
print(f"# plot: {out}/auto_link.png; trace: {out}/trace.csv")
EOF
