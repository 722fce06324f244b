# stop 65, call 2: the masses tail (the working tree: main + masses-tail-next.patch) timed beside main's kernels
# (81b9cb7, .old/tree_main.py) and e554581's (.old/tree_before_tail.py), one process; then B = 256
# (as it ran: main at 925035f with masses-tail-next.patch applied; carried as .old/s65-call2.sh beside
# .old/impls.py (impls.py here), .old/tree_main.py (`git show 925035f:specbench/kernels/tree.py`) and
# .old/tree_before_tail.py (`bash results/h200-tree-masses-tail/run.sh before`))
set -uo pipefail
source results/gpu-lib.sh
out=$OUT/r; mkdir -p $out
write_machine $out/machine.txt
here=results/h200-tree-masses-tail
timeout ${TIME_LIMIT:-330} python3 -m specbench --format plain kernels --no-charts --timer graph --max-ms 40 \
  --model llama3 --tree 2x2,chain:6 -b 1,2,4,8 -l 2,full --mode probabilistic --draft none,logits,probs \
  --impl triton,.old/impls.py:triton_main,$here/before.py:triton_before -o "$out/tree" > "$out/tree.txt" 2>&1
echo "tree exit $? at ${SECONDS}s"; grep -h "FAIL\|skipped\|rror" "$out"/tree.txt | cut -c1-200 | head -20
timeout ${WIDE_LIMIT:-150} python3 -m specbench --format plain kernels --no-charts --timer graph --max-ms 40 \
  --model llama3 --tree 2x2,chain:6 -b 256 -l 2,full --mode probabilistic --draft none,logits,probs \
  --impl triton,.old/impls.py:triton_main -o "$out/wide" > "$out/wide.txt" 2>&1
echo "wide exit $? at ${SECONDS}s"; grep -h "FAIL\|skipped\|rror" "$out"/wide.txt | cut -c1-200 | head -20
tar czf $OUT/r.tgz -C $OUT r && rm -rf $out
