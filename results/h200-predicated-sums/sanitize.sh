#!/usr/bin/env bash
# For the GPU machine, from the repository root with OUT set (issue 20): the split histogram path's lists workload
# (tests/sanitize_kernels.py --part lists, the launcher's own kernels: predicated sums since this change) compiled
# once by the workload alone, then run under memcheck, initcheck and racecheck, six float32 shards each, all at once.
# WORK_LIMIT and TOOL_LIMIT: seconds for the workload and for each sanitizer process.
set -uo pipefail
out=${OUT:?set OUT to the folder for the results}
source results/gpu-lib.sh
shards="1 3 5 7 9 11"  # (of 12: the float32 groups, the only ones the lists workload runs)
mkdir -p "$out/w"
for i in $shards; do
  timeout ${WORK_LIMIT:-150} python3 tests/sanitize_kernels.py --workload --part lists --shard $i/12 > "$out/w/l-$i.txt" 2>&1 &
done
wait
tail -n 1 "$out"/w/l-*.txt > "$out/lists-workload.txt"; rm -rf "$out/w"
sanitize_shards lists "1/12 3/12 5/12 7/12 9/12 11/12" ${TOOL_LIMIT:-300} "$out/s"
