#!/usr/bin/env python3
"""Checks the Horovod integration runs that run.sh left in a directory, prints the table.

  check.py DIR          exit 0: every assertion held; 1: at least one failed

DIR/<config>/ holds, per configuration: rc (the training job's exit code), train.json (rank 0's
summary from train_hvd.py), report.<rank>.json (SlimReduce's report; not for "off"),
calllog.<rank>.json (calllog.c, top-k runs), and for the dtype job: dtypes.rc, dtypes.pt,
dreport.<rank>.json. DIR/configs lists "name compressor groups [HOROVOD_X=value ...]" lines in run order.

Assertions (README.md states them with the reasons):
  every configuration: the job completed; parameters bit-identical on every rank at the end.
  none:     final parameters bit-identical to the run without SlimReduce (pass-through is exact);
            nothing compressed.
  fp16/bf16/topk (fixed fusion, groups=1): on every rank calls.compressed == steps (each step's
            fused gradient buffer compressed), passed_through > 0 (Horovod's control allreduces,
            the scalar metrics), savings >= 0.45 (casts) / 0.9 (top-k); final loss within 2%
            (casts) / 5% (top-k) of the run without SlimReduce; no warm-up or cap fallbacks;
            top-k: no error-feedback key reset (calllog.c).
  topk-default (Horovod's default, time-driven fusion): completes, identical parameters,
            compressed > 0, savings >= 0.9, loss within 15% (a guard against divergence only:
            its error-feedback keys reset whenever the fused count changes; the table shows how
            often, and docs/horovod.md what it costs).
  dtypes:   see hvd_dtypes.py: bit-identical where SlimReduce must not compress; within the
            compressor's bound where it must; compressed calls == the eligible cases.
"""
import json
import math
import os
import sys

import torch

sys.dont_write_bytecode = True  # leave no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hvd_dtypes  # noqa: E402

CAST_SAVINGS, TOPK_SAVINGS = 0.45, 0.90
CAST_LOSS_TOL, TOPK_LOSS_TOL, DEFAULT_FUSION_LOSS_TOL = 0.02, 0.05, 0.15
UNIT_ROUNDOFF = {"fp16": 2.0 ** -11, "bf16": 2.0 ** -8}
SUBNORMAL_HALF_STEP = {"fp16": 2.0 ** -25, "bf16": 0.0}

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
    return ok


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def read_rc(path):
    try:
        with open(path) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def reports(cdir, stem, world):
    return [load_json(os.path.join(cdir, f"{stem}.{r}.json")) for r in range(world)]


def check_dtypes(name, compressor, cdir, baseline, ratio):
    """The dtype job of one configuration against the one without SlimReduce."""
    rc = read_rc(os.path.join(cdir, "dtypes.rc"))
    if not check(rc == 0, f"{name}: dtype job exit code {rc}"):
        return
    run = torch.load(os.path.join(cdir, "dtypes.pt"))
    check(run["same_on_all_ranks"], f"{name}: dtype results differ between ranks")
    world = run["world_size"]
    n_compressible = 0
    for case, dtype, n, op in hvd_dtypes.cases():
        got, ref = run["results"][case], baseline["results"][case]
        if compressor == "none" or not hvd_dtypes.compressible(dtype, n, op):
            check(got.dtype == ref.dtype and got.shape == ref.shape
                  and got.numpy().tobytes() == ref.numpy().tobytes(),
                  f"{name}: {case} not bit-identical to the run without SlimReduce")
            continue
        n_compressible += 1
        xs = [hvd_dtypes.make_input(case, dtype, n, op, r) for r in range(world)]
        scale = 1.0 / world if op == "Average" else 1.0
        if compressor in UNIT_ROUNDOFF:
            u, s = UNIT_ROUNDOFF[compressor], SUBNORMAL_HALF_STEP[compressor]
            exact = torch.stack([x.double() for x in xs]).sum(0)
            abs_sum = torch.stack([x.double().abs() for x in xs]).sum(0)
            m = 2 * world - 1
            bound = m * (u * abs_sum * (1 + m * u) + s) * scale
            bound += 2.0 ** -23 * abs_sum * scale  # Horovod's fp32 post-scaling for Average
            err = (got.double() - exact * scale).abs()
            check(bool((err <= bound).all()),
                  f"{name}: {case} outside the {compressor} bound (max err {err.max():.3g}, "
                  f"max bound {bound.max():.3g})")
        else:  # topk, first call on a fresh key: no residual yet
            k = math.ceil(ratio * n)
            expected = torch.zeros(n, dtype=torch.float32)
            for x in xs:  # rank order, as SlimReduce adds the payloads
                idx = torch.topk(x.abs(), k, sorted=False).indices
                expected[idx] += x[idx]
            expected = expected * scale  # a power of two: exact
            check(got.numpy().tobytes() == expected.numpy().tobytes(),
                  f"{name}: {case} is not the rank-order sum of each rank's top-{k} "
                  f"(max diff {(got - expected).abs().max():.3g})")
    reps = reports(cdir, "dreport", world)
    if check(all(reps), f"{name}: dtype job left no report on some rank"):
        for r, rep in enumerate(reps):
            c = rep["calls"]
            check(c["compressed"] == n_compressible,
                  f"{name}: dtype job rank {r} compressed {c['compressed']} calls, "
                  f"expected {n_compressible}")
            check(c["passed_through"] > 0, f"{name}: dtype job rank {r} passed nothing through")


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    top = sys.argv[1]
    with open(os.path.join(top, "configs")) as f:
        configs = [(w[0], w[1], w[2], " ".join(w[3:])) for w in
                   (line.split() for line in f if line.strip())]
    ratio = float(os.environ.get("SLIMREDUCE_TOPK_RATIO", "0.01"))

    rows = []
    summaries = {}
    for name, compressor, groups, extra in configs:
        cdir = os.path.join(top, name)
        rc = read_rc(os.path.join(cdir, "rc"))
        summ = load_json(os.path.join(cdir, "train.json"))
        if not check(rc == 0 and summ is not None, f"{name}: training job failed (exit code {rc})"):
            rows.append((name, compressor, None, None, None, groups, extra))
            continue
        summaries[name] = summ
        check(summ["params_identical"], f"{name}: parameters differ between ranks at the end: "
              f"{summ['param_digests']}")
        world = summ["world_size"]
        reps = reports(cdir, "report", world) if compressor != "off" else []
        logs = reports(cdir, "calllog", world) if compressor == "topk" else []
        rows.append((name, compressor, summ, reps, logs, groups, extra))

    base = summaries.get("off")
    check(base is not None, "the run without SlimReduce is missing: nothing to compare with")
    for name, compressor, summ, reps, logs, groups, extra in rows:
        if summ is None or base is None or compressor == "off":
            continue
        if not check(all(reps), f"{name}: some rank wrote no SlimReduce report"):
            continue
        rel = summ["final_eval_loss"] / base["final_eval_loss"] - 1.0
        if compressor == "none":
            check(summ["param_digests"] == base["param_digests"],
                  "none: final parameters differ from the run without SlimReduce "
                  "(pass-through must be bit for bit)")
            check(all(r["calls"]["compressed"] == 0 for r in reps), "none: something compressed")
            check(all(r["calls"]["passed_through"] > 0 for r in reps), "none: nothing counted")
            continue
        min_savings = TOPK_SAVINGS if compressor == "topk" else CAST_SAVINGS
        if int(groups) > 0:
            tol = TOPK_LOSS_TOL if compressor == "topk" else CAST_LOSS_TOL
        else:
            tol = DEFAULT_FUSION_LOSS_TOL
        for r, rep in enumerate(reps):
            c = rep["calls"]
            if int(groups) > 0:
                check(c["compressed"] == summ["steps"],
                      f"{name}: rank {r} compressed {c['compressed']} calls, expected one fused "
                      f"gradient buffer per step ({summ['steps']})")
            else:
                check(c["compressed"] > 0, f"{name}: rank {r} compressed nothing")
            check(c["passed_through"] > 0, f"{name}: rank {r} passed nothing through")
            check(c["warmup"] == 0 and c["ef_cap_fallback"] == 0,
                  f"{name}: rank {r} had warm-up/cap fallbacks {c}")
            check(rep["savings"] >= min_savings,
                  f"{name}: rank {r} savings {rep['savings']:.3f} < {min_savings}")
        if compressor == "topk" and check(logs and all(logs), f"{name}: calllog.c wrote nothing"):
            if int(groups) > 0:
                check(all(l["key_resets"] == 0 for l in logs),
                      f"{name}: error-feedback keys reset under fixed fusion: {logs}")
        check(abs(rel) <= tol, f"{name}: final loss {summ['final_eval_loss']:.5f} is "
              f"{100 * rel:+.2f}% from the uncompressed {base['final_eval_loss']:.5f} "
              f"(allowed {100 * tol:.0f}%)")

    # Horovod's own allreduce on every dtype.
    dbase_path = os.path.join(top, "off", "dtypes.pt")
    if os.environ.get("HVD_TEST_DTYPES", "1") != "1":
        print("note: dtype jobs not run (HVD_TEST_DTYPES=0)")
    elif check(read_rc(os.path.join(top, "off", "dtypes.rc")) == 0 and os.path.exists(dbase_path),
             "off: the dtype job without SlimReduce failed"):
        dbase = torch.load(dbase_path)
        check(dbase["same_on_all_ranks"], "off: dtype results differ between ranks")
        for dt, msg in dbase["allreduce_refused"].items():
            print(f"note: hvd.allreduce({dt}) " + (f"refused: {msg}" if msg else "now accepted"))
        for name, compressor, _, _ in configs:
            if name != "off" and os.path.exists(os.path.join(top, name, "dtypes.rc")):
                check_dtypes(name, compressor, os.path.join(top, name), dbase, ratio)

    # The table.
    hdr = ("config", "fusion", "final loss", "vs off", "compressed", "passed", "MB sent/rank",
           "savings", "key resets", "ms/step")
    print()
    print("| " + " | ".join(hdr) + " |")
    print("|" + "---|" * len(hdr))
    for name, compressor, summ, reps, logs, groups, extra in rows:
        fusion = ", ".join(([f"groups={groups}"] if int(groups) else ["time-driven"]) +
                           [kv.replace("HOROVOD_", "") for kv in extra.split()])
        if summ is None:
            print(f"| {name} | | FAILED | | | | | | | |")
            continue
        rel = (f"{100 * (summ['final_eval_loss'] / base['final_eval_loss'] - 1):+.2f}%"
               if base else "")
        if reps and all(reps):
            world = len(reps)
            comp = f"{reps[0]['calls']['compressed']}"
            passed = f"{reps[0]['calls']['passed_through']}"
            sent = sum(r["bytes"]["wire_sent"] for r in reps) / world / 1e6
            sav = f"{min(r['savings'] for r in reps):.3f}"
            sent = f"{sent:.1f}"
        else:
            comp = passed = sent = sav = "-"
        resets = (str(max(l["key_resets"] for l in logs)) if logs and all(logs) else "-")
        print(f"| {name} | {fusion} | {summ['final_eval_loss']:.4f} | "
              f"{rel} | {comp} | {passed} | {sent} | {sav} | {resets} | "
              f"{1e3 * summ['time_per_step_s']:.1f} |")
    print()
    print("compressed/passed: rank 0's calls; MB sent/rank: SlimReduce's wire_sent averaged over "
          "ranks (for none: what plain MPI would send); savings: the lowest rank's; key resets: "
          "the most on any rank (calllog.c).")
    print()
    if failures:
        for f in failures:
            print("FAIL: " + f)
        print(f"horovod integration: {len(failures)} assertion(s) failed")
        return 1
    print("horovod integration: all assertions held")
    return 0


if __name__ == "__main__":
    sys.exit(main())
