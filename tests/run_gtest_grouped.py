#!/usr/bin/env python3
"""Runs the GoogleTest cases that ctest would select, one process per test
binary instead of one per case, and the rest (scripts) through ctest.

  run_gtest_grouped.py BUILD_DIR LOG -j N [ctest selection options...]

ctest runs each discovered case in a process of its own; under a sanitizer a
process's start and exit (shadow memory, the leak check) cost more than most
cases, so the sanitizer tree's unit tests run grouped: the same cases, the
same working folders, each binary once with a --gtest_filter naming exactly
the cases ctest selected. Every group must run as many cases as it names (a
filter that selects nothing fails here, as it would not in gtest). Each
process's output is appended to LOG. Prints "N tests passed" (cases and
scripts) and exits 1 on any failure.
"""
import concurrent.futures
import json
import subprocess
import sys

FILTER = "--gtest_filter="
ALSO_DISABLED = "--gtest_also_run_disabled_tests"  # gtest_discover_tests names each case
MAX_FILTER = 100_000  # one argument stays below Linux's 128 KiB per string


def selected(build, selection):
    out = subprocess.run(["ctest", "--show-only=json-v1", *selection], cwd=build, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)["tests"]


def property_of(test, name):
    for prop in test.get("properties", []):
        if prop["name"] == name:
            return prop["value"]
    return None


def grouped(tests):
    """{(binary, folder): [case, ...]} for gtest cases, and the other tests' names."""
    groups, others = {}, []
    for test in tests:
        command = test.get("command", [])
        filters = [arg[len(FILTER):] for arg in command if arg.startswith(FILTER)]
        # A case's own TIMEOUT does not hold in a group: the suite's test,
        # which runs this script, has its own.
        plain = set(p["name"] for p in test.get("properties", [])) <= {
            "WORKING_DIRECTORY", "SKIP_REGULAR_EXPRESSION", "LABELS", "TIMEOUT"}
        rest = [arg for arg in command[1:] if not arg.startswith(FILTER)]
        # A name with a filter's special characters would select other cases.
        literal = len(filters) == 1 and not any(c in filters[0] for c in "-*?:")
        if literal and plain and rest in ([], [ALSO_DISABLED]):
            key = (command[0], property_of(test, "WORKING_DIRECTORY"))
            groups.setdefault(key, []).append(filters[0])
        else:
            others.append(test["name"])
    return groups, others


def chunks(cases):
    chunk, size = [], 0
    for case in cases:
        if chunk and size + len(case) + 1 > MAX_FILTER:
            yield chunk
            chunk, size = [], 0
        chunk.append(case)
        size += len(case) + 1
    if chunk:
        yield chunk


def run_group(binary, folder, cases):
    """(output, failure or None) of one binary run over CASES."""
    result = subprocess.run([binary, FILTER + ":".join(cases), ALSO_DISABLED], cwd=folder, capture_output=True,
                            text=True, errors="replace")
    output = f"==== {binary} ({len(cases)} cases)\n{result.stdout}{result.stderr}"
    ran = [line for line in result.stdout.splitlines() if line.startswith("[==========] ")
           and " ran." in line]
    count = int(ran[-1].split()[1]) if ran else -1
    if result.returncode != 0:
        return output, f"{binary}: exit {result.returncode}"
    if count != len(cases):
        return output, f"{binary}: ran {count} of the {len(cases)} cases named"
    return output, None


def main():
    build, log, jobs = sys.argv[1], sys.argv[2], int(sys.argv[4])
    assert sys.argv[3] == "-j", __doc__
    selection = sys.argv[5:]
    groups, others = grouped(selected(build, selection))
    work = [(binary, folder or build, chunk) for (binary, folder), cases in sorted(groups.items())
            for chunk in chunks(cases)]
    failures, passed = [], 0
    with open(log, "w") as out, concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        for (binary, _, chunk), (output, failure) in zip(
                work, pool.map(lambda w: run_group(*w), work)):
            out.write(output)
            if failure:
                failures.append(failure)
            else:
                passed += len(chunk)
        if others:
            names = "|".join(others)
            result = subprocess.run(["ctest", "-j", str(jobs), "--output-on-failure", "-R",
                                     f"^({names})$"], cwd=build, capture_output=True, text=True)
            out.write(result.stdout + result.stderr)
            if result.returncode != 0:
                failures.append(f"ctest over {len(others)} scripts: exit {result.returncode}")
            else:
                passed += len(others)
    for failure in failures:
        print(f"FAIL: {failure}")
    print(f"{passed} tests passed ({len(work)} grouped runs, {len(others)} through ctest)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
