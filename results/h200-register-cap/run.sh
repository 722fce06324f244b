#!/usr/bin/env bash
# What made this folder (and results/h200-bisect-bits/, results/h200-l2-ahead/, with .old/s50 carried and IMPLS
# set), on the GPU machine from the repository root with OUT set
# (before.py's docstring says what it holds):
#   bash results/h200-register-cap/run.sh warm     # every shape of `time` run once at --max-ms 1, all at once into
#                                                  # a scratch folder: the kernels compiled in parallel, to the cache
#   bash results/h200-register-cap/run.sh time     # top_k 50 + top_p 0.9 on issue 20's shapes (graph), the working
#                                                  # tree's kernels beside before.py's, draft logits and probs;
#                                                  # IMPLS, BATCHES
#   bash results/h200-register-cap/run.sh check    # the truncation GPU tests
#   bash results/h200-register-cap/run.sh sanitize # tests/sanitize_kernels.py --part topk under memcheck, initcheck
#                                                  # and racecheck: groups SHARDS of 12 (default: the float32 ones),
#                                                  # each run once without a tool first, then one process per group
#                                                  # and tool, LIMIT seconds each, at SHAPE (BLOCKxWARPS) if set
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PATH=$PATH:/usr/local/cuda/bin
out=${OUT:?set OUT to the folder for the results}
S="python3 -m specbench --format plain"
impls=${IMPLS:-triton,results/h200-register-cap/before.py:triton_w8r128,results/h200-register-cap/before.py:triton_w8}
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)'
  git log -1 --format='commit %H'; date -u; } > "$out/machine.txt" 2>&1
shape_of() {
  case $1 in
    1|8) echo "-k 3 --model llama3" ;;
    64) echo "-k 4 --model qwen3" ;;
    128|256) echo "-k 7 --model qwen3" ;;
    512) echo "-k 7 --model llama3" ;;
  esac
}
K="$S kernels --no-charts --timer graph --mode probabilistic --target logits -l 3 --top-k 50 --top-p 0.9
   --draft logits,probs"
for step in "$@"; do
  case $step in
    warm)
      scratch=$(mktemp -d)
      for b in ${BATCHES:-1 8 64 256 512}; do
        timeout ${LIMIT:-200} $K --max-ms 1 --impl $impls -b $b $(shape_of $b) -o $scratch/warm-$b \
          > $scratch/warm-$b.txt 2>&1 &
      done
      wait; echo "warm done: $(grep -c ' ok' $scratch/warm-*.txt | tr '\n' ' ')" ;;
    time)
      for b in ${BATCHES:-1 8 64 256 512}; do
        $K --max-ms 40 --impl $impls -b $b $(shape_of $b) -o $out/time --resume >> "$out/time.txt" 2>&1
        echo "kernels B=$b exit $?"
      done ;;
    check)
      timeout ${LIMIT:-240} python3 -m pytest -q -p no:cacheprovider tests/test_truncation_kernels.py \
        tests/test_exactness_truncation.py tests/test_truncation.py tests/test_bench_truncation.py \
        > "$out/tests.txt" 2>&1
      echo "tests exit $?"; tail -n 1 "$out/tests.txt" ;;
    sanitize)
      # each group first without a tool (its kernels compiled into the cache), then under each tool
      for g in ${SHARDS:-1 3 5 7 9 11}; do
        timeout 120 python3 tests/sanitize_kernels.py --workload --part topk --shard $g/12 ${SHAPE:+--shape $SHAPE} \
          > "$out/topk-plain-$g.txt" 2>&1 &
      done
      wait; echo "plain: $(tail -q -n 1 "$out"/topk-plain-*.txt | tr '\n' ';')"
      for tool in memcheck initcheck racecheck; do
        for g in ${SHARDS:-1 3 5 7 9 11}; do
          timeout ${LIMIT:-300} python3 tests/sanitize_kernels.py --part topk --tools $tool --shard $g/12 \
            ${SHAPE:+--shape $SHAPE} --out "$out/topk-$tool-$g" > "$out/topk-$tool-$g.txt" 2>&1 &
        done
      done
      wait; for f in "$out"/topk-[mir]*.txt; do echo "$(basename $f): $(tail -n 1 $f)"; done ;;
    *) echo "usage: run.sh warm|time|check|sanitize ..." >&2; exit 2 ;;
  esac
done
