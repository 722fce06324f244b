#!/usr/bin/env bash
# The histogram path's later levels with fewer instructions a token against the code before them, side by
# side on one GPU machine, then (SANITIZE=1) the sanitizers over the calls given no top_k. From the
# repository root with OUT set and OLD_HISTOGRAM the file before the change, e.g.
#   git show 52ea97e:specbench/kernels/histogram.py > /tmp/old_histogram.py
#   OLD_HISTOGRAM=/tmp/old_histogram.py bash results/h200-histogram/later-levels/run.sh
# (the session carried that file to the GPU machine in the repository root, as ab_old_histogram.py)
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
o=$OUT/o9; mkdir -p $o
S="python3 -m specbench --format plain"
K="kernels --no-charts --timer graph --max-ms 40 --mode probabilistic --target logits -l 3 -k 4 --model qwen3 --impl triton"
if [ "${SANITIZE:-0}" = 0 ]; then
  rm -rf /tmp/old && mkdir /tmp/old && cp -r specbench /tmp/old/ && cp ${OLD_HISTOGRAM:?a copy of histogram.py as of 52ea97e} /tmp/old/specbench/kernels/histogram.py
  timeout 240 $S $K --top-p 0.95 --draft logits,probs -b 64,256 -o $o/new-topp >> $o/new.txt 2>&1; echo new $?
  (cd /tmp/old && PYTHONPATH=/tmp/old timeout 180 $S $K --top-p 0.95 --draft logits,probs -b 64,256 -o $o/old-topp >> $o/old.txt 2>&1; echo old $?)
  timeout 60 $S $K --min-p 0.05 --draft logits -b 64 -o $o/new-minp >> $o/new.txt 2>&1; echo new-minp $?
  (cd /tmp/old && PYTHONPATH=/tmp/old timeout 60 $S $K --min-p 0.05 --draft logits -b 64 -o $o/old-minp >> $o/old.txt 2>&1; echo old-minp $?)
fi
if [ "${SANITIZE:-0}" = 1 ]; then
for tool in memcheck initcheck racecheck; do for shard in 1 2 3; do
  timeout 345 python3 tests/sanitize_kernels.py --part radix --tools $tool --shard $shard/3 --out $o/san-$tool-$shard > $o/san-$tool-$shard.txt 2>&1 &
done; done; wait; tail -q -n 1 $o/san-*.txt
fi

grep "top_p=0.95\|min_p=0.05" $o/new.txt $o/old.txt 2>/dev/null | grep -v "^ " | awk '{print $1, $2, $3, $8}'
