#!/usr/bin/env bash
# What made run-3/, on a machine with two GPUs from the repository root with OUT set:
#   bash results/devices-x2/run-3.sh
# 1. One large invocation (probabilistic, B = 1,8,64,256, K = 4,7, Qwen3, draft logits/probs/one-hot, target
#    logits/probs, L = 3 and all accepted; host-free and graph, 100 ms a row) three times: single-1 (one GPU,
#    Triton's cache cold), devices (--devices all), single-2 (one GPU, cache warm): the wall time of --devices
#    after it counts GPUs with nvidia-smi, on work large against the start.
# 2. The B = 1,8 group of the issue-9 list (host-free and graph, 400 ms a row): one GPU, --devices all, and the
#    same two shards run one after the other on GPU 0 and merged: whether the devices run's 3-8% slower
#    host-free rows come from the second worker beside it or from the shard's own history.
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
out=${OUT:?set OUT to the folder for the results}
S="python3 -m specbench --format plain"
{ nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm,pci.bus_id --format=csv
  python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)'
  nproc; date -u; } > "$out/machine.txt" 2>&1
big="kernels --no-charts --max-ms 100 --impl triton --mode probabilistic --draft logits,probs,none --target logits,probs
     -l 3,full --timer host-free,graph -b 1,8,64,256 -k 4,7 --model qwen3"
small="kernels --no-charts --max-ms 400 --impl triton --mode greedy,probabilistic --draft logits,probs,none
       --target logits,probs -l 3,full --timer host-free,graph -b 1,8 -k 3 --model llama3"
timed() {  # timed NAME COMMAND...: run, log, and print the exit status and wall seconds
  local name=$1; shift; local start=$SECONDS
  "$@" > "$out/$name.txt" 2>&1; echo "$name exit $? wall $((SECONDS - start)) s"
}
timed big-single-1 $S $big -o "$out/big-single-1"
timed big-devices $S $big --devices all -o "$out/big-devices"
timed big-single-2 $S $big -o "$out/big-single-2"
timed small-single $S $small -o "$out/small-single"
timed small-devices $S $small --devices all -o "$out/small-devices"
for shard in 1 2; do
  ( export CUDA_VISIBLE_DEVICES=0; timed small-seq-shard-$shard $S $small --shard $shard/2 -o "$out/small-seq-shard-$shard" )
done
timed small-seq $S merge --no-charts -o "$out/small-seq" "$out/small-seq-shard-1" "$out/small-seq-shard-2"
timed big-calibrate $S calibrate "$out/big-single-1" "$out/big-single-2" -o "$out/big-calibration.json"
timed big-compare $S compare "$out/big-single-2" "$out/big-devices" --calibration "$out/big-calibration.json" \
  --json "$out/big-compare.json"
tail -n 1 "$out/big-compare.txt"
python3 tests/gpu_timer_check.py spread "$out/small-single" "$out/small-devices" "$out/small-seq" > "$out/small-spread.txt" 2>&1
python3 tests/gpu_timer_check.py spread "$out/big-single-1" "$out/big-single-2" "$out/big-devices" > "$out/big-spread.txt" 2>&1
tail -n 1 "$out/small-spread.txt" "$out/big-spread.txt"
