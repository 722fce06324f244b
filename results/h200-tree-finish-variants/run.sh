#!/usr/bin/env bash
# The launcher after the finish-variant timing (results/cpu-tree-finish-variants/run.sh, whose output is here as
# tree/ and tree.txt): the tree split path's finish kernel at most 128 slices of a row a request and the race after
# two rejected siblings from candidates at every batch. From the repository root on one GPU machine, with OUT set;
# steps, in this order:
#   time:     `specbench kernels --tree 2x2,chain:6`, Llama 3 rows, B = 1, 2, 4, 8 (the split path), the path accepted
#             and both children of node 0 rejected, one-hot drafts, draft logits and draft probabilities
#   check:    the tree workload of tests/sanitize_kernels.py (two shards, no tool: its kernels compiled) beside the
#             GPU tree tests
#   sanitize: that workload under memcheck, initcheck and racecheck, two shards each, at once
# (TIME_LIMIT, CHECK_LIMIT, LIMIT: seconds for each step's processes.)
set -uo pipefail
out=${OUT:?set OUT to the folder for the results}
source results/gpu-lib.sh
write_machine "$out/machine.txt"
for step in "$@"; do
  case $step in
    time)
      timeout ${TIME_LIMIT:-200} python3 -m specbench --format plain kernels --no-charts --timer graph --max-ms 40 \
        --model llama3 --tree 2x2,chain:6 -b 1,2,4,8 -l 2,full --mode probabilistic --draft none,logits,probs \
        --impl triton -o "$out/ratios" > "$out/ratios.txt" 2>&1
      echo "time exit $? at ${SECONDS}s"; grep -h "FAIL\|skipped\|rror" "$out"/ratios.txt | cut -c1-200 | head -20 ;;
    check) check_trees "$out" ${CHECK_LIMIT:-300}; echo "check at ${SECONDS}s" ;;
    sanitize) sanitize_shards trees "1/2 2/2" ${LIMIT:-300} "$out/sanitize" ;;
    *) echo "usage: run.sh time|check|sanitize ..." >&2; exit 2 ;;
  esac
done
