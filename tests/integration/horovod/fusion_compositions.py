#!/usr/bin/env python3
"""How often Horovod's time-driven fusion repeats a fused count with the same tensors
(docs/horovod.md): reads a HOROVOD_TIMELINE file and counts, over the allreduce operations
(tensors whose MPI_ALLREDUCE activity starts at the same instant were one fused operation),
those a residual slot kept per (buffer, count) would serve rightly.

  fusion_compositions.py TIMELINE --model mlp|stack [--in-dim 64 --hidden 256 --classes 10 --blocks 6]

An operation of one tensor runs on the tensor's own buffer: its slot is always its own. A fused
operation runs on the one fusion buffer, so its slot is keyed by its total count: right when the
last fused operation of that count carried the same tensors in the same order; wrong (another
layer's residual added to these gradients) when it carried others; new when the count is new.
"""
import argparse
import json
import sys


def tensor_sizes(model, in_dim, hidden, classes, blocks):
    """Element count of each allreduced gradient, by Horovod's tensor name."""
    def linear(name, fan_in, fan_out):
        return {f"{name}.weight": fan_in * fan_out, f"{name}.bias": fan_out}
    sizes = {}
    if model == "mlp":
        for name, a, b in (("fc1", in_dim, hidden), ("fc2", hidden, hidden),
                           ("fc3", hidden, hidden), ("out", hidden, classes)):
            sizes.update(linear(name, a, b))
    else:
        width = hidden // 2
        sizes.update(linear("inp", in_dim, width))
        for i in range(blocks):
            sizes[f"blocks.{i}.norm.weight"] = width
            sizes[f"blocks.{i}.norm.bias"] = width
            sizes.update(linear(f"blocks.{i}.up", width, 4 * width))
            sizes.update(linear(f"blocks.{i}.down", 4 * width, width))
        sizes.update(linear("out", width, classes))
    return {f"allreduce.{name}": n for name, n in sizes.items()}


def read_events(path):
    text = open(path).read().strip().rstrip(",")
    if not text.endswith("]"):
        text += "]"
    return json.loads(text)


def operations(events):
    """The allreduce operations in time order, each a tuple of tensor names."""
    names = {e["pid"]: e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "process_name" and "name" in e.get("args", {})}
    starts = {}
    for e in events:
        if e.get("ph") == "B" and e.get("name") == "MPI_ALLREDUCE":
            starts.setdefault(e["ts"], []).append(names.get(e["pid"], str(e["pid"])))
    return [tuple(starts[ts]) for ts in sorted(starts)]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("timeline")
    p.add_argument("--model", choices=("mlp", "stack"), default="mlp")
    p.add_argument("--in-dim", type=int, default=64)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--blocks", type=int, default=6)
    args = p.parse_args()
    sizes = tensor_sizes(args.model, args.in_dim, args.hidden, args.classes, args.blocks)
    ops = [op for op in operations(read_events(args.timeline)) if all(n in sizes for n in op)]
    last_by_count = {}
    singles = right = wrong = new = 0
    for op in ops:
        if len(op) == 1:
            singles += 1
            continue
        count = sum(sizes[n] for n in op)
        before = last_by_count.get(count)
        if before is None:
            new += 1
        elif before == op:
            right += 1
        else:
            wrong += 1
        last_by_count[count] = op
    fused = right + wrong + new
    total = singles + fused
    served = singles + right
    print(f"{args.model}: {total} gradient allreduces: {singles} of one tensor, {fused} fused "
          f"({len(set(ops))} distinct compositions); a slot per (buffer, count) would be right in "
          f"{served} ({100.0 * served / max(total, 1):.1f}%), wrong in {wrong} "
          f"({100.0 * wrong / max(total, 1):.1f}%), new in {new}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
