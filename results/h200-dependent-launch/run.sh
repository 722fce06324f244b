#!/usr/bin/env bash
# Every launch of a small batch's truncated step a dependent launch (issue 20; specbench/kernels/dependent_launch.py:
# each kernel placed on the GPU while the one before it runs, waiting there for it; the launch variants triton-pdl /
# triton-nopdl; launch.DEPENDENT_LAUNCH_MAX_BATCH 0 until this is timed). On the GPU machine from the repository root
# with OUT set, in this order:
#   bash results/h200-dependent-launch/run.sh time      # graph, L = 3, target logits, draft logits and probs, the
#                                                       # variants side by side: top_p 0.95 at B = SMALL (Llama 3,
#                                                       # K = 3) and LARGE (64: Qwen 3, K = 4; 256: K = 7), top_k 50 +
#                                                       # top_p 0.9 at B = TOPK (Llama 3, K = 3)
#   bash results/h200-dependent-launch/run.sh check     # tests/test_dependent_launch.py (the same tokens bit for bit,
#                                                       # direct and from a CUDA graph) and the truncation GPU tests
#                                                       # with dependent launches forced at every batch
#                                                       # (SPECBENCH_TEST_DEPENDENT_LAUNCH=1, tests/conftest.py)
#   bash results/h200-dependent-launch/run.sh sanitize  # the launcher's small-batch ways (sanitize part folds),
#                                                       # dependent launches forced, under memcheck, initcheck and
#                                                       # racecheck, the float32 groups, cache warmed first
#   bash results/h200-dependent-launch/run.sh sanitize-topk  # the same for the top_k calls (part topk)
# (SMALL: default 1 2 4 8; LARGE: default 64; TOPK: default 1 8; LIMIT: seconds a timed run, WARM_LIMIT a compiling
# one, CHECK_LIMIT a test shard)
set -uo pipefail
out=${OUT:?set OUT to the folder for the results}
mkdir -p "$out"
source results/gpu-lib.sh
impls=${IMPLS:-triton-nopdl,triton-pdl}
S="python3 -m specbench --format plain kernels --no-charts --timer graph --mode probabilistic --target logits -l 3
   --draft logits,probs"
shape_of() {
  case $1 in
    64) echo "-k 4 --model qwen3" ;;
    256) echo "-k 7 --model qwen3" ;;
    *) echo "-k 3 --model llama3" ;;
  esac
}
cases() {  # one line a case: knobs, batch
  for b in ${SMALL-1 2 4 8} ${LARGE-64}; do echo "--top-p 0.95;$b"; done
  for b in ${TOPK-1 8}; do echo "--top-k 50 --top-p 0.9;$b"; done
}
for step in "$@"; do
  case $step in
    time)
      write_machine "$out/machine.txt"
      scratch=$(mktemp -d)
      while IFS=';' read -r knobs b; do
        for impl in ${impls//,/ }; do
          name=$(echo "$knobs $b $impl" | tr -d ' -')
          timeout ${WARM_LIMIT:-200} $S $knobs --max-ms 1 --impl $impl -b $b $(shape_of $b) -o $scratch/$name \
            > $scratch/$name.txt 2>&1 < /dev/null &
        done
      done < <(cases)
      wait
      while IFS=';' read -r knobs b; do
        name=$(echo "$knobs" | tr -d ' -')
        timeout ${LIMIT:-100} $S $knobs --max-ms 40 --impl $impls -b $b $(shape_of $b) -o "$out/$name" --resume \
          >> "$out/$name.txt" 2>&1 < /dev/null
        echo "$knobs B=$b exit $?"
      done < <(cases) ;;
    check)
      SPECBENCH_TEST_DEPENDENT_LAUNCH=1 check_tests "$out/tests" ${CHECK_LIMIT:-300} ${CHECK_SHARDS:-8} \
        tests/test_dependent_launch.py tests/test_exactness_truncation.py tests/test_truncation_kernels.py ;;
    sanitize)
      sanitize_float32 folds "$out/folds" --dependent-launch ;;
    sanitize-topk)
      sanitize_float32 topk "$out/topk" --dependent-launch ;;
    *) echo "usage: run.sh time|check|sanitize|sanitize-topk ..." >&2; exit 2 ;;
  esac
done
