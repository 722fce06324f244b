#!/usr/bin/env bash
# What is to make this folder, on the GPU machine from the repository root with OUT set:
#   bash results/h200-truncation-s4/run.sh topp   # top_p 0.95 alone (no top_k: the radix path) on the issue's
#                                                  # five shapes, draft logits and probs, graph, as the code stands
#   bash results/h200-truncation-s4/run.sh time   # the top-p path beside the committed kernels (.old, carried)
#   bash results/h200-truncation-s4/run.sh sanitize  # truncation kernels under the three sanitizers
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
out=${OUT:?set OUT to the folder for the results}
S="python3 -m specbench --format plain"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)'
  date -u; } > "$out/machine.txt" 2>&1
case ${1:-} in
  topp)
    K="$S kernels --no-charts --timer graph --max-ms 40 --mode probabilistic --target logits -l 3 --top-p 0.95
       --impl triton --draft logits,probs -o $out/topp --resume"
    for shape in "-b 1,8 -k 3 --model llama3" "-b 64 -k 4 --model qwen3" "-b 256 -k 7 --model qwen3" \
                 "-b 512 -k 7 --model llama3"; do
      timeout ${LIMIT:-90} $K $shape >> "$out/topp.txt" 2>&1; echo "topp $shape exit $?"
    done ;;
  time)  # the top-p path (working tree) beside the committed kernels (.old/triton_head.py: a copy of 72afbca's,
         # carried), top_p 0.95 alone and top_k 50 + top_p 0.9, draft logits and probs, graph
    head=.old/triton_head.py:triton_head
    K="$S kernels --no-charts --timer graph --max-ms 40 --mode probabilistic --target logits -l 3 --impl triton,$head
       --draft logits,probs"
    for knobs in "--top-p 0.95" "--top-k 50 --top-p 0.9"; do
      name=$(echo "$knobs" | tr -d ' -'); start=$SECONDS
      for shape in "-b 1,8 -k 3 --model llama3" "-b 64 -k 4 --model qwen3" "-b 256 -k 7 --model qwen3" \
                   "-b 512 -k 7 --model llama3"; do
        timeout ${LIMIT:-90} $K $knobs $shape -o $out/$name --resume >> "$out/$name.txt" 2>&1
        echo "$name $shape exit $? at $((SECONDS - start)) s"
      done
    done ;;
  sanitize)  # the truncation kernels (after the top-p path) and the log-probability epilogue under memcheck,
             # initcheck and racecheck: SHARDS shards per tool and group 5 alone, LIMIT seconds each
    n=${SHARDS:-6}
    for tool in memcheck initcheck racecheck; do
      for shard in $(seq 1 $n); do
        timeout ${LIMIT:-400} python3 tests/sanitize_kernels.py --part truncation --tools $tool --shard $shard/$n \
          --out "$out/truncation-$tool-$shard" > "$out/truncation-$tool-$shard.txt" 2>&1 &
      done
      timeout ${LIMIT:-400} python3 tests/sanitize_kernels.py --part truncation --tools $tool --shard 5/21 \
        --out "$out/group-5-$tool" > "$out/group-5-$tool.txt" 2>&1 &
    done
    wait; tail -n 1 "$out"/*.txt ;;
  *) echo "usage: run.sh topp|time|sanitize" >&2; exit 2 ;;
esac
