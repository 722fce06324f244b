#!/usr/bin/env bash
# ncu on every kernel of one truncated step (top_p 0.95 alone, draft logits, L = 3): where the split histogram path's
# launches, the bounds pass and the step spend their time, at B = 8 (K = 3, Llama 3) and B = 256 (K = 7, Qwen3).
# From the repository root with OUT set:  bash results/h200-topp-profile/run.sh
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PATH=$PATH:/usr/local/cuda/bin
out=${OUT:?set OUT to the folder for the results}
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)'
  ncu --version | tail -n 1; git rev-parse HEAD 2>/dev/null; date -u; } > "$out/machine.txt" 2>&1
N="ncu --clock-control none --nvtx --nvtx-include profiled/ --section SpeedOfLight --section Occupancy
   --section LaunchStats --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis"
P="python3 results/h200-topp-profile/calls.py"
timeout ${LIMIT:-250} $N $P --batch 8 --k 3 --model llama3 --top-p 0.95 > "$out/ncu-b8.txt" 2>&1 &
timeout ${LIMIT:-250} $N $P --batch 256 --k 7 --model qwen3 --top-p 0.95 > "$out/ncu-b256.txt" 2>&1 &
wait
for f in "$out"/ncu-*.txt; do echo "$(basename $f): $(grep -c '^  _\|^  [a-z_]*kernel' $f) kernels"; tail -n 2 $f; done
