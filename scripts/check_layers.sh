#!/usr/bin/env bash
# The layers' dependencies point one way (docs/architecture.md):
#   interpose -> core -> scheduler -> fusion, algorithms -> compressors -> kernels
#   core -> backends -> kernels; algorithms see only backends/transport.h and status.h.
#   Inside core: mpi/, nccl/ -> runtime/ -> gpu/ (device_memory.h); mpi/, nccl/ -> gpu/.
# A project include that points the wrong way fails the build (this runs as a
# build step) with the file, the line and the rule it breaks.
set -euo pipefail
root="${1:-$(dirname "${BASH_SOURCE[0]}")/..}"
cd "$root"

# folder: the folders (or files) its sources may include from, itself included.
declare -A allowed=(
  [kernels]="kernels/"
  [compressors]="compressors/ kernels/"
  [backends]="backends/ kernels/"
  [algorithms]="algorithms/ compressors/ kernels/ backends/transport.h backends/status.h"
  [fusion]="fusion/ kernels/"
  [scheduler]="scheduler/ fusion/ algorithms/ compressors/ kernels/ backends/transport.h backends/status.h"
  # The engine core's rooms (core/CMakeLists.txt): the two sides share the
  # runtime and gpu/ and never include each other; the runtime includes
  # neither side, nor of the backends more than the Transport interface; gpu/
  # only the device-memory interface.
  [core/gpu]="core/gpu/ kernels/"
  [core/runtime]="core/runtime/ core/gpu/device_memory.h scheduler/ fusion/ algorithms/ compressors/ kernels/ backends/transport.h backends/status.h"
  [core/mpi]="core/mpi/ core/runtime/ core/gpu/ scheduler/ fusion/ algorithms/ compressors/ kernels/ backends/"
  [core/nccl]="core/nccl/ core/runtime/ core/gpu/ scheduler/ fusion/ algorithms/ compressors/ kernels/ backends/"
)

bad=0
for folder in "${!allowed[@]}"; do
  while IFS=: read -r file line include; do
    target=$(sed -E 's/.*#include "([^"]+)".*/\1/' <<<"$include")
    case "$target" in */*) ;; *) continue ;; esac  # a header beside the file
    ok=0
    for prefix in ${allowed[$folder]}; do
      if [[ "$target" == "$prefix"* ]]; then ok=1; break; fi
    done
    if [ $ok -eq 0 ]; then
      echo "$file:$line: $folder/ may not include \"$target\" (allowed: ${allowed[$folder]})"
      bad=1
    fi
  done < <(grep -rn --include='*.h' --include='*.cc' --include='*.cu' --include='*.cuh' \
             '^#include "' "$folder" || true)
done
# No file of core/ lies outside a room.
for file in core/*.h core/*.cc; do
  [ -e "$file" ] || continue
  echo "$file: core/ holds rooms only (runtime/, gpu/, mpi/, nccl/)"
  bad=1
done
# The GPU helpers both device paths share compile without NCCL: no NCCL header,
# nor a header of NCCL's backend (which carries one).
while IFS=: read -r file line include; do
  echo "$file:$line: core/gpu/ may not include NCCL ($include)"
  bad=1
done < <(grep -rn -E '^#include [<"](nccl\.h|nccl_net\.h|backends/nccl)' core/gpu || true)
exit $bad
