#!/usr/bin/env python3
"""Runs a plain MPI job (C, Fortran or Python) under mpirun with
libslimreduce.so preloaded and checks what the library reports against the
traffic the job is known to send.

  check_job.py report  --lib L --np N --compressor C --job JOB -- MPIRUN... --program PROGRAM...
  check_job.py table   --lib L --np N --compressor C --job JOB -- MPIRUN... --program PROGRAM...
  check_job.py badenv  --lib L --np N --setting NAME=VALUE --expect TEXT -- MPIRUN... --program PROGRAM...
  check_job.py autoreset --lib L --np N -- MPIRUN... --program fusion_buffer_job
  check_job.py autoskew --lib L --np N [--late-us U] -- MPIRUN... --program test_mpi_auto --gtest_filter=Auto.EveryRank*
  check_job.py advice  --lib L --np N --compressor C [--env NAME=VALUE]... [--advised] -- MPIRUN... --program PROGRAM...
"""
import argparse
import ctypes
import glob
import json
import math
import os
import subprocess
import sys
import tempfile

import launch_env

ARGS = None  # the parsed options (run() reads the launcher's family)

# (calls, bytes per call) of each job's compressible float traffic and of its
# pass-through control traffic; the jobs themselves check their sums.
JOBS = {
    "c": {"floats": (5, 1 << 20), "control": (3, 32), "count": 1 << 18},
    "fortran": {"floats": (4, 1 << 18), "control": (1, 40), "count": 1 << 16},
    "python": {"floats": (4, 1 << 18), "control": (1, 40), "count": 1 << 16},
}


def ring(nbytes, ranks):
    return 2.0 * (ranks - 1) / ranks * nbytes


def expected_report(job, ranks, compressor, ratio):
    float_calls, float_bytes = JOBS[job]["floats"]
    control_calls, control_bytes = JOBS[job]["control"]
    total_input = float_calls * float_bytes + control_calls * control_bytes
    baseline = ring(total_input, ranks)
    if compressor == "none":
        compressed, float_wire = 0, ring(float_calls * float_bytes, ranks)
    elif compressor in ("fp16", "bf16"):
        compressed, float_wire = float_calls, ring(float_calls * float_bytes / 2, ranks)
    else:  # topk: (n - 1) x payload, 8 bytes per pair
        k = max(1, math.ceil(ratio * JOBS[job]["count"]))
        compressed, float_wire = float_calls, float_calls * (ranks - 1) * 8 * k
    sent = float_wire + ring(control_calls * control_bytes, ranks)
    return {
        "intercepted": float_calls + control_calls,
        "compressed": compressed,
        "passed_through": float_calls + control_calls - compressed,
        "input": total_input,
        "wire_baseline": baseline,
        "wire_sent": sent,
        "savings": 1 - sent / baseline,
    }


def run(command, env_settings):
    # Each rank's variables in its launcher's words: Open MPI's mpirun, MPICH's Hydra.
    exports = launch_env.exports(ARGS.mpi, env_settings)
    mpirun, program = command[: command.index("--program")], command[command.index("--program") + 1 :]
    full = mpirun + exports + program
    return subprocess.run(full, capture_output=True, text=True, timeout=240)


def fail(message, result=None):
    print("FAIL:", message)
    if result is not None:
        print("--- stdout\n" + result.stdout[-4000:] + "\n--- stderr\n" + result.stderr[-4000:])
    sys.exit(1)


def reports_of(args, command, settings):
    """Runs the job with `settings` and per-rank JSON reports; returns each
    report file's name and contents, in rank order."""
    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "report")
        result = run(command, {"LD_PRELOAD": args.lib, "SLIMREDUCE_REPORT": prefix, **settings})
        if result.returncode != 0:
            fail(f"job exited with {result.returncode}", result)
        files = sorted(glob.glob(prefix + ".*.json"))
        if len(files) != args.np:
            fail(f"expected {args.np} report files, found {files}", result)
        reports = []
        for path in files:
            with open(path) as handle:
                reports.append((os.path.basename(path), json.load(handle)))
        return reports


def check_report(args, command):
    reports = reports_of(args, command, {"SLIMREDUCE_COMPRESSOR": args.compressor})
    want = expected_report(args.job, args.np, args.compressor, 0.01)
    ranks_seen = set()
    for path, report in reports:
        ranks_seen.add(report["rank"])
        checks = {
            "world_size": (report["world_size"], args.np),
            "compressor": (report["compressor"], args.compressor),
            "calls.intercepted": (report["calls"]["intercepted"], want["intercepted"]),
            "calls.compressed": (report["calls"]["compressed"], want["compressed"]),
            "calls.passed_through": (report["calls"]["passed_through"], want["passed_through"]),
            "bytes.input": (report["bytes"]["input"], want["input"]),
        }
        for key, (got, expected) in checks.items():
            if got != expected:
                fail(f"{path}: {key} = {got}, expected {expected}")
        for key in ("wire_baseline", "wire_sent"):
            if abs(report["bytes"][key] - want[key]) > 1.0:
                fail(f"{path}: bytes.{key} = {report['bytes'][key]}, expected {want[key]}")
        if abs(report["savings"] - want["savings"]) > 1e-5:
            fail(f"{path}: savings = {report['savings']}, expected {want['savings']}")
    if ranks_seen != set(range(args.np)):
        fail(f"ranks in reports: {sorted(ranks_seen)}")
    print(f"OK: {args.np} reports, savings {want['savings']:.4f} as expected")


def check_table(args, command):
    result = run(command, {"LD_PRELOAD": args.lib, "SLIMREDUCE_COMPRESSOR": args.compressor,
                           "SLIMREDUCE_REPORT": "stderr"})
    if result.returncode != 0:
        fail(f"job exited with {result.returncode}", result)
    if result.stderr.count("SlimReduce report") != 1:
        fail("expected exactly one table, from rank 0", result)
    want = expected_report(args.job, args.np, args.compressor, 0.01)
    expected_line = f"intercepted {want['intercepted'] * args.np:12d}"
    if expected_line not in result.stderr:
        fail(f"expected '{expected_line}' (summed over ranks)", result)
    expected_savings = f"savings    {100 * want['savings']:.1f}%"
    if expected_savings not in result.stderr:
        fail(f"expected '{expected_savings}'", result)
    print("OK: one table, sums over ranks")


def check_bad_setting(args, command):
    name, value = args.setting.split("=", 1)
    result = run(command, {"LD_PRELOAD": args.lib, name: value})
    if result.returncode == 0:
        fail(f"{args.setting} was accepted", result)
    lines = [line for line in (result.stdout + result.stderr).splitlines() if "slimreduce: error" in line]
    if len(lines) != 1 or args.expect not in lines[0]:
        fail(f"expected one line containing {args.expect!r}, got {lines}", result)
    print("OK:", lines[0])


def agreed_table(reports):
    """auto's choice table, which every rank's report must hold alike."""
    tables = [report["auto"]["classes"] for _, report in reports]
    if any(table != tables[0] for table in tables):
        fail(f"the ranks' choice tables differ: {tables}")
    return tables[0]


def check_auto_reset(args, command):
    """SLIMREDUCE_COMPRESSOR=auto with candidates int8 (keeps a residual) and
    fp16 (keeps none), on fusion_buffer_job: the class whose buffer changes
    make-up every call is chosen without int8 (reset_rounds counts it), from
    fp16 and int8's unbiased twin, which a round probes once a window of the
    class was resetting (its first pass, or else its first round); the steady
    class is not, and never probes the twin; every rank's report holds the
    same table."""
    table = agreed_table(reports_of(args, command, {"SLIMREDUCE_COMPRESSOR": "auto",
                                                    "SLIMREDUCE_AUTO_CANDIDATES": "int8,fp16"}))
    by_size = {row["min_bytes"]: row for row in table}
    changing, steady = by_size.get(1 << 19), by_size.get(1 << 17)
    if not changing or not steady:
        fail(f"expected classes of 512 KiB and 128 KiB: {table}")
    # Chosen among those that keep no residual, int8's unbiased twin probed too.
    if not (changing["reset_rounds"] >= 1 and changing["resetting"] and
            changing["chosen"] in ("fp16", "int8/unbiased") and
            "int8/unbiased" in changing["median_seconds"]):
        fail(f"the changing buffer's class: {changing}")
    if steady["reset_rounds"] != 0 or steady["resetting"] or "int8/unbiased" in steady["median_seconds"]:
        fail(f"the steady buffer's class: {steady}")
    print(f"OK: {args.np} ranks agree; the changing class chose {changing['chosen']} "
          f"({changing['reset_rounds']} reset rounds; medians {changing['median_seconds']}), "
          f"the steady class {steady['chosen']}")


def check_auto_skew(args, command):
    """SLIMREDUCE_COMPRESSOR=auto with one rank --late-us late to every call
    (test_mpi_auto's AUTO_TEST_SLOW_RANK): a probe is timed from the ranks'
    common start, so no agreed median holds the lateness (a median that did
    would be the lateness or more; each must be under 0.8 of it: on 2 cores
    beside other tests 3 ranks' medians reached 42 ms with no lateness in
    them), and every rank's choice table is the same."""
    late = args.late_us / 1e6
    table = agreed_table(reports_of(args, command, {"SLIMREDUCE_COMPRESSOR": "auto",
                                                    "AUTO_TEST_SLOW_RANK": "1",
                                                    "AUTO_TEST_SLOW_US": str(args.late_us)}))
    medians = [(row["min_bytes"], name, seconds) for row in table
               for name, seconds in row["median_seconds"].items()]
    if not medians:
        fail(f"no measured median in {table}")
    slow = [entry for entry in medians if entry[2] >= 0.8 * late]
    if slow:
        fail(f"medians holding the {args.late_us} us lateness: {slow}")
    longest = max(seconds for _, _, seconds in medians)
    print(f"OK: {len(medians)} agreed medians, the longest {longest * 1e3:.3f} ms "
          f"(rank 1 {late * 1e3:.0f} ms late to every call)")


def ucx_version():
    """The (major, minor) of the UCX that MPICH loads, or None."""
    try:
        ucp = ctypes.CDLL("libucp.so.0")
    except OSError:
        return None
    major, minor, release = ctypes.c_uint(), ctypes.c_uint(), ctypes.c_uint()
    ucp.ucp_get_version(ctypes.byref(major), ctypes.byref(minor), ctypes.byref(release))
    return (major.value, minor.value)


def check_advice(args, command):
    """The one line on MPICH's UCX rendezvous (core/mpi/ucx_advice.h): from rank 0
    alone, once, where the case is one it applies to (--advised) and the UCX is
    older than 1.16; never otherwise. The job's own results are untouched."""
    settings = dict(setting.split("=", 1) for setting in args.env)
    result = run(command, {"LD_PRELOAD": args.lib, "SLIMREDUCE_COMPRESSOR": args.compressor,
                           **settings})
    if result.returncode != 0:
        fail(f"job exited with {result.returncode}", result)
    version = ucx_version()
    expected = 1 if args.advised and version is not None and version < (1, 16) else 0
    lines = [line for line in result.stderr.splitlines() if "MPICH sends over TCP" in line]
    if len(lines) != expected or any(not line.startswith("slimreduce[0] WARN:") for line in lines):
        fail(f"UCX {version}: expected {expected} line(s) from rank 0, got {lines}", result)
    print(f"OK: UCX {version}, {len(lines)} line(s)" + (f": {lines[0][:100]}..." if lines else ""))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["report", "table", "badenv", "autoreset", "advice",
                                         "autoskew"])
    parser.add_argument("--lib", required=True)
    parser.add_argument("--np", type=int, required=True)
    parser.add_argument("--compressor", default="none")
    parser.add_argument("--job", choices=sorted(JOBS), default="c")
    parser.add_argument("--setting")
    parser.add_argument("--expect")
    parser.add_argument("--mpi", choices=launch_env.FAMILIES, default="openmpi")
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE for every rank")
    parser.add_argument("--advised", action="store_true", help="advice: a case it applies to")
    parser.add_argument("--late-us", type=int, default=100000, help="autoskew: rank 1's lateness")
    split = sys.argv.index("--")
    args = parser.parse_args(sys.argv[1:split])
    global ARGS
    ARGS = args
    command = sys.argv[split + 1 :]
    {"report": check_report, "table": check_table, "badenv": check_bad_setting,
     "autoreset": check_auto_reset, "advice": check_advice,
     "autoskew": check_auto_skew}[args.mode](args, command)


if __name__ == "__main__":
    main()
