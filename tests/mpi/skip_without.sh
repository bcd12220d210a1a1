#!/bin/sh
# skip_without.sh FILE COMMAND...: runs COMMAND, or skips (exit 77) where FILE
# is missing: a test whose set-up fixture skipped itself (no registry to make
# FILE from) then skips too, rather than failing on a file that was never made.
# scripts/not_run.sh reports both, and in CI refuses the skip unless the
# registry's refusal is confirmed.
file=$1
shift
if [ ! -e "$file" ]; then
  echo "SKIPPED: $file was not made (its set-up test skipped)"
  exit 77
fi
exec "$@"
