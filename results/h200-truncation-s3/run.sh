#!/usr/bin/env bash
# What is to make this folder, on the GPU machine from the repository root with OUT set (one call each):
#   bash results/h200-truncation-s3/run.sh time      # top_k 50 + top_p 0.9 on the shapes (graph): the working
#                                                    # tree's kernels (triton; triton-split forces the prepass at
#                                                    # every batch; triton-split-2048x8 a wider search program) beside
#                                                    # the committed ones (.old/triton_head.py, a copy of HEAD, carried),
#                                                    # then the truncation GPU tests
#   bash results/h200-truncation-s3/run.sh explore   # stages.py (the search's parts timed apart), then launch shapes
#                                                    # side by side, draft logits: the prepass path's program at 4, 8
#                                                    # and 16 warps (small batches), the fused step's (large ones),
#                                                    # beside HEAD's kernels (.old/triton_head.py)
#   bash results/h200-truncation-s3/run.sh final     # after the shapes were chosen and the pass lightened: the issue's
#                                                    # top_k 50 + top_p 0.9 rows (graph, draft logits and probs)
#                                                    # beside HEAD's kernels, then the truncation GPU tests beside the
#                                                    # sanitizers (SHARDS shards per tool, until 580 s into the call)
#   bash results/h200-truncation-s3/run.sh recheck   # the sanitizer groups the final call's time cut off (one process
#                                                    # per group and tool: --shard G/21 is group G alone), and the
#                                                    # heaviest group at the fused step's wide shape (--shape 2048x8)
#   bash results/h200-truncation-s3/run.sh sanitize  # the truncation and log-probability kernels under memcheck,
#                                                    # initcheck and racecheck (SHARDS shards each, LIMIT seconds)
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PATH=$PATH:/usr/local/cuda/bin
out=${OUT:?set OUT to the folder for the results}
S="python3 -m specbench --format plain"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)'
  date -u; } > "$out/machine.txt" 2>&1
case ${1:-} in
  time)
    K="$S kernels --no-charts --timer graph --max-ms 40 --mode probabilistic --target logits -l 3 --top-k 50 --top-p 0.9
       -o $out/timing --resume"
    small=triton,triton-split-2048x8,.old/triton_head.py:triton_head
    large=triton,triton-split,.old/triton_head.py:triton_head
    { $K --impl $small --draft logits,probs -b 1,8 -k 3 --model llama3
      $K --impl $small --draft logits,probs -b 64 -k 4 --model qwen3
      $K --impl $large --draft logits,probs -b 256 -k 7 --model qwen3
      $K --impl $large --draft logits,probs -b 512 -k 7 --model llama3; } > "$out/timing.txt" 2>&1
    echo "kernels exit $?"
    timeout ${LIMIT:-200} python3 -m pytest -q -p no:cacheprovider tests/test_truncation.py \
      tests/test_exactness_truncation.py tests/test_bench_truncation.py > "$out/pytest.txt" 2>&1
    echo "pytest exit $?"; tail -n 2 "$out/pytest.txt" ;;
  explore)
    timeout 150 python3 results/h200-truncation-s3/stages.py > "$out/stages.txt" 2>&1; echo "stages exit $?"
    K="$S kernels --no-charts --timer graph --max-ms 40 --mode probabilistic --target logits --draft logits -l 3
       --top-k 50 --top-p 0.9 -o $out/explore --resume"
    small=triton,triton-split-2048x8,triton-split-2048x16,triton-split-4096x16,.old/triton_head.py:triton_head
    large=triton,triton-sequential-2048x4,triton-sequential-2048x8,.old/triton_head.py:triton_head
    { $K --impl $small -b 1,8 -k 3 --model llama3; $K --impl $small -b 64 -k 4 --model qwen3
      $K --impl $large -b 256 -k 7 --model qwen3; $K --impl $large -b 512 -k 7 --model llama3; } > "$out/explore.txt" 2>&1
    echo "kernels exit $?" ;;
  final)
    start=$SECONDS
    K="$S kernels --no-charts --timer graph --max-ms 40 --mode probabilistic --target logits -l 3 --top-k 50
       --top-p 0.9 -o $out/final --resume"
    head=.old/triton_head.py:triton_head
    { $K --impl triton,$head --draft logits,probs -b 1,8 -k 3 --model llama3
      $K --impl triton,$head --draft logits,probs -b 64 -k 4 --model qwen3
      $K --impl triton,$head --draft logits,probs -b 256 -k 7 --model qwen3
      $K --impl triton,$head --draft logits,probs -b 512 -k 7 --model llama3
      $K --impl triton-sequential-2048x8 --draft logits -b 256 -k 7 --model qwen3
      $K --impl triton-sequential-2048x8 --draft logits -b 512 -k 7 --model llama3; } > "$out/final.txt" 2>&1
    echo "kernels exit $? after $((SECONDS - start)) s"
    left=$((580 - (SECONDS - start))); n=${SHARDS:-7}
    timeout $left python3 -m pytest -q -p no:cacheprovider tests/test_truncation.py tests/test_exactness_truncation.py \
      tests/test_bench_truncation.py > "$out/pytest.txt" 2>&1 &
    for tool in memcheck initcheck racecheck; do for shard in $(seq 1 $n); do
      timeout $left python3 tests/sanitize_kernels.py --part truncation --tools $tool --shard $shard/$n \
        --out "$out/truncation-$tool-$shard" > "$out/truncation-$tool-$shard.txt" 2>&1 &
    done; done
    wait; echo "checks done after $((SECONDS - start)) s"; tail -n 2 "$out/pytest.txt" ;;
  recheck)
    for tool in memcheck initcheck racecheck; do
      for group in 5 8 12 14 15 19 21; do
        timeout ${LIMIT:-300} python3 tests/sanitize_kernels.py --part truncation --tools $tool --shard $group/21 \
          --out "$out/group-$group-$tool" > "$out/group-$group-$tool.txt" 2>&1 &
      done
      timeout ${LIMIT:-300} python3 tests/sanitize_kernels.py --part truncation --tools $tool --shard 5/21 --shape 2048x8 \
        --out "$out/wide-5-$tool" > "$out/wide-5-$tool.txt" 2>&1 &
    done
    wait; tail -n 1 "$out"/*.txt ;;
  sanitize)
    n=${SHARDS:-5}
    for tool in memcheck initcheck racecheck; do for shard in $(seq 1 $n); do
      timeout ${LIMIT:-500} python3 tests/sanitize_kernels.py --part truncation --tools $tool --shard $shard/$n \
        --out "$out/truncation-$tool-$shard" > "$out/truncation-$tool-$shard.txt" 2>&1 &
    done; done
    wait; tail -n 1 "$out"/truncation-*.txt ;;
  *) echo "usage: run.sh time|sanitize" >&2; exit 2 ;;
esac
