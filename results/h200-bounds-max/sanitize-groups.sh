#!/usr/bin/env bash
# Some groups of the sanitizer workload's --part radix (tests/sanitize_kernels.py: 12 groups of calls, each a draft
# form, target form and dtype, then the simulation; --shard I/13 runs group I alone) under memcheck, initcheck and
# racecheck, every process at once, after one run of each without the tools (to fill Triton's cache); on the GPU
# machine from the repository root with OUT set:
#   SHARDS_OF_13="2 10 12 1 5 9" bash results/h200-bounds-max/sanitize-groups.sh
# With BY_SHAPE=1 each shape of a group is a group of its own (--by-shape: 31, the float32 groups' four shapes
# 1-4, 6-9, 11-14, 16-19, 21-24 and 26-29) and SHARDS_OF_13 names those, e.g. BY_SHAPE=1 SHARDS_OF_13="1 2 3 4".
# (the groups the last run of results/h200-histogram-variants/run.sh sanitize left unfinished: in 9 shards every
# float32 group, and the bfloat16 groups sharing a shard with one, did not finish in 390 s)
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PATH=$PATH:/usr/local/cuda/bin
out=${OUT:?set OUT to the folder for the results}
mkdir -p "$out/s"
by=${BY_SHAPE:+--by-shape}
of=$([ -n "$by" ] && echo 31 || echo 13)
for group in ${SHARDS_OF_13:?name the groups, 1 to 13}; do
  timeout ${WARM_LIMIT:-100} python3 tests/sanitize_kernels.py --workload --part radix --shard $group/$of $by \
    > "$out/s/warm-$group.txt" 2>&1 &
done
wait; echo "workloads without the tools: $(grep -l 'workload done' "$out"/s/warm-*.txt | wc -l) done"
for tool in memcheck initcheck racecheck; do
  for group in $SHARDS_OF_13; do
    timeout ${LIMIT:-400} python3 tests/sanitize_kernels.py --part radix --tools $tool --shard $group/$of $by \
      --out "$out/s/radix-$tool-$group" > "$out/s/radix-$tool-$group.txt" 2>&1 &
  done
done
wait
for f in "$out"/s/radix-*.txt; do echo "$(basename $f .txt): $(tail -n 1 $f)"; done | tee "$out/sanitize-summary.txt"
tar czf "$out/sanitize.tgz" -C "$out" s && rm -rf "$out/s"
