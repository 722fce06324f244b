#!/usr/bin/env bash
# The split radix path (batches given top_p or min_p without top_k, specbench/kernels/radix.py), on the GPU machine
# from the repository root with OUT set:
#   bash results/h200-split-radix/run.sh probe     # batches of 256 and 512 given no top_k under memcheck
#   bash results/h200-split-radix/run.sh check     # the GPU tests and `verify` of the Triton kernels (probabilistic)
#   bash results/h200-split-radix/run.sh shapes    # top_p 0.95 alone at four radix shapes side by side, graph
#   bash results/h200-split-radix/run.sh sanitize  # the calls given no top_k under memcheck, initcheck, racecheck
#   bash results/h200-split-radix/run.sh confirm   # the default shape: top_p 0.95, min_p 0.05, top_k 50 + top_p 0.9
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PYTHONPYCACHEPREFIX=${PYTHONPYCACHEPREFIX:-/tmp/specbench-pycache}
unset PYTHONDONTWRITEBYTECODE
out=${OUT:?set OUT to the folder for the results}
S="python3 -m specbench --format plain"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)'
  date -u; } > "$out/machine.txt" 2>&1
K="$S kernels --no-charts --timer graph --max-ms 40 --mode probabilistic --target logits -l 3"
SHAPES=("-b 1,8 -k 3 --model llama3" "-b 64 -k 4 --model qwen3" "-b 256 -k 7 --model qwen3" "-b 512 -k 7 --model llama3")
for step in "$@"; do
  case $step in
    probe)
      timeout 300 compute-sanitizer --tool memcheck --print-limit 20 python3 -c '
import torch
from specbench import SamplingParams, verify
g = torch.Generator(device="cuda").manual_seed(0)
for batch, k, vocab in ((256, 7, 8192), (512, 7, 4099)):
    target = torch.randn(batch, k + 1, vocab, device="cuda", generator=g)
    draft = torch.randn(batch, k, vocab, device="cuda", generator=g)
    ids = torch.randint(0, vocab, (batch, k), device="cuda", generator=g)
    sampling = SamplingParams(temperatures=torch.ones(batch, device="cuda"), top_p=torch.full((batch,), 0.95, device="cuda"))
    result = verify(target, draft_token_ids=ids, draft_logits=draft, sampling=sampling, backend="triton",
                    seeds=torch.arange(batch, device="cuda"), positions=torch.zeros(batch, dtype=torch.int64, device="cuda"))
    torch.cuda.synchronize(); print(batch, k, vocab, "ok", result.num_emitted.float().mean().item())
' > "$out/probe.txt" 2>&1; echo "probe exit $?"; tail -n 4 "$out/probe.txt" ;;
    check)
      timeout 240 python3 -m pytest -x -q -p no:cacheprovider tests/test_truncation_kernels.py \
        tests/test_exactness_truncation.py tests/test_truncation.py tests/test_launch.py > "$out/tests.txt" 2>&1
      echo "tests exit $?"; tail -n 1 "$out/tests.txt"
      timeout 200 $S verify --impl triton -m probabilistic --json "$out/verify.json" > "$out/verify.txt" 2>&1
      echo "verify exit $?"; tail -n 2 "$out/verify.txt" ;;
    shapes)
      impls=triton,triton-radix-4096x512x4,triton-radix-2048x512x8,triton-radix-1024x256x4
      for shape in "${SHAPES[@]}"; do
        timeout ${LIMIT:-100} $K --top-p 0.95 --draft logits --impl $impls $shape -o $out/shapes --resume \
          >> "$out/shapes.txt" 2>&1; echo "shapes $shape exit $?"
      done ;;
    sanitize)
      for tool in memcheck initcheck racecheck; do
        for shard in 1 2 3; do
          timeout ${LIMIT:-400} python3 tests/sanitize_kernels.py --part radix --tools $tool --shard $shard/3 \
            --out "$out/radix-$tool-$shard" > "$out/radix-$tool-$shard.txt" 2>&1 &
        done
      done
      wait; tail -n 1 "$out"/radix-*.txt ;;
    confirm)
      for knobs in "--top-p 0.95" "--min-p 0.05" "--top-k 50 --top-p 0.9"; do
        name=$(echo "$knobs" | tr -d ' -')
        for shape in "${SHAPES[@]}"; do
          timeout ${LIMIT:-100} $K $knobs --draft logits,probs --impl triton $shape -o $out/$name --resume \
            >> "$out/$name.txt" 2>&1; echo "$name $shape exit $?"
        done
      done ;;
    *) echo "usage: run.sh probe|check|shapes|sanitize|confirm ..." >&2; exit 2 ;;
  esac
done
