#!/usr/bin/env bash
# run-4: the issue-9 case list as one invocation (--shapes), on a machine with two GPUs, from the repository
# root with OUT set:  bash results/devices-x2/run-4.sh
# single-1 (one GPU, Triton's cache cold), then what a process spends before its first case (start-*), then
# devices-1, single-2, devices-2, single-3 (cache warm). calibrate(single-2, single-3) gives the run-to-run
# thresholds; compare(single-2, devices-1) and compare(single-3, devices-2) use them.
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
out=${OUT:?set OUT to the folder for the results}
S="python3 -m specbench --format plain"
{ nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total,clocks.max.sm,pci.bus_id --format=csv
  nvidia-smi topo -m
  python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)'
  nproc; date -u; } > "$out/machine.txt" 2>&1
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
# where a process's start goes (cache warm): imports, CUDA, then one small run under cProfile
for what in "import torch" "import torch; torch.zeros(1, device='cuda'); torch.cuda.synchronize()" \
            "import torch, triton, specbench.kernels.launch"; do
  /usr/bin/time -f "%e s: $what" python3 -c "$what" 2>> "$out/start-imports.txt"
done
python3 -X importtime -c "import specbench.cli, specbench.bench, specbench.kernels.launch" \
  2> "$out/start-importtime.txt"
python3 -m cProfile -o "$out/start.prof" -m specbench --format plain kernels --no-charts --impl triton \
  --mode greedy,probabilistic --draft logits --target logits -l 3 --timer graph --shapes 8x3@llama3 \
  -o "$out/start-run" > "$out/start-run.txt" 2>&1
python3 -c "import pstats, sys; s = pstats.Stats(sys.argv[1]); s.sort_stats('cumulative').print_stats(70); \
s.sort_stats('tottime').print_stats(40)" "$out/start.prof" > "$out/start-profile.txt" 2>&1
timed devices-1 --devices all
timed single-2
timed devices-2 --devices all
timed single-3
$S calibrate "$out/single-2" "$out/single-3" -o "$out/calibration.json" > "$out/calibrate.txt" 2>&1
for pair in "single-2 devices-1" "single-3 devices-2"; do
  set -- $pair
  $S compare "$out/$1" "$out/$2" --calibration "$out/calibration.json" --json "$out/compare-$2.json" \
    --markdown "$out/compare-$2.md" > "$out/compare-$2.txt" 2>&1
  echo "compare $1 $2 exit $?" | tee -a "$out/walls.txt"; tail -n 3 "$out/compare-$2.txt"
done
python3 tests/gpu_timer_check.py spread "$out/single-2" "$out/single-3" "$out/devices-1" "$out/devices-2" \
  > "$out/spread.txt" 2>&1; tail -n 4 "$out/spread.txt"
