#!/usr/bin/env python3
"""Runs slimreduce-bench under mpirun and checks what it writes.

  check_bench.py sweep -- MPIRUN... BENCH [ARGS...]
      The run must pass its own -c 1 check; then its CSV and JSON are read
      back and every row is checked against the nccl-tests formulas and the
      wire bytes SlimReduce's counters must give for that compressor and size.
  check_bench.py fails --expect TEXT -- MPIRUN... BENCH [ARGS...]
      The run must exit non-zero and say TEXT (stdout or stderr).

No timing thresholds: times are only checked to be positive and consistent.
"""
import argparse
import csv
import json
import math
import os
import re
import subprocess
import sys
import tempfile

RUN_TIMEOUT_S = 240


def fail(message):
    print(f"check_bench: {message}", file=sys.stderr)
    sys.exit(1)


def close(a, b, rel=1e-6):
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-9)


def run(command):
    done = subprocess.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    return done


def setting(environment, name, default):
    """A SLIMREDUCE_* value from the run's recorded environment."""
    found = re.search(rf"(?:^| ){name}=(\S+)", environment)
    return found.group(1) if found else default


def byte_size(text):
    number, unit = re.fullmatch(r"([0-9.]+)\s*([KMGT]?)(?:i?B)?", text.upper()).groups()
    return int(float(number) * 1024 ** ("KMGT".index(unit) + 1 if unit else 0))


def powersgd_wire(count, rank, ranks, ring, min_compression):
    """Two fp32 sums (reduce-scatter + allgather) of P (rows x r) and Q (cols x r),
    each padded to whole blocks; a tensor not worth it is summed whole
    (kernels/low_rank.h's view, rebuilt here from its documented rule)."""
    rows = math.isqrt(count)
    while count % rows:
        rows -= 1
    cols = count // rows
    if cols > 16 * rows:
        cols = math.isqrt(count - 1) + 1
        rows = -(-count // cols)
    r = min(rank, 64, rows, cols)
    padded = lambda floats: -(-floats // ranks) * ranks
    if r * (rows + cols) * min_compression > count:
        rest = count % ranks
        return ring * 4 * (count - rest) + (ring * 4 * ranks if rest else 0)
    return ring * 4 * (padded(rows * r) + padded(cols * r))


def expected_wire(row, ranks, compressed, topk_values, environment=""):
    """SlimReduce's wire_sent per call per rank (design notes, section 5)."""
    ring = 2.0 * (ranks - 1) / ranks if ranks > 1 else 0.0
    if not compressed:
        return ring * row["bytes"]
    name = row["compressor"].split(":")[0]
    if name in ("fp16", "bf16"):
        return ring * row["count"] * 2
    if name == "topk":
        k = max(1, math.ceil(row["topk_ratio"] * row["count"]))
        k = min(k, row["count"])
        return (ranks - 1) * k * (4 + (2 if topk_values == "fp16" else 4))
    if name == "powersgd":
        parts = row["compressor"].split(":")
        rank = int(parts[1]) if len(parts) > 1 else int(
            setting(environment, "SLIMREDUCE_POWERSGD_RANK", "4"))
        times = float(setting(environment, "SLIMREDUCE_POWERSGD_MIN_COMPRESSION", "2"))
        return powersgd_wire(row["count"], rank, ranks, ring, times)
    fail(f"no wire model for {row['compressor']}")


def normalize_csv(record):
    """CSV cells are text: give them the JSON types."""
    out = dict(record)
    for key in ("ranks", "bytes", "count"):
        out[key] = int(record[key])
    for key, value in record.items():
        if key in ("ranks", "bytes", "count", "label", "compressor", "error_metric", "check"):
            continue
        if key == "compressed":
            out[key] = value == "1"
        else:
            out[key] = None if value == "" else float(value)
    return out


def check_row(row, meta, min_bytes, topk_values):
    ranks = meta["ranks"]
    where = f"{row['bytes']} B {row['compressor']}"
    if row["check"] != "ok":
        fail(f"{where}: check is {row['check']!r}")
    if not (row["time_us"] > 0 and row["time_median_us"] <= row["time_us"] * (1 + 1e-12)):
        fail(f"{where}: times {row['time_us']} / {row['time_median_us']}")
    if not close(row["algbw_gbs"], row["bytes"] / row["time_us"] / 1e3):
        fail(f"{where}: algbw is not bytes / time")
    if not close(row["busbw_gbs"], row["algbw_gbs"] * 2 * (ranks - 1) / ranks):
        fail(f"{where}: busbw is not algbw x 2(n-1)/n")
    if not close(row["speedup"], row["baseline_us"] / row["time_us"]):
        fail(f"{where}: speedup is not baseline / time")
    eligible = row["compressor"] != "none" and row["bytes"] >= min_bytes
    if row["compressed"] != eligible:
        fail(f"{where}: compressed={row['compressed']}, expected {eligible}")
    wire = expected_wire(row, ranks, eligible, topk_values, meta["environment"])
    if not close(row["wire_bytes_per_rank"], wire):
        fail(f"{where}: wire {row['wire_bytes_per_rank']} per rank, expected {wire}")
    baseline = expected_wire(row, ranks, False, topk_values)
    savings = 1 - wire / baseline if baseline else 0
    if not close(row["savings"], savings, 1e-6) or (not eligible and abs(row["savings"]) > 1e-12):
        fail(f"{where}: savings {row['savings']}, expected {savings}")
    metric = "rel_l2" if eligible and row["compressor"].startswith("topk") else "max_rel_sum_abs"
    if row["error_metric"] != metric or row["error"] is None or row["error_first"] is None:
        fail(f"{where}: error columns {row['error_metric']} {row['error']} {row['error_first']}")


def check_rows(rows, meta):
    min_bytes = byte_size(setting(meta["environment"], "SLIMREDUCE_MIN_BYTES", "65536"))
    topk_values = setting(meta["environment"], "SLIMREDUCE_TOPK_VALUES", "fp32")
    sizes = sorted({row["bytes"] for row in rows})
    compressors = list(dict.fromkeys(row["compressor"] for row in rows))
    if compressors[0] != "none" or len(rows) != len(sizes) * len(compressors):
        fail(f"expected every size x compressor, none first: {compressors}, {sizes}")
    for size in sizes:
        first = next(row for row in rows if row["bytes"] == size)
        if first["compressor"] != "none" or first["speedup"] != 1:
            fail(f"{size} B: the baseline row must come first, speedup 1")
    for row in rows:
        check_row(row, meta, min_bytes, topk_values)
    counted = sum(row["wire_bytes_per_rank"] * meta["ranks"] * meta["iters"] for row in rows)
    if meta["total_wire_sent"] < counted * (1 - 1e-9):
        fail(f"total_wire_sent {meta['total_wire_sent']} is below the timed calls' {counted}")
    return sizes, compressors


def sweep(command):
    with tempfile.TemporaryDirectory() as folder:
        csv_path, json_path = os.path.join(folder, "r.csv"), os.path.join(folder, "r.json")
        done = run(command + ["-c", "1", "--csv", csv_path, "--json", json_path])
        if done.returncode != 0:
            fail(f"the bench exited with {done.returncode}")
        with open(json_path) as f:
            meta = json.load(f)
        with open(csv_path, newline="") as f:
            csv_rows = [normalize_csv(r) for r in csv.DictReader(f)]
    json_rows = meta.pop("rows")
    if len(csv_rows) != len(json_rows):
        fail("CSV and JSON hold different numbers of rows")
    for a, b in zip(csv_rows, json_rows):
        for key, value in b.items():
            same = close(a[key], value) if isinstance(value, float) else a[key] == value
            if not same:
                fail(f"CSV and JSON disagree on {key}: {a[key]!r} vs {value!r}")
    sizes, compressors = check_rows(json_rows, meta)
    table = [line for line in done.stdout.splitlines() if line and not line.startswith("#")]
    if len(table) != len(json_rows):
        fail(f"the table on stdout has {len(table)} rows, the files {len(json_rows)}")
    print(f"check_bench: {len(json_rows)} rows ({len(sizes)} sizes x {compressors}) consistent")


def fails(command, expect):
    done = run(command)
    if done.returncode == 0:
        fail("the bench succeeded; it should have failed")
    if expect not in done.stdout + done.stderr:
        fail(f"the output does not say {expect!r}")
    print(f"check_bench: failed as expected, saying {expect!r}")


def main():
    argv = sys.argv[1:]
    if "--" not in argv:
        fail("usage: check_bench.py sweep|fails [--expect TEXT] -- COMMAND...")
    split = argv.index("--")
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["sweep", "fails"])
    parser.add_argument("--expect", default="")
    args = parser.parse_args(argv[:split])
    command = argv[split + 1 :]
    if args.mode == "sweep":
        sweep(command)
    else:
        fails(command, args.expect)


if __name__ == "__main__":
    main()
