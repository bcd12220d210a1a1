#!/usr/bin/env python3
"""Runs an MPI job with SLIMREDUCE_TIMELINE set to a prefix in a new folder (the command line
after -- must export SLIMREDUCE_TIMELINE=@PREFIX@, which this script fills in) and checks
the timeline (docs/architecture.md, "Timeline"): one file per rank, <prefix>.<rank>.json, each
valid JSON, a list of complete events ("ph": "X") of this rank with a duration >= 0, only the
documented span names, and each of QUEUE, FUSE, COMPRESS, COMMUNICATE and DECOMPRESS present.

With --partitioned (blocking calls cut into partitions, pipelined): no QUEUE or FUSE needed;
spans of partitions carry "partition" and "partitions"; every COMMUNICATE is on lane (tid) 0,
some COMPRESS or DECOMPRESS on the helper's lane 1; a cut call's partitions go on the wire in
order 0, 1, ..., n - 1; and each partition's COMPRESS ends before its COMMUNICATE begins, which
ends before its DECOMPRESS begins.

With --device (MPI_Allreduce on device buffers, the MPI path's device routes): no QUEUE or
FUSE needed; each of COMPRESS, COMMUNICATE and DECOMPRESS has spans whose args say
"memory": "device", and each device call's three come in that order; with --partitioned too,
some device piece's phase is on the helper's lane (the pieces pipelined), and the order is
--partitioned's.

With --nccl (ncclAllReduce, spans from CUDA events): no QUEUE or FUSE needed; every device span
says "path": "nccl" and sits on a stream's lane (tid 2 and up); on each lane the spans come as
COMPRESS, COMMUNICATE, DECOMPRESS, again and again, each beginning where the one before ended
(one group's marks), groups one after another in time; and some span says "after_group" when
the compressor is int8 or powersgd (their later collectives, run after the group). The pieces
of a pipelined call (args "pipelined": true, with "partition" and "partitions") are checked
apart: each piece's COMPRESS, COMMUNICATE and DECOMPRESS, written together, each ending before
the next begins, its COMPRESS and DECOMPRESS on the side stream's lane and its COMMUNICATE on
another (the caller's stream); a call's pieces numbered 0, 1, ..., n - 1, their COMMUNICATEs in
that order in time. With --pipelined too, some pieces must be there.

With --auto CANDIDATES (SLIMREDUCE_COMPRESSOR=auto, blocking calls): no QUEUE or FUSE needed;
AUTO spans (each exchange of agreed times, "window" pass, probe or check, "chosen" one of
the candidates, or none yet after a first round's pass), one of a probe round at least, and COMPRESS spans marked "auto": probe, check or
chosen, probes among them (calls outside the schedule, queued or in an NCCL group, unmarked).

  check_timeline.py --np N [--partitioned | --device | --nccl [--pipelined]] -- MPIRUN... -x SLIMREDUCE_TIMELINE=@PREFIX@ ... PROGRAM
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

NAMES = {"QUEUE", "FUSE", "COMPRESS", "COMMUNICATE", "DECOMPRESS", "AUTO"}


def auto_failures(path, events, candidates):
    """SLIMREDUCE_COMPRESSOR=auto: AUTO spans (each exchange, with the class's
    choice, one of the candidates), probe rounds among them, and compressed
    calls marked probe, check or chosen."""
    failures = []
    exchanges = [e for e in events if e["name"] == "AUTO"]
    if not any(e["args"].get("window") == "probe" for e in exchanges):
        failures.append(f"{path}: no AUTO span of a probe round")
    for e in exchanges:
        window = e["args"].get("window")
        # A round's first pass may come before the class's first choice.
        chosen_ok = e["args"].get("chosen") in candidates or (
            window == "pass" and e["args"].get("chosen") == "")
        if not chosen_ok or window not in ("pass", "probe", "check"):
            failures.append(f"{path}: an AUTO span's args: {e['args']}")
            break
    # Unmarked: calls outside the schedule (queued, in an NCCL group), which take the choice.
    marks = {e["args"].get("auto") for e in events if e["name"] == "COMPRESS"} - {None}
    if "probe" not in marks or not marks <= {"probe", "check", "chosen"}:
        failures.append(f"{path}: COMPRESS spans marked {marks}")
    if not failures:
        print(f"{path}: {len(exchanges)} AUTO exchanges, calls marked {sorted(marks)}")
    return failures


def partition_failures(path, events):
    """What is wrong with the partitions' spans of one rank's timeline."""
    failures = []
    cut = [e for e in events if "partition" in e.get("args", {})]
    if not cut:
        return [f"{path}: no span of a partition"]
    if any(e["tid"] != 0 for e in cut if e["name"] == "COMMUNICATE"):
        failures.append(f"{path}: a COMMUNICATE off the caller's lane")
    if not any(e["tid"] == 1 for e in cut if e["name"] != "COMMUNICATE"):
        failures.append(f"{path}: no COMPRESS or DECOMPRESS on the helper's lane")
    # Calls one after another: walk the wire in time order and cut it into calls.
    wire = sorted((e for e in cut if e["name"] == "COMMUNICATE"), key=lambda e: e["ts"])
    calls, expected = [], 0
    for e in wire:
        part, parts = e["args"]["partition"], e["args"]["partitions"]
        if part != expected:
            return failures + [f"{path}: partition {part} of {parts} on the wire after "
                               f"{expected - 1}"]
        if part == 0:
            calls.append([])
        calls[-1].append(e)
        expected = 0 if part + 1 == parts else part + 1
    by_time = sorted(cut, key=lambda e: e["ts"])
    for e in wire:
        key = (e["args"]["count"], e["args"]["partition"])
        before = [s for s in by_time if s["name"] == "COMPRESS" and
                  (s["args"]["count"], s["args"]["partition"]) == key and s["ts"] <= e["ts"]]
        after = [s for s in by_time if s["name"] == "DECOMPRESS" and
                 (s["args"]["count"], s["args"]["partition"]) == key and s["ts"] >= e["ts"]]
        if not before or before[-1]["ts"] + before[-1]["dur"] > e["ts"] + 1e-3:
            failures.append(f"{path}: partition {key} on the wire before its COMPRESS ended")
            break
        if not after or after[0]["ts"] + 1e-3 < e["ts"] + e["dur"]:
            failures.append(f"{path}: partition {key} decoded before its COMMUNICATE ended")
            break
    if not failures:
        print(f"{path}: {len(calls)} cut calls, {len(wire)} partitions in order")
    return failures


def device_failures(path, events, partitioned):
    """What is wrong with the device calls' spans of one rank's timeline."""
    device = sorted((e for e in events if e.get("args", {}).get("memory") == "device"),
                    key=lambda e: e["ts"])
    names = [e["name"] for e in device]
    failures = [f"{path}: no {name} span of a device call" for name in
                ("COMPRESS", "COMMUNICATE", "DECOMPRESS") if name not in names]
    if partitioned:  # pipelined pieces overlap: their order is partition_failures' to check
        if not any(e["tid"] == 1 and "partition" in e["args"] for e in device):
            failures.append(f"{path}: no device piece's phase on the helper's lane")
        return failures
    # One call after another on one thread: the phases repeat in order.
    expected = ["COMPRESS", "COMMUNICATE", "DECOMPRESS"] * (len(names) // 3)
    if names != expected:
        failures.append(f"{path}: device spans out of order: {names[:9]}...")
    return failures


def piece_failures(path, pieces, pipelined):
    """What is wrong with the spans of pipelined NCCL calls' pieces (written three by three)."""
    if pipelined and not pieces:
        return [f"{path}: no span of a pipelined piece"]
    failures = []
    if len(pieces) % 3:
        return [f"{path}: {len(pieces)} spans of pipelined pieces, not threes"]
    expected_partition, last_wire_end = 0, None
    for i in range(0, len(pieces), 3):
        c, m, d = pieces[i:i + 3]
        if [c["name"], m["name"], d["name"]] != ["COMPRESS", "COMMUNICATE", "DECOMPRESS"]:
            failures.append(f"{path}: a piece's spans out of order: {c['name']}, {m['name']}, {d['name']}")
            break
        if c["tid"] != d["tid"] or c["tid"] == m["tid"]:
            failures.append(f"{path}: a piece's kernels not on a side lane of their own: {c}, {m}, {d}")
            break
        if c["ts"] + c["dur"] > m["ts"] + 1e-2 or m["ts"] + m["dur"] > d["ts"] + 1e-2:
            failures.append(f"{path}: a piece's phases overlap: {c}, {m}, {d}")
            break
        part, parts = m["args"].get("partition"), m["args"].get("partitions")
        if part != expected_partition or parts is None or parts < 2:
            failures.append(f"{path}: piece {part} of {parts} where {expected_partition} was due")
            break
        if part and last_wire_end is not None and m["ts"] + 1e-2 < last_wire_end:
            failures.append(f"{path}: piece {part} on the wire before piece {part - 1} left it")
            break
        last_wire_end = m["ts"] + m["dur"]
        expected_partition = 0 if part + 1 == parts else part + 1
    if expected_partition:
        failures.append(f"{path}: a pipelined call's last pieces are missing")
    if not failures and pieces:
        print(f"{path}: {len(pieces) // 3} pipelined pieces timed")
    return failures


def nccl_failures(path, events, after_group, pipelined):
    """What is wrong with the NCCL groups' spans (CUDA events) of one rank's timeline."""
    spans = [e for e in events if e.get("args", {}).get("path") == "nccl"]
    if not spans:
        return [f"{path}: no span of an NCCL call"]
    pieces = [e for e in spans if e["args"].get("pipelined")]
    spans = [e for e in spans if not e["args"].get("pipelined")]
    failures = piece_failures(path, pieces, pipelined)
    if any(e["args"].get("memory") != "device" or e["tid"] < 2 for e in spans):
        failures.append(f"{path}: an NCCL span not marked device, or not on a stream's lane")
    for lane in sorted({e["tid"] for e in spans}):
        # The order they were written in: one group's three, then the next group's.
        mine = [e for e in spans if e["tid"] == lane]
        names = [e["name"] for e in mine]
        if names != ["COMPRESS", "COMMUNICATE", "DECOMPRESS"] * (len(names) // 3):
            failures.append(f"{path}: lane {lane}: spans out of order: {names[:9]}...")
            continue
        for i in range(0, len(mine), 3):
            c, m, d = mine[i:i + 3]
            if abs(c["ts"] + c["dur"] - m["ts"]) > 1e-2 or abs(m["ts"] + m["dur"] - d["ts"]) > 1e-2:
                failures.append(f"{path}: lane {lane}: a group's spans do not meet: {c}, {m}, {d}")
                break
            if i and mine[i - 1]["ts"] + mine[i - 1]["dur"] > c["ts"] + 1e-2:
                failures.append(f"{path}: lane {lane}: a group began before the one before ended")
                break
    if pieces and any(e["args"].get("memory") != "device" or e["tid"] < 2 for e in pieces):
        failures.append(f"{path}: a piece's span not marked device, or not on a stream's lane")
    if after_group and not any(e["args"].get("after_group") for e in spans):
        failures.append(f"{path}: no span says after_group")
    if not failures:
        print(f"{path}: {len(spans) // 3} NCCL groups timed on "
              f"{len({e['tid'] for e in spans})} stream lane(s)")
    return failures


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--np", type=int, required=True)
    parser.add_argument("--partitioned", action="store_true")
    parser.add_argument("--device", action="store_true")
    parser.add_argument("--nccl", action="store_true")
    parser.add_argument("--after-group", action="store_true",
                        help="with --nccl: some span must say after_group")
    parser.add_argument("--pipelined", action="store_true",
                        help="with --nccl: some call must have run pipelined, its pieces timed")
    parser.add_argument("--auto", metavar="CANDIDATES",
                        help="SLIMREDUCE_COMPRESSOR=auto with these candidates (a,b,c): AUTO spans "
                        "and marked calls")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    failures = []
    with tempfile.TemporaryDirectory() as folder:
        prefix = os.path.join(folder, "timeline")
        run = subprocess.run([part.replace("@PREFIX@", prefix) for part in command],
                             capture_output=True, text=True, timeout=240)
        if run.returncode != 0:
            # A job's own failed checks may sit anywhere in a long output: show
            # them all, then the output's end.
            failed = [line for line in run.stdout.splitlines() if line.startswith("FAIL")]
            failures.append(f"the job failed ({run.returncode}):\n" + "\n".join(failed[:40]) +
                            f"\n...\n{run.stdout[-2000:]}{run.stderr[-2000:]}")
        for rank in range(args.np):
            path = f"{prefix}.{rank}.json"
            if not os.path.exists(path):
                failures.append(f"{path} was not written")
                continue
            try:
                events = json.load(open(path))
            except json.JSONDecodeError as error:
                failures.append(f"{path} is not valid JSON: {error}")
                continue
            seen = set()
            for event in events:
                seen.add(event.get("name"))
                if event.get("ph") != "X" or event.get("pid") != rank or event.get("dur", -1) < 0:
                    failures.append(f"{path}: not a complete event of rank {rank}: {event}")
                    break
            if seen - NAMES:
                failures.append(f"{path}: unknown spans {seen - NAMES}")
            wanted = NAMES - {"AUTO"}
            if args.partitioned or args.device or args.nccl or args.auto:
                wanted -= {"QUEUE", "FUSE"}  # blocking calls
            if args.auto:
                wanted |= {"AUTO"}
            if wanted - seen:
                failures.append(f"{path}: no {wanted - seen} span")
            if args.partitioned:
                failures += partition_failures(path, events)
            if args.device:
                failures += device_failures(path, events, args.partitioned)
            if args.nccl:
                failures += nccl_failures(path, events, args.after_group, args.pipelined)
            if args.auto:
                failures += auto_failures(path, events, args.auto.split(","))
            if rank == 0 and not failures:
                print(f"rank 0: {len(events)} spans: " +
                      ", ".join(f"{n} {sum(e['name'] == n for e in events)}" for n in sorted(NAMES)))
    for failure in failures:
        print("FAIL:", failure)
    if not failures:
        print(f"ok: {args.np} timelines")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
