#!/usr/bin/env bash
# The tree split path's finish kernel drawing tickets per request, and none for a request whose walk ended in the rows
# kernel, against the kernels before (8edaa11, results/h200-tree-tickets/before.py), on one GPU machine, from the
# repository root with OUT set and .old/tree_before_tickets.py carried
# (git show 8edaa11:specbench/kernels/tree.py > .old/tree_before_tickets.py). Steps, in this order:
#   time:     `specbench kernels --tree 2x2,chain:6`, Llama 3 rows, B = 1, 4, 8 (the split path), the path accepted
#             and both children of node 0 rejected, one-hot drafts, draft logits and draft probabilities, `triton`
#             beside `triton-before` in one process
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
        --model llama3 --tree 2x2,chain:6 -b 1,4,8 -l 2,full --mode probabilistic --draft none,logits,probs \
        --impl triton,results/h200-tree-tickets/before.py:triton_before -o "$out/tree" > "$out/tree.txt" 2>&1
      echo "tree exit $? at ${SECONDS}s"; grep -h "FAIL\|skipped\|rror" "$out"/tree.txt | cut -c1-200 | head -20 ;;
    check) check_trees "$out" ${CHECK_LIMIT:-300}; echo "check at ${SECONDS}s" ;;
    sanitize) sanitize_shards trees "1/2 2/2" ${LIMIT:-300} "$out/sanitize" ;;
    *) echo "usage: run.sh time|check|sanitize ..." >&2; exit 2 ;;
  esac
done
