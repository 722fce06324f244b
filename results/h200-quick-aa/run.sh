#!/usr/bin/env bash
# What made this folder, run on the GPU machine from the repository root with OUT set:
#   bash results/h200-quick-aa/run.sh quick    # four A/A runs of `kernels --quick` (default timer), each its own
#                                              # process: two plain, one as two shards merged, one with --devices all;
#                                              # the calibration from the first three, the fourth compared against it
#   bash results/h200-quick-aa/run.sh issue9   # the issue-9 case list (Triton) twice, each its own process
#   bash results/h200-quick-aa/run.sh sanitize # the truncation kernels under the three sanitizers, 2 shards each
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PATH=$PATH:/usr/local/cuda/bin
out=${OUT:?set OUT to the folder for the results}
S="python3 -m specbench --format plain"
machine() {
  { nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
    python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)'
    nproc; date -u; } > "$out/machine.txt" 2>&1
}
case ${1:-} in
  quick)
    machine
    for run in 1 2; do /usr/bin/time -f "quick-$run wall %e s" $S kernels --quick --no-charts -o "$out/quick-$run" \
      > "$out/quick-$run.txt" 2>&1; echo "quick-$run exit $?"; done
    for shard in 1 2; do /usr/bin/time -f "shard $shard/2 wall %e s" $S kernels --quick --no-charts --shard $shard/2 \
      -o "$out/quick-3-shard-$shard" > "$out/quick-3-shard-$shard.txt" 2>&1; echo "shard $shard exit $?"; done
    $S merge --no-charts -o "$out/quick-3" "$out/quick-3-shard-1" "$out/quick-3-shard-2" > "$out/quick-3.txt" 2>&1
    echo "merge exit $?"
    /usr/bin/time -f "devices all wall %e s" $S kernels --quick --no-charts --devices all -o "$out/quick-4" \
      > "$out/quick-4.txt" 2>&1; echo "quick-4 exit $?"
    $S calibrate "$out/quick-1" "$out/quick-2" "$out/quick-3" -o "$out/calibration.json" > "$out/calibrate.txt" 2>&1
    echo "calibrate exit $?"
    $S compare "$out/quick-1" "$out/quick-4" --calibration "$out/calibration.json" --json "$out/aa-calibrated.json" \
      --markdown "$out/aa-calibrated.md" > "$out/aa-calibrated.txt" 2>&1; echo "compare calibrated exit $?"
    $S compare "$out/quick-1" "$out/quick-4" --json "$out/aa-default.json" > "$out/aa-default.txt" 2>&1
    echo "compare default exit $?"
    python3 tests/gpu_timer_check.py spread "$out/quick-1" "$out/quick-2" "$out/quick-3" "$out/quick-4" \
      > "$out/spread-quick.txt" 2>&1; tail -3 "$out/spread-quick.txt" ;;
  issue9)
    machine
    for run in 1 2; do
      K="$S kernels --no-charts --max-ms 150 --impl triton --mode greedy,probabilistic --draft logits,probs,none
         --target logits,probs -o $out/issue9-$run --resume"
      { $K -b 1,8 -k 3 --model llama3 -l 3; $K -b 64 -k 4 --model qwen3 -l 3,full
        $K -b 256 -k 7 --model qwen3 -l 3,full; $K -b 512 -k 7 --model llama3 -l 3,full; } > "$out/issue9-$run.txt" 2>&1
      echo "issue9-$run exit $?"
    done
    python3 tests/gpu_timer_check.py spread "$out/issue9-1" "$out/issue9-2" > "$out/spread-issue9.txt" 2>&1
    tail -3 "$out/spread-issue9.txt" ;;
  sanitize)
    for tool in memcheck initcheck racecheck; do for shard in 1 2; do
      timeout ${LIMIT:-560} python3 tests/sanitize_kernels.py --part truncation --tools $tool --shard $shard/2 \
        --out "$out/sanitize-$tool-$shard" > "$out/sanitize-$tool-$shard.txt" 2>&1 &
    done; done
    wait; tail -n 3 "$out"/sanitize-*.txt ;;
  *) echo "usage: run.sh quick|issue9|sanitize" >&2; exit 2 ;;
esac
