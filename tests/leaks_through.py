#!/usr/bin/env python3
"""leaks_through.py LOG LIBRARY SOURCE_DIR: prints each LeakSanitizer report in LOG whose stack
passes through SlimReduce, and exits 1 if there is one (tests/check_sanitized.sh).

A frame is SlimReduce's when it is symbolized into our code (a slimreduce:: name, or a file
under SOURCE_DIR), or when it is an unsymbolized address of LIBRARY (LIBRARY+0xOFFSET) whose
offset lies in one of the library's executable segments. An offset outside them is no code of
ours: LeakSanitizer can name our library for an address of an Open MPI component that was
unloaded before the report (seen once: a strdup of Open MPI's at offset 0x164a2e3 of a
libslimreduce.so whose segments end below 0x800000), and that must not fail the check.
"""
import re
import subprocess
import sys


def code_ranges(library):
    """The [start, end) offsets of the library's executable PT_LOAD segments."""
    out = subprocess.run(["readelf", "-lW", library], capture_output=True, text=True,
                         check=True).stdout
    ranges = []
    for line in out.splitlines():
        fields = line.split()
        if fields[:1] == ["LOAD"] and "E" in fields[6:-1]:
            start, size = int(fields[2], 16), int(fields[5], 16)
            ranges.append((start, start + size))
    return ranges


def ours(frame, library_name, ranges, source_dir):
    unsymbolized = re.search(r"\(([^()+]+)\+0x([0-9a-f]+)\)\s*$", frame)
    if unsymbolized:
        path, offset = unsymbolized.group(1), int(unsymbolized.group(2), 16)
        return path.endswith("/" + library_name) and any(a <= offset < b for a, b in ranges)
    return " in " in frame and ("slimreduce::" in frame or source_dir in frame)


def main():
    log, library, source_dir = sys.argv[1:4]
    library_name = library.rsplit("/", 1)[-1]
    ranges = code_ranges(library)
    reports, report = [], None
    for line in open(log, errors="replace"):
        if "leak of" in line:
            report = [line]
        elif report is not None:
            if not line.strip():
                reports.append(report)
                report = None
            else:
                report.append(line)
    if report:
        reports.append(report)
    through = [r for r in reports
               if any(ours(frame, library_name, ranges, source_dir) for frame in r[1:])]
    for report in through[:8]:
        sys.stdout.write("".join(report) + "\n")
    return 1 if through else 0


if __name__ == "__main__":
    sys.exit(main())
