#!/bin/sh
# check_generated_doc.sh DOC COMMAND...: the block between the BEGIN GENERATED
# and END GENERATED markers of DOC must equal what COMMAND prints.
set -eu
doc=$1
shift
expected=$(mktemp)
trap 'rm -f "$expected"' EXIT
sed -n '/BEGIN GENERATED/,/END GENERATED/{/GENERATED/d;p}' "$doc" > "$expected"
"$@" | diff -u "$expected" - && echo "OK: $doc is up to date"
