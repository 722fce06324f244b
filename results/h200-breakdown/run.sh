#!/usr/bin/env bash
# Where the steps that miss their speed goals spend their time, kernel by kernel (tests/gpu_kernel_breakdown.py:
# torch.profiler over 50 cold calls): the truncated main case (issue 20: top_k 50 + top_p 0.9, and top_p 0.95
# alone, min_p 0.05 alone at B = 64) and its untruncated step, the 2x2 tree against the chain of as many rows (issue 24), block against the
# token rule from probabilities (issue 22). From the repository root with OUT set, on one GPU:
#   bash results/h200-breakdown/run.sh
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PYTHONPYCACHEPREFIX=${PYTHONPYCACHEPREFIX:-/tmp/specbench-pycache}
unset PYTHONDONTWRITEBYTECODE
out=${OUT:?set OUT to the folder for the results}
B="timeout 120 python3 tests/gpu_kernel_breakdown.py"
{ nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total,clocks.max.sm --format=csv
  python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)'
  date -u; } > "$out/machine.txt" 2>&1
{
  for batch in 1 8; do
    $B --batch $batch --k 3 --model llama3 --draft logits
    $B --batch $batch --k 3 --model llama3 --draft logits --top-k 50 --top-p 0.9
    $B --batch $batch --k 3 --model llama3 --draft logits --top-p 0.95
    $B --batch $batch --model llama3 --draft logits --tree 2x2
    $B --batch $batch --k 6 --model llama3 --draft logits
  done
  $B --batch 64 --k 4 --model qwen3 --draft logits --top-p 0.95
  $B --batch 64 --k 4 --model qwen3 --draft logits --min-p 0.05
  $B --batch 64 --k 4 --model qwen3 --draft logits
  $B --batch 256 --k 7 --model qwen3 --draft logits --top-p 0.95 --calls 10
  $B --batch 256 --k 7 --model qwen3 --draft logits --top-k 50 --top-p 0.9
  $B --batch 256 --k 7 --model qwen3 --draft logits
  for method in token block; do $B --batch 256 --k 7 --model qwen3 --draft probs --target probs --method $method; done
} > "$out/breakdown.txt" 2>&1
echo "breakdown exit $?"; grep -c "kernels' sum" "$out/breakdown.txt"
