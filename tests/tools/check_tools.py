#!/usr/bin/env python3
"""Tests of the user-facing tools (docs/tools.md), run by ctest from
tests/tools/CMakeLists.txt against a `cmake --install`ed prefix:

  check_tools.py install  --prefix P --build B [--nccl]     installs B into P, checks the tree
  check_tools.py launcher --prefix P                        slimreduce-run: --dry-run per
                                                            launcher, environments, errors
  check_tools.py job      --prefix P --work W -- MPIRUN...  real mpirun jobs through slimreduce-run
  check_tools.py report   --prefix P --work W -- MPIRUN...  slimreduce-report on real reports
  check_tools.py module   --prefix P --work W -- MPIRUN...  the slimreduce module in a job
  check_tools.py consumer --prefix P --work W --source S -- MPIRUN...
                                                            find_package and pkg-config builds
  check_tools.py pip      --work W --source S -- MPIRUN...  pip install into a fresh venv, one job

Each prints what it checked and exits 1 on the first failure.
"""
import argparse
import glob
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SYSTEM_PYTHON = "/usr/bin/python3"  # Debian's: mpi4py, numpy and matplotlib are its packages


class Failure(Exception):
    pass


def expect(condition, what):
    if not condition:
        raise Failure(what)


def run(argv, env=None, check=None, cwd=None, timeout=300):
    """Runs argv; returns (rc, stdout, stderr). check=0 demands success."""
    result = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if check is not None and result.returncode != check:
        raise Failure(f"{' '.join(argv)} exited {result.returncode}, expected {check}\n"
                      f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}")
    return result.returncode, result.stdout, result.stderr


def clean_env(**extra):
    """The test's environment without any SLIMREDUCE_* or LD_PRELOAD, plus extra."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLIMREDUCE_") and k != "LD_PRELOAD"}
    env.update(extra)
    return env


def one_error_line(rc, stderr, prog, text, what):
    """A tool's error: exit code 2 and one line on stderr, containing text."""
    lines = stderr.strip().splitlines()
    expect(rc == 2, f"{what}: exit code {rc}, expected 2 (stderr: {stderr.strip()})")
    expect("Traceback" not in stderr, f"{what}: a traceback:\n{stderr}")
    expect(len(lines) == 1, f"{what}: {len(lines)} lines on stderr, expected one:\n{stderr}")
    expect(lines[0].startswith(f"{prog}: error: "), f"{what}: {lines[0]!r}")
    expect(text in lines[0], f"{what}: {lines[0]!r} does not say {text!r}")


def version_of(source):
    with open(os.path.join(source, "CMakeLists.txt")) as stream:
        return re.search(r"project\(SlimReduce VERSION ([0-9.]+)", stream.read()).group(1)


# ---- install ----------------------------------------------------------------------------------


def case_install(args):
    shutil.rmtree(args.prefix, ignore_errors=True)
    run([args.cmake, "--install", args.build, "--prefix", args.prefix], check=0)
    wanted = ["lib/libslimreduce.so", "include/slimreduce.h", "bin/slimreduce-settings",
              "bin/slimreduce-model",
              "bin/slimreduce-run", "bin/slimreduce-report",
              "lib/cmake/SlimReduce/SlimReduceConfig.cmake",
              "lib/cmake/SlimReduce/SlimReduceConfigVersion.cmake", "lib/pkgconfig/slimreduce.pc",
              "share/slimreduce/python/slimreduce/__init__.py",
              "share/slimreduce/python/slimreduce/run.py",
              "share/slimreduce/python/slimreduce/report.py"]
    if args.nccl:
        wanted.append("lib/libslimreduce_nccl.so")
    # The MPICH build's library beside it, where that build is there (its own
    # install component: the tree's other files stay the Open MPI build's).
    if args.mpich_build and os.path.isfile(os.path.join(args.mpich_build, "CMakeCache.txt")):
        run([args.cmake, "--install", args.mpich_build, "--component", "mpich", "--prefix", args.prefix],
            check=0)
        wanted += ["lib/libslimreduce-mpich.so", "lib/pkgconfig/slimreduce-mpich.pc"]
    for tool in ("slimreduce-run", "slimreduce-report"):
        expect(os.access(os.path.join(args.prefix, "bin", tool), os.X_OK), f"bin/{tool} is not executable")
    for path in wanted:
        expect(os.path.isfile(os.path.join(args.prefix, path)), f"cmake --install did not install {path}")
    exports = os.path.join(HERE, os.pardir, "check_exports.sh")
    run([exports, os.path.join(args.prefix, "lib", "libslimreduce.so")], check=0)
    if "lib/libslimreduce-mpich.so" in wanted:
        run([exports, os.path.join(args.prefix, "lib", "libslimreduce-mpich.so"), "--no-fortran"], check=0)
    print(f"ok: {len(wanted)} files installed in {args.prefix}, the library exports entry points only")


# ---- launcher ---------------------------------------------------------------------------------

STUB = """#!/bin/sh
# A stand-in launcher: answers --version as Open MPI's does (slimreduce-run asks
# an MPI launcher which MPI it is); otherwise records how it was started, and
# starts nothing.
if [ "$1" = --version ]; then echo 'mpirun (Open MPI) 4.1.4'; exit 0; fi
{{
  printf 'argv0=%s\\n' "$0"
  for a in "$@"; do printf 'arg=%s\\n' "$a"; done
  printf 'LD_PRELOAD=%s\\n' "${{LD_PRELOAD-}}"
  env | grep '^SLIMREDUCE_' | sort
}} > "{record}.$(basename "$0")"
"""


def case_launcher(args):
    tool = os.path.join(args.prefix, "bin", "slimreduce-run")
    lib = os.path.realpath(os.path.join(args.prefix, "lib", "libslimreduce.so"))
    nccl = os.path.realpath(os.path.join(args.prefix, "lib", "libslimreduce_nccl.so"))
    torch_lib = nccl if os.path.isfile(nccl) else lib
    with tempfile.TemporaryDirectory() as tmp:
        stubs = os.path.join(tmp, "stubs")
        os.mkdir(stubs)
        record = os.path.join(tmp, "record")
        for name in ("mpirun", "mpiexec", "prterun", "horovodrun", "torchrun", "srun", "plainjob"):
            path = os.path.join(stubs, name)
            with open(path, "w") as stream:
                stream.write(STUB.format(record=record))
            os.chmod(path, 0o755)
        other = "libm.so.6"  # harmless to preload
        env = clean_env(PATH=stubs + os.pathsep + os.environ["PATH"], LD_PRELOAD=other,
                        SLIMREDUCE_LOG_LEVEL="info")
        opts = ["--compressor", "topk:0.05", "--report", "stderr", "--env", "SLIMREDUCE_MIN_BYTES=1M"]
        ours = "SLIMREDUCE_MIN_BYTES=1M SLIMREDUCE_COMPRESSOR=topk SLIMREDUCE_TOPK_RATIO=0.05 SLIMREDUCE_REPORT=stderr"
        x = ("-x LD_PRELOAD={lib}:{other} -x SLIMREDUCE_LOG_LEVEL=info -x SLIMREDUCE_MIN_BYTES=1M "
             "-x SLIMREDUCE_COMPRESSOR=topk -x SLIMREDUCE_TOPK_RATIO=0.05 -x SLIMREDUCE_REPORT=stderr")
        x = x.format(lib=lib, other=other)
        cases = {
            "mpirun": (["mpirun", "-np", "4", "./my job"], f"mpirun {x} -np 4 './my job'"),
            "mpiexec": (["mpiexec", "-n", "2", "./job"], f"mpiexec {x} -n 2 ./job"),
            "prterun": (["prterun", "-n", "2", "./job"], f"prterun {x} -n 2 ./job"),
            "horovodrun": (["horovodrun", "-np", "4", "python3", "train.py"],
                           f"LD_PRELOAD={lib}:{other} {ours} horovodrun -np 4 python3 train.py"),
            "torchrun": (["torchrun", "--nproc-per-node", "8", "train.py"],
                         f"LD_PRELOAD={torch_lib}:{other} {ours} torchrun --nproc-per-node 8 train.py"),
            "srun": (["srun", "-N", "2", "./job"], f"LD_PRELOAD={lib}:{other} {ours} srun -N 2 ./job"),
            "plainjob": (["plainjob", "--steps", "3"],
                         f"LD_PRELOAD={lib}:{other} {ours} plainjob --steps 3"),
        }
        for name, (command, line) in cases.items():
            _, out, err = run([tool] + opts + ["--dry-run", "--"] + command, env=env, check=0)
            expect(out.strip() == line, f"--dry-run for {name}:\n got      {out.strip()}\n expected {line}")
            expect(not glob.glob(record + ".*"), f"--dry-run for {name} started the launcher")
        print(f"ok: --dry-run lines for {', '.join(cases)}")

        # The same, run: what each launcher was given (the stubs record it).
        for name, (command, _) in cases.items():
            run([tool] + opts + ["--"] + command, env=env, check=0)
            with open(f"{record}.{name}") as stream:
                seen = stream.read().splitlines()
            os.remove(f"{record}.{name}")
            settings = {l for l in seen if l.startswith("SLIMREDUCE_")}
            if name in ("mpirun", "mpiexec", "prterun"):
                # Open MPI: the -x options carry it all; mpirun itself is not preloaded.
                expect(f"LD_PRELOAD={other}" in seen, f"{name} itself was preloaded: {seen}")
                expect(seen[1:4] == ["arg=-x", f"arg=LD_PRELOAD={lib}:{other}", "arg=-x"],
                       f"{name} was not given -x LD_PRELOAD first: {seen}")
            else:
                want_lib = torch_lib if name == "torchrun" else lib
                expect(f"LD_PRELOAD={want_lib}:{other}" in seen, f"{name}'s LD_PRELOAD: {seen}")
                want = set(ours.split()) | {"SLIMREDUCE_LOG_LEVEL=info"}
                expect(settings == want, f"{name}'s SLIMREDUCE_* environment: {sorted(settings)}")
                expect([l for l in seen if l.startswith("arg=")] == [f"arg={a}" for a in command[1:]],
                       f"{name}'s arguments changed: {seen}")
        print("ok: each stub launcher got the library and settings the way it needs them")

        # What is preloaded already stays, once; --library picks the library.
        env_dup = dict(env, LD_PRELOAD=f"{other} {lib}")
        _, out, _ = run([tool, "--dry-run", "--", "srun", "./job"], env=env_dup, check=0)
        expect(out.startswith(f"LD_PRELOAD={lib}:{other} "), f"LD_PRELOAD not merged: {out}")
        _, out, _ = run([tool, "--dry-run", "--", "mpirun", "-x", "LD_PRELOAD=/opt/a.so", "./job"],
                        env=env, check=0)
        expect(out.split()[:3] == ["mpirun", "-x", f"LD_PRELOAD={lib}:/opt/a.so"] and
               out.count("LD_PRELOAD") == 1, f"mpirun's own -x LD_PRELOAD not merged: {out}")
        _, out, _ = run([tool, "--library", "mpi", "--dry-run", "--", "torchrun", "t.py"], env=env, check=0)
        expect(out.startswith(f"LD_PRELOAD={lib}:"), f"--library mpi under torchrun: {out}")
        print("ok: LD_PRELOAD merged without duplicates; --library")

        # Errors: one line, exit code 2, and nothing started.
        errors = [
            (["--compressor", "fp17"], ["plainjob"], "--compressor fp17: unknown compressor; expected none, fp16, bf16, topk"),
            (["--compressor", "bf16:0.1"], ["plainjob"], "only topk takes a ratio"),
            (["--compressor", "topk:2"], ["plainjob"], "SLIMREDUCE_TOPK_RATIO='2' is not accepted"),
            (["--compressor", "powersgd:65"], ["plainjob"],
             "SLIMREDUCE_POWERSGD_RANK='65' is not accepted"),
            (["--env", "OMP_NUM_THREADS=1"], ["plainjob"], "only SLIMREDUCE_* settings"),
            (["--env", "SLIMREDUCE_MIN_BYTE=1"], ["plainjob"], "a known setting (a typo?)"),
            (["--env", "SLIMREDUCE_MIN_BYTES=-3"], ["plainjob"], "SLIMREDUCE_MIN_BYTES='-3' is not accepted"),
            (["--report", "/no/such/folder/run"], ["plainjob"], "the folder /no/such/folder does not exist"),
            (["--env", "SLIMREDUCE_REPORT=/no/such/folder/r"], ["plainjob"], "the folder /no/such/folder does not exist"),
            (["--timeline", "/no/such/folder/tl"], ["plainjob"], "SLIMREDUCE_TIMELINE='/no/such/folder/tl' is not accepted"),
            (["--library", "/no/such/libslimreduce.so"], ["plainjob"], "no such file"),
            ([], ["no-such-launcher", "-np", "2"], "no-such-launcher: the launcher is not on PATH"),
        ]
        for options, command, text in errors:
            rc, _, err = run([tool] + options + ["--"] + command, env=env)
            one_error_line(rc, err, "slimreduce-run", text, " ".join(options + command))
            expect(not glob.glob(record + ".*"), f"{options}: the launcher was started")
        rc, _, err = run([tool, "--compressor", "fp16", "plainjob"], env=env)
        one_error_line(rc, err, "slimreduce-run", "no job given", "no --")
        # --help names every compressor the library's registry has (its own error lists them).
        _, _, err = run([tool, "--compressor", "fp17", "--", "plainjob"], env=env)
        registry = err.partition("; expected ")[2].partition(", or topk:RATIO")[0].split(", ")
        expect("int8" in registry and "auto" in registry and "powersgd:RANK" in err,
               f"the error's list of compressors: {err}")
        _, usage, _ = run([tool, "--help"], env=env, check=0)
        usage = " ".join(usage.split())
        missing = [n for n in registry if not re.search(rf"\b{re.escape(n)}\b", usage)]
        expect(not missing, f"--help leaves out {missing}")
        rc, _, err = run([tool, "--candidates", "none,fp16", "--", "plainjob"], env=env)
        one_error_line(rc, err, "slimreduce-run", "SLIMREDUCE_AUTO_CANDIDATES='none,fp16' is not "
                       "accepted", "candidates without auto")
        rc, _, err = run([tool, "--compressor", "auto", "--candidates", "fp16,zip", "--", "plainjob"],
                         env=env)
        one_error_line(rc, err, "slimreduce-run", "SLIMREDUCE_AUTO_CANDIDATES='fp16,zip' is not "
                       "accepted", "an unknown candidate")
        rc, _, err = run([tool, "--", "plainjob"], env=dict(env, SLIMREDUCE_COMPRESSOR="fp17"))
        one_error_line(rc, err, "slimreduce-run", "(set in the environment)", "a bad inherited setting")
        # An install without the library (the tool and its package alone).
        bare = os.path.join(tmp, "bare")
        os.makedirs(os.path.join(bare, "bin"))
        shutil.copy(tool, os.path.join(bare, "bin"))
        shutil.copytree(os.path.join(args.prefix, "share"), os.path.join(bare, "share"))
        rc, _, err = run([os.path.join(bare, "bin", "slimreduce-run"), "--", "plainjob"], env=env)
        one_error_line(rc, err, "slimreduce-run", "libslimreduce.so is not installed next to this package",
                       "no library")
        expect(not glob.glob(record + ".*"), "a launcher was started despite an error")
        print(f"ok: {len(errors) + 5} errors, each one line before anything started; --help "
              "lists the registry")


# ---- job --------------------------------------------------------------------------------------


def launch(prefix, options, mpirun, ranks, program, env=None):
    argv = [os.path.join(prefix, "bin", "slimreduce-run")] + options + ["--"] + mpirun + \
        ["-np", str(ranks)] + program
    return run(argv, env=env or clean_env(), check=0)


def read_reports(prefix, ranks):
    reports = []
    for rank in range(ranks):
        path = f"{prefix}.{rank}.json"
        expect(os.path.isfile(path), f"no report {path}")
        with open(path) as stream:
            reports.append(json.load(stream))
    return reports


def stderr_table(stderr):
    """The report table out of a job's stderr."""
    lines = stderr.splitlines()
    start = [i for i, l in enumerate(lines) if l.startswith("SlimReduce report:")]
    expect(len(start) == 1, f"{len(start)} report tables on stderr:\n{stderr}")
    block = [lines[start[0]]]
    for line in lines[start[0] + 1:]:
        if not line.startswith("  "):
            break
        block.append(line)
    return "\n".join(block) + "\n"


def fresh(work):
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)


def fp16_reports(prefix, ranks):
    """The reports of a job run with --compressor fp16: each rank's, naming
    fp16, with calls compressed and fewer than 0.6 of fp32's bytes sent."""
    reports = read_reports(prefix, ranks)
    for rank, report in enumerate(reports):
        expect(report["rank"] == rank and report["world_size"] == ranks and
               report["compressor"] == "fp16", f"rank {rank}'s report: {report}")
        expect(report["calls"]["compressed"] > 0, f"rank {rank}: no call compressed: {report}")
        expect(report["bytes"]["wire_sent"] < 0.6 * report["bytes"]["wire_baseline"],
               f"rank {rank}: fp16 did not halve the bytes: {report}")
    return reports


def case_job(args):
    fresh(args.work)
    train = [os.path.join(args.prefix, "bin", "train_mlp"), "--steps", "20"]
    fp16 = os.path.join(args.work, "fp16")
    # Small partitions, so that the table has every line a blocking job can give.
    cut = ["--env", "SLIMREDUCE_PARTITION_BYTES=64K"]
    launch(args.prefix, ["--compressor", "fp16", "--report", fp16] + cut, args.mpirun, 2, train)
    print(f"ok: a 2-rank mpirun job through slimreduce-run compressed "
          f"{fp16_reports(fp16, 2)[0]['calls']['compressed']} calls per rank")

    topk = os.path.join(args.work, "topk")
    launch(args.prefix, ["--compressor", "topk:0.05", "--report", topk], args.mpirun, 2, train)
    report = read_reports(topk, 2)[0]
    expect(report["compressor"] == "topk" and report["calls"]["compressed"] > 0, f"topk: {report}")
    expect(report["bytes"]["wire_sent"] < 0.5 * report["bytes"]["wire_baseline"], f"topk:0.05: {report}")
    large = os.path.join(args.work, "large")
    launch(args.prefix, ["--compressor", "fp16", "--env", "SLIMREDUCE_MIN_BYTES=1G", "--report", large],
           args.mpirun, 2, train)
    report = read_reports(large, 2)[1]
    expect(report["calls"]["compressed"] == 0 and report["calls"]["passed_through"] > 0,
           f"--env SLIMREDUCE_MIN_BYTES=1G did not reach the ranks: {report}")
    print("ok: topk:0.05 and --env reached every rank")

    # The report tool's table is the one the job prints with --report stderr.
    _, _, err = launch(args.prefix, ["--compressor", "fp16", "--report", "stderr"] + cut, args.mpirun,
                       2, train)
    printed = stderr_table(err)
    expect("  partitions " in printed, f"no partitions line in the job's table:\n{printed}")
    _, table, _ = run([os.path.join(args.prefix, "bin", "slimreduce-report"), fp16], check=0)
    expect(table == printed, f"slimreduce-report's table:\n{table}differs from the job's:\n{printed}")
    print("ok: slimreduce-report prints the table the job printed:\n" + table, end="")

    # --compressor auto: every rank's report holds the same agreed choice table,
    # and slimreduce-report prints the job's own table with it.
    chosen = os.path.join(args.work, "auto")
    launch(args.prefix, ["--compressor", "auto", "--report", chosen], args.mpirun, 2, train)
    reports = read_reports(chosen, 2)
    classes = [r.get("auto", {}).get("classes") for r in reports]
    expect(classes[0] and classes[0] == classes[1], f"auto's choice tables: {classes}")
    expect(all(c["chosen"] in ("none", "fp16", "int8") for c in classes[0] if c["probe_rounds"]),
           f"auto chose outside its candidates: {classes[0]}")
    # The first round of a class at least: its pass (3) and two more probes of one it kept.
    expect(sum(r["auto"]["probe_calls"] for r in reports) >= 2 * 5, f"auto's probe calls: {reports}")
    _, _, err = launch(args.prefix, ["--compressor", "auto", "--report", "stderr"], args.mpirun, 2,
                       train)
    printed = stderr_table(err)
    expect("  auto       " in printed and "choices (agreed):" in printed,
           f"no auto lines in the job's table:\n{printed}")
    _, table, _ = run([os.path.join(args.prefix, "bin", "slimreduce-report"), chosen], check=0)
    probes = sum(r["auto"]["probe_calls"] for r in reports)
    switches = sum(r["auto"]["switches"] for r in reports)
    waits = sum(r["auto"]["waits"] for r in reports)
    lines = table.splitlines()
    at = lines.index(f"  auto       {probes} probe calls, {switches} switches, {waits} waits; "
                     "choices (agreed):")
    for offset, row in enumerate(classes[0], start=1):
        expect(f"calls of {row['min_bytes']} B and up: {row['chosen'] or '-'}" in lines[at + offset],
               f"slimreduce-report's row {offset}: {lines[at + offset]} for {row}")
    print("ok: --compressor auto agreed one choice table on both ranks:\n" + table, end="")
    # A candidate cut after one call of a round's first pass (over a slow link, plain fp32),
    # and one a prediction left out, are listed after the medians, as the library's own table
    # lists them (test_core's Report.AutoCarriesItsChoiceTable): the same reports with one of
    # each written in.
    cut = os.path.join(args.work, "auto-cut")
    for rank, report in enumerate(reports):
        report["auto"]["classes"][0]["cut_after_one_call_seconds"] = {"none": 0.004}
        report["auto"]["classes"][0]["left_out_predicted_seconds"] = {"int8": 0.009}
        with open(f"{cut}.{rank}.json", "w") as out:
            json.dump(report, out)
    _, table, _ = run([os.path.join(args.prefix, "bin", "slimreduce-report"), cut], check=0)
    row = table.splitlines()[at + 1]
    expect("none cut after one call at 4.000 ms, int8 left out, predicted at 9.000 ms; " in row,
           f"slimreduce-report's cut row: {row}")

    # --adaptive: every rank holds the same levels table; slimreduce-report prints the
    # job's own adaptive lines, with the share of calls sent hard.
    leveled = os.path.join(args.work, "adaptive")
    adaptive = ["--compressor", "topk:0.01,0.001", "--adaptive", "--env", "SLIMREDUCE_ADAPTIVE_WINDOW=3"]
    launch(args.prefix, adaptive + ["--report", leveled], args.mpirun, 2, train)
    reports = read_reports(leveled, 2)
    levels = [r.get("adaptive") for r in reports]
    expect(levels[0] and levels[0]["classes"] == levels[1]["classes"], f"adaptive's tables: {levels}")
    expect(levels[0]["calls_hard"] > 0 and levels[0]["calls_gentle"] >= 2 * 3,
           f"adaptive sent no call hard, or fewer than two windows gentle: {levels[0]}")
    _, _, err = launch(args.prefix, adaptive + ["--report", "stderr"], args.mpirun, 2, train)
    printed = [l for l in stderr_table(err).splitlines() if l.startswith("  adaptive ")]
    _, table, _ = run([os.path.join(args.prefix, "bin", "slimreduce-report"), leveled], check=0)
    mine = [l for l in table.splitlines() if l.startswith("  adaptive ")]
    expect(printed and mine == printed, f"slimreduce-report's adaptive line {mine} != the job's {printed}")
    expect("% hard)" in mine[0], f"no share of calls sent hard: {mine}")
    print("ok: --adaptive sent the same levels on both ranks:\n" + "\n".join(mine))


# ---- report -----------------------------------------------------------------------------------


def png_size(path):
    with open(path, "rb") as stream:
        head = stream.read(24)
    expect(head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR", f"{path} is not a PNG")
    return struct.unpack(">II", head[16:24])


def case_report(args):
    fresh(args.work)
    report_tool = os.path.join(args.prefix, "bin", "slimreduce-report")
    train = [os.path.join(args.prefix, "bin", "train_mlp"), "--steps", "10", "--sync", "iallreduce"]
    a, b = os.path.join(args.work, "none"), os.path.join(args.work, "bf16")
    launch(args.prefix, ["--compressor", "none", "--report", a], args.mpirun, 3, train)
    launch(args.prefix, ["--compressor", "bf16", "--report", b], args.mpirun, 3, train)
    ra, rb = read_reports(a, 3), read_reports(b, 3)

    _, out, _ = run([report_tool, b, "--ranks"], check=0)
    lines = out.splitlines()
    expect(lines[0] == "SlimReduce report: compressor bf16, 3 ranks (sums over ranks)", f"first line: {lines[0]}")
    compressed = sum(r["calls"]["compressed"] for r in rb)
    expect(re.search(rf"compressed +{compressed} ", lines[1]), f"calls line: {lines[1]} (expected {compressed})")
    baseline = sum(r["bytes"]["wire_baseline"] for r in rb)
    sent = sum(r["bytes"]["wire_sent"] for r in rb)
    expect(lines[3] == "  savings    %.1f%%" % (100 * (1 - sent / baseline)), f"savings line: {lines[3]}")
    fusion = [l for l in lines if l.startswith("  fusion")]
    expect(len(fusion) == 1 and "MPI_Iallreduce calls" in fusion[0], f"no fusion line for iallreduce: {out}")
    ranks = [l for l in lines if re.match(r"^ +\d+ +[0-9.]+ +[0-9.]+ +[0-9.]+%$", l)]
    expect(len(ranks) == 3, f"--ranks gave {len(ranks)} rank lines:\n{out}")
    _, same, _ = run([report_tool, b + ".2.json"], check=0)
    expect(same == run([report_tool, b], check=0)[1], "a rank's file does not name its run")
    print("ok: one run's table and --ranks")

    _, out, _ = run([report_tool, a, b], check=0)
    rows = {l.split("  ")[1].strip(): l for l in out.splitlines()[2:]}
    expect("none" in rows["compressor"] and "bf16" in rows["compressor"], f"comparison:\n{out}")
    saved = 100 * (1 - sent / baseline)
    expect(rows["savings"].split()[-2:] == ["%+.1f" % saved, "points"] and "0.0%" in rows["savings"],
           f"savings row: {rows['savings']}")
    ratio = sent / sum(r["bytes"]["wire_sent"] for r in ra)
    expect(rows["wire sent MiB"].endswith("%.3fx" % ratio), f"wire sent row: {rows['wire sent MiB']}")
    print("ok: two runs side by side:\n" + out, end="")

    # Plots (matplotlib: Debian's, for the system python3).
    one, two = os.path.join(args.work, "one.png"), os.path.join(args.work, "two.png")
    run([SYSTEM_PYTHON, report_tool, b, "--plot", one], check=0)
    expect(png_size(one) == (600, 700), f"{one}: {png_size(one)}, expected 600x700")
    run([SYSTEM_PYTHON, report_tool, a, b, "--plot", two], check=0)
    expect(png_size(two) == (1200, 700), f"{two}: {png_size(two)}, expected 1200x700")
    expect(os.path.getsize(two) > 20000, f"{two} is nearly empty ({os.path.getsize(two)} bytes)")
    print("ok: --plot drew one run (600x700) and two runs side by side (1200x700)")

    # Bad and missing files: one line, exit code 2.
    bad = os.path.join(args.work, "bad")
    os.makedirs(bad)

    def write(name, text):
        with open(os.path.join(bad, name), "w") as stream:
            stream.write(text)

    write("garbled.0.json", '{"rank": 0, "world_size": 1,')
    write("array.0.json", "[1, 2]")
    write("nokey.0.json", json.dumps({k: v for k, v in ra[0].items() if k != "bytes"}))
    for rank in (0, 2):
        write(f"gap.{rank}.json", json.dumps(ra[rank]))
    write("liar.0.json", json.dumps(ra[1]))
    nomatplotlib = os.path.join(args.work, "nomatplotlib", "matplotlib")
    os.makedirs(nomatplotlib)
    with open(os.path.join(nomatplotlib, "__init__.py"), "w") as stream:
        stream.write("raise ImportError('No module named matplotlib')\n")
    cases = [
        ([os.path.join(args.work, "nothing")], "no reports", None),
        (["/no/such/folder/run"], "no such folder", None),
        ([os.path.join(bad, "garbled")], "not valid JSON", None),
        ([os.path.join(bad, "array")], "not a JSON object", None),
        ([os.path.join(bad, "nokey")], 'no valid "bytes"', None),
        ([os.path.join(bad, "gap")], "missing rank 1", None),
        ([os.path.join(bad, "liar")], "the file says rank 1", None),
        ([a, os.path.join(args.work, "nothing")], "no reports", None),
        ([a, b, a], "one run, or two to compare", None),
        ([a, "--plot", "/no/such/folder/x.png"], "cannot write it", SYSTEM_PYTHON),
        ([a, "--plot", os.path.join(args.work, "x.png")], "--plot needs matplotlib", "nomatplotlib"),
    ]
    for argv, text, how in cases:
        env = None
        command = [report_tool] + argv
        if how == SYSTEM_PYTHON:
            command = [SYSTEM_PYTHON] + command
        elif how == "nomatplotlib":
            env = dict(os.environ, PYTHONPATH=os.path.dirname(nomatplotlib))
            command = [SYSTEM_PYTHON] + command
        rc, _, err = run(command, env=env)
        one_error_line(rc, err, "slimreduce-report", text, " ".join(argv))
    print(f"ok: {len(cases)} bad inputs, each one line and exit code 2")


# ---- module -----------------------------------------------------------------------------------


def case_module(args):
    fresh(args.work)
    package = os.path.join(args.prefix, "share", "slimreduce", "python")
    job = os.path.join(HERE, "module_job.py")
    version = version_of(args.source)
    _, out, _ = launch(args.prefix, ["--compressor", "fp16"],
                       args.mpirun + ["-x", f"PYTHONPATH={package}"], 2,
                       [SYSTEM_PYTHON, job, version, package])
    expect("module_job: ok on 2 ranks" in out, f"module job output:\n{out}")
    library = os.path.join(args.prefix, "lib", "libslimreduce.so")
    run([SYSTEM_PYTHON, job, "--not-loaded", library], env=clean_env(PYTHONPATH=package), check=0)
    # SETTING_NAMES is every setting slimreduce-settings knows, in its order.
    _, table, _ = run([os.path.join(args.prefix, "bin", "slimreduce-settings")], check=0)
    names = re.findall(r"^\| `(SLIMREDUCE_[A-Z_]+)`", table, re.M)
    sys.path.insert(0, package)
    import slimreduce

    expect(tuple(names) == slimreduce.SETTING_NAMES,
           f"SETTING_NAMES {slimreduce.SETTING_NAMES} != slimreduce-settings' {names}")
    print(f"ok: the module in a preloaded job, without the library, and its {len(names)} setting names")


# ---- consumer ---------------------------------------------------------------------------------


def case_consumer(args):
    fresh(args.work)
    example = os.path.join(args.source, "examples", "cmake_consumer")
    build = os.path.join(args.work, "cmake")
    run([args.cmake, "-S", example, "-B", build, f"-DCMAKE_PREFIX_PATH={args.prefix}"], check=0)
    run([args.cmake, "--build", build], check=0)
    _, out, _ = run(args.mpirun + ["-np", "2", os.path.join(build, "slimreduce_consumer")], env=clean_env(), check=0)
    version = version_of(args.source)
    expect(f"SlimReduce {version}, compressor fp16: 1 compressed, 1 passed through" in out, f"consumer: {out}")
    print("ok: find_package(SlimReduce) built the example; it ran on 2 ranks: " + out.strip())

    env = clean_env(PKG_CONFIG_PATH=os.path.join(args.prefix, "lib", "pkgconfig"))
    _, modversion, _ = run(["pkg-config", "--modversion", "slimreduce"], env=env, check=0)
    expect(modversion.strip() == version, f"pkg-config --modversion: {modversion}")
    _, flags, _ = run(["pkg-config", "--cflags", "--libs", "slimreduce"], env=env, check=0)
    _, libdir, _ = run(["pkg-config", "--variable=libdir", "slimreduce"], env=env, check=0)
    expect(os.path.samefile(libdir.strip(), os.path.join(args.prefix, "lib")), f"libdir: {libdir}")
    program = os.path.join(args.work, "pkgconfig_consumer")
    run(["mpicc", "-o", program, os.path.join(example, "consumer.c")] + flags.split() +
        [f"-Wl,-rpath,{libdir.strip()}"], env=env, check=0)
    _, out, _ = run(args.mpirun + ["-np", "2", program], env=clean_env(), check=0)
    expect("1 compressed, 1 passed through" in out, f"pkg-config consumer: {out}")
    print(f"ok: pkg-config --cflags --libs slimreduce ({flags.strip()}) built it too; it ran")


# ---- pip --------------------------------------------------------------------------------------


# pip's words for "no network" or "no such package on the index".
OFFLINE = (r"Failed to establish a new connection|Temporary failure in name resolution|"
           r"No matching distribution found|Could not find a version that satisfies|"
           r"Network is unreachable|ProxyError")


def case_pip(args):
    """pip install into a fresh venv, then one 2-rank job through the venv's
    slimreduce-run. --abi mpich: the build for the MPICH family (its library
    alone in the venv), the job args.mpich_build's train_mlp under
    --mpiexec; --abi both: the Open MPI build with the MPICH library beside it
    (SLIMREDUCE_ALSO_MPI_ABI=mpich), each family's job."""
    abis = ["openmpi", "mpich"] if args.abi == "both" else [args.abi]
    if "mpich" in abis:
        train = os.path.join(args.mpich_build or "", "examples", "train_mlp")
        mpiexec = [args.mpiexec or "mpiexec.mpich"]
        if not (os.access(train, os.X_OK) and shutil.which(mpiexec[0])):
            print(f"SKIPPED: no MPICH build or launcher: {train} or {mpiexec[0]} is missing "
                  "(scripts/test.sh builds build-mpich where MPICH is installed)")
            sys.exit(77)
    fresh(args.work)
    venv = os.path.join(args.work, "venv")
    # --system-site-packages: the Open MPI job below uses Debian's mpi4py and numpy.
    run([SYSTEM_PYTHON, "-m", "venv", "--system-site-packages", venv], check=0)
    python = os.path.join(venv, "bin", "python")
    # CI shortcut: the CPU path only (the GPU path would add minutes of nvcc);
    # tests and benchmarks are off in every pip build (pyproject.toml).
    env = clean_env(CMAKE_BUILD_PARALLEL_LEVEL="2", PIP_DISABLE_PIP_VERSION_CHECK="1")
    # The CMake tree in the work folder, not in a temporary one of a new name
    # each time: the compiler cache (scripts/compiler_cache.sh) hashes paths
    # outside the clone as they are, so a new name missed every object (180 of
    # 184 compiles, 110 s of the suite); under the clone they are relative.
    build_dir = os.path.join(args.work, "build")
    settings = ["--config-settings=cmake.define.SLIMREDUCE_CUDA=OFF",
                f"--config-settings=build-dir={build_dir}"]
    if args.abi == "mpich":
        settings.append("--config-settings=cmake.define.SLIMREDUCE_MPI_ABI=mpich")
    elif args.abi == "both":
        settings.append("--config-settings=cmake.define.SLIMREDUCE_ALSO_MPI_ABI=mpich")
    rc, out, err = run([python, "-m", "pip", "install", "--quiet", args.source] + settings, env=env,
                       timeout=900)
    if rc != 0 and re.search(OFFLINE, out + err):
        # Without PyPI there is no scikit-build-core to build with: a skip (77),
        # which the test command's last lines report, not a pass.
        print(f"SKIPPED: PyPI is not reachable for pip's build requirements:\n{err[-1500:]}")
        sys.exit(77)
    expect(rc == 0, f"pip install exited {rc}\nstdout:\n{out}\nstderr:\n{err}")
    for tool in ("slimreduce-run", "slimreduce-report"):
        expect(os.access(os.path.join(venv, "bin", tool), os.X_OK), f"pip did not install {tool}")
    libraries = {}
    for abi in abis:
        mpich = abi == "mpich"
        library = "libslimreduce-mpich.so" if mpich else "libslimreduce.so"
        _, where, _ = run([python, "-c", f"import slimreduce; print(slimreduce.library_path(mpich={mpich}))"],
                          env=clean_env(), check=0)
        where = where.strip()
        expect(where.startswith(os.path.realpath(venv)) and where.endswith(f"/slimreduce/lib/{library}"),
               f"library_path(mpich={mpich}) in the venv: {where}")
        run([os.path.join(HERE, os.pardir, "check_exports.sh"), where], check=0)
        libraries[abi] = where
    _, info, _ = run([python, "-m", "slimreduce", "--json"], env=clean_env(), cwd=args.work, check=0)
    info = json.loads(info)  # the libraries the build was for, and no other
    expect(info["mpi_abis"] == abis and info["libraries"] == libraries,
           f"python -m slimreduce in the venv: {info}")
    print(f"ok: pip installed {', '.join(libraries.values())} and the tools into a fresh venv")
    if "mpich" in abis:
        pip_job_mpich(venv, os.path.join(args.work, "run-mpich"), train, mpiexec)
    if "openmpi" in abis:
        pip_job_openmpi(args, venv, python, libraries["openmpi"])


def pip_job_openmpi(args, venv, python, where):
    """One preloaded job through the venv's slimreduce-run under Open MPI's
    mpirun (args.mpirun), the module checked inside it."""
    prefix = os.path.join(args.work, "run")
    package = os.path.dirname(os.path.dirname(os.path.dirname(where)))
    argv = [os.path.join(venv, "bin", "slimreduce-run"), "--compressor", "fp16", "--report", prefix,
            "--"] + args.mpirun + ["-np", "2", python, os.path.join(HERE, "module_job.py"),
                                   version_of(args.source), package]
    _, out, _ = run(argv, env=clean_env(), check=0)
    expect("module_job: ok on 2 ranks" in out, f"the job's output:\n{out}")
    for report in read_reports(prefix, 2):
        # The report names the compressor in effect at the end: the job switched to bf16.
        expect(report["compressor"] == "bf16" and report["calls"]["compressed"] == 3,
               f"a rank's report: {report}")
    _, table, _ = run([os.path.join(venv, "bin", "slimreduce-report"), prefix], check=0)
    expect(re.search(r"compressed +6 ", table), f"the venv's slimreduce-report:\n{table}")
    print("ok: a 2-rank job through the venv's slimreduce-run:\n" + table, end="")


def pip_job_mpich(venv, prefix, train, mpiexec):
    """A 2-rank train_mlp (built against MPICH) under mpiexec.mpich through the
    venv's slimreduce-run: it must preload the venv's libslimreduce-mpich.so
    (the launcher's --version names MPICH), and fp16 halve the bytes."""
    argv = [os.path.join(venv, "bin", "slimreduce-run"), "--compressor", "fp16", "--report", prefix,
            "--"] + mpiexec + ["-n", "2", train, "--steps", "20"]
    run(argv, env=clean_env(), check=0)
    reports = fp16_reports(prefix, 2)
    _, table, _ = run([os.path.join(venv, "bin", "slimreduce-report"), prefix], check=0)
    print(f"ok: a 2-rank job under {os.path.basename(mpiexec[0])} through the venv's slimreduce-run, "
          f"{reports[0]['calls']['compressed']} calls compressed per rank:\n" + table, end="")


def main():
    argv = sys.argv[1:]
    mpirun = []
    if "--" in argv:
        at = argv.index("--")
        argv, mpirun = argv[:at], argv[at + 1:]
    parser = argparse.ArgumentParser()
    parser.add_argument("case", choices=["install", "launcher", "job", "report", "module", "consumer", "pip"])
    parser.add_argument("--prefix")
    parser.add_argument("--build")
    parser.add_argument("--work")
    parser.add_argument("--source", default=os.path.dirname(os.path.dirname(HERE)))
    parser.add_argument("--cmake", default="cmake")
    parser.add_argument("--nccl", action="store_true")
    parser.add_argument("--mpich-build")
    parser.add_argument("--abi", choices=["openmpi", "mpich", "both"], default="openmpi")
    parser.add_argument("--mpiexec", help="the MPICH family's launcher (pip --abi mpich or both)")
    args = parser.parse_args(argv)
    args.mpirun = mpirun
    try:
        globals()["case_" + args.case](args)
    except Failure as failure:
        print(f"FAILED: {failure}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
