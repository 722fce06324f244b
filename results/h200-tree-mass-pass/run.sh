#!/usr/bin/env bash
# The tree kernels' passes over a row taking p and q as products (exp times 1 / s) and the race candidates' ratios by a
# one-instruction reciprocal, against the tree kernels before (d28e7c0, results/h200-tree-mass-pass/before.py), on
# one GPU machine, from the repository root with OUT set and .old/tree_before_mass_pass.py carried
# (git show d28e7c0:specbench/kernels/tree.py > .old/tree_before_mass_pass.py), in this order:
#   bash results/h200-tree-mass-pass/run.sh time work   # then, on the warm machine:
#   bash results/h200-tree-mass-pass/run.sh sanitize
# time: issue 24's case (`specbench kernels --tree 2x2,chain:6`, Llama 3 rows, B = 1, 8, 64 and 256, the path
#   accepted and both children of node 0 rejected, draft logits), `triton` and `triton-before` in one process.
# work: the tree workload of tests/sanitize_kernels.py with no tool, two shards at once (its kernels compiled).
# sanitize: that workload under memcheck, initcheck and racecheck, two shards each, all at once.
# (TIME_LIMIT, WORK_LIMIT, LIMIT: seconds for each step's processes; IMPLS, DRAFTS replace what `time` runs.)
set -uo pipefail
out=${OUT:?set OUT to the folder for the results}
source results/gpu-lib.sh
S="python3 -m specbench --format plain"
write_machine "$out/machine.txt"
for step in "$@"; do
  case $step in
    time)
      timeout ${TIME_LIMIT:-240} $S kernels --no-charts --timer graph --max-ms 40 --model llama3 --tree 2x2,chain:6 \
        -b 1,8,64,256 -l 2,full --mode probabilistic --draft ${DRAFTS:-logits} \
        --impl ${IMPLS:-triton,results/h200-tree-mass-pass/before.py:triton_before} -o "$out/probabilistic" \
        > "$out/probabilistic.txt" 2>&1; echo "probabilistic exit $? at ${SECONDS}s"
      grep -h "FAIL\|skipped\|rror" "$out"/probabilistic.txt | cut -c1-200 | head -20 ;;
    work)
      for shard in 1 2; do
        timeout ${WORK_LIMIT:-150} python3 tests/sanitize_kernels.py --part trees --workload --shard $shard/2 \
          > "$out/work-$shard.txt" 2>&1 &
      done
      wait; echo "work at ${SECONDS}s"; tail -n 1 "$out"/work-*.txt ;;
    sanitize) sanitize_shards trees "1/2 2/2" ${LIMIT:-300} "$out/sanitize" ;;
    *) echo "usage: run.sh time|work|sanitize ..." >&2; exit 2 ;;
  esac
done
