#!/usr/bin/env bash
# run-5: run-4's case list (the issue-9 list as one --shapes invocation) after the shards were dealt with a turn
# and the CSV writer stopped loading pandas; on a machine with two GPUs, from the repository root with OUT set:
#   bash results/devices-x2/run-5.sh
# Python's bytecode goes to PYTHONPYCACHEPREFIX (/tmp/specbench-pycache unless set), so that only the first
# process compiles torch's sources, as on an installed torch (the device image's site-packages holds none).
# single-1 (GPU 0, Triton's cache cold), then devices-1, single-2 (GPU 0), single-gpu1 (GPU 1 alone), devices-2,
# single-3 (GPU 0), and the two shards one after the other on GPU 0 merged (sequential). calibrate(single-2,
# single-3) gives the run-to-run thresholds for every compare.
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PYTHONPYCACHEPREFIX=${PYTHONPYCACHEPREFIX:-/tmp/specbench-pycache}
unset PYTHONDONTWRITEBYTECODE
out=${OUT:?set OUT to the folder for the results}
S="python3 -m specbench --format plain"
{ nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total,clocks.max.sm,pci.bus_id --format=csv
  nvidia-smi topo -m
  python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)'
  nproc; date -u; env | grep -i '^python' | sort
  site=$(python3 -c 'import torch, os; print(os.path.dirname(torch.__file__))')
  echo "torch at $site; its __pycache__ files: $(find "$site" -maxdepth 1 -name '__pycache__' -exec ls {} \; | wc -l);" \
       "writable: $(test -w "$site" && echo yes || echo no)"; } > "$out/machine.txt" 2>&1
SHAPES=1x3@llama3,8x3@llama3,64x4@qwen3,256x7@qwen3,512x7@llama3
CASES=(--no-charts --impl triton --mode greedy,probabilistic --draft logits,probs,none --target logits,probs
       -l 3,full --timer events,graph --shapes $SHAPES)
timed() {  # timed NAME [extra options]: one kernels invocation of the case list into $out/NAME
  local name=$1; shift; local start; start=$(date +%s.%N)
  $S kernels "${CASES[@]}" "$@" -o "$out/$name" > "$out/$name.txt" 2>&1
  local status=$?
  echo "$name exit $status wall $(python3 -c "print(f'{$(date +%s.%N) - $start:.1f}')") s" | tee -a "$out/walls.txt"
}
timed single-1
for what in "import torch" "import torch; torch.zeros(1, device='cuda'); torch.cuda.synchronize()"; do
  /usr/bin/time -f "%e s: $what" python3 -c "$what" 2>> "$out/start-imports.txt"
done
timed devices-1 --devices all
timed single-2
CUDA_VISIBLE_DEVICES=1 timed single-gpu1
timed devices-2 --devices all
timed single-3
CUDA_VISIBLE_DEVICES=0 timed sequential-shard-1 --shard 1/2
CUDA_VISIBLE_DEVICES=0 timed sequential-shard-2 --shard 2/2
$S merge "$out/sequential-shard-1" "$out/sequential-shard-2" -o "$out/sequential" --no-charts > "$out/sequential.txt" 2>&1
echo "merge sequential exit $?" | tee -a "$out/walls.txt"
$S calibrate "$out/single-2" "$out/single-3" -o "$out/calibration.json" > "$out/calibrate.txt" 2>&1
for pair in "single-2 devices-1" "single-3 devices-2" "single-2 single-gpu1" "single-2 sequential"; do
  set -- $pair
  $S compare "$out/$1" "$out/$2" --calibration "$out/calibration.json" --json "$out/compare-$2.json" \
    --markdown "$out/compare-$2.md" > "$out/compare-$2.txt" 2>&1
  echo "compare $1 $2 exit $?" | tee -a "$out/walls.txt"; tail -n 1 "$out/compare-$2.txt"
done
python3 tests/gpu_timer_check.py spread "$out/single-2" "$out/single-3" "$out/devices-1" "$out/devices-2" \
  > "$out/spread.txt" 2>&1; tail -n 1 "$out/spread.txt"
