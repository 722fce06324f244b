#!/usr/bin/env bash
# What made this folder, run on a machine with two GPUs from the repository root with OUT set:
#   TIMER=events,graph MAX_MS=150 bash results/devices-x2/run.sh     # run-1/ (the defaults)
#   TIMER=host-free,graph MAX_MS=400 bash results/devices-x2/run.sh  # run-2/
# The issue-9 case list (Triton; four shape groups, L=3 and all accepted, timers TIMER, budget MAX_MS per row) run
# three times, each group its own process: single (one GPU), devices (--devices all: one worker per GPU, merged),
# single again. The two single runs calibrate each group's run-to-run spread; the devices run is compared
# against the first single run with that calibration.
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
out=${OUT:?set OUT to the folder for the results}
S="python3 -m specbench --format plain"
{ nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm,pci.bus_id --format=csv
  nvidia-smi topo -m
  python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)'
  nproc; date -u; } > "$out/machine.txt" 2>&1
groups=("-b 1,8 -k 3 --model llama3" "-b 64 -k 4 --model qwen3" "-b 256 -k 7 --model qwen3"
        "-b 512 -k 7 --model llama3")
run() {  # run NAME [extra options]: every group into $out/NAME-gG
  local name=$1; shift; local start=$SECONDS
  for g in 0 1 2 3; do
    $S kernels --no-charts --max-ms ${MAX_MS:-150} --impl triton --mode greedy,probabilistic --draft logits,probs,none \
      --target logits,probs -l 3,full --timer ${TIMER:-events,graph} ${groups[$g]} "$@" -o "$out/$name-g$g" \
      > "$out/$name-g$g.txt" 2>&1
    echo "$name group $g exit $?"
  done
  echo "$name wall $((SECONDS - start)) s"
}
run single-1
run devices --devices all
run single-2
for g in 0 1 2 3; do
  $S calibrate "$out/single-1-g$g" "$out/single-2-g$g" -o "$out/calibration-g$g.json" > "$out/calibrate-g$g.txt" 2>&1
  echo "calibrate group $g exit $?"
  $S compare "$out/single-1-g$g" "$out/devices-g$g" --calibration "$out/calibration-g$g.json" \
    --json "$out/compare-g$g.json" --markdown "$out/compare-g$g.md" > "$out/compare-g$g.txt" 2>&1
  echo "compare group $g exit $?"; tail -n 2 "$out/compare-g$g.txt"
  python3 tests/gpu_timer_check.py spread "$out/single-1-g$g" "$out/single-2-g$g" "$out/devices-g$g" \
    > "$out/spread-g$g.txt" 2>&1; tail -n 2 "$out/spread-g$g.txt"
done
