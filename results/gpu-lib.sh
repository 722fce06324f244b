# What the GPU machine's result scripts share (`source results/gpu-lib.sh` from the repository root). Sourcing it
# exports PYTHONPATH (the checkout, so that `python3 -m specbench` runs it), PYTHONUNBUFFERED and CUDA's bin folder on
# PATH (compute-sanitizer), and defines five shell functions:
#   write_machine FILE                    the GPU, driver, memory and clock, Python, torch and Triton versions, the
#                                         checkout's commit (the machine's copy of the history: read it with the
#                                         README's note) and the date
#   check_trees DIR LIMIT                 the tree workload of tests/sanitize_kernels.py (two shards, no tool: its
#                                         kernels compiled before a sanitizer runs them) beside the GPU tree tests,
#                                         LIMIT seconds each, logs in DIR
#   sanitize_shards PART SHARDS LIMIT DIR [FLAG...]
#                                         tests/sanitize_kernels.py --part PART under memcheck, initcheck and
#                                         racecheck, the shards of SHARDS (say "1/2 2/2") at once, LIMIT seconds
#                                         each, logs in DIR, FLAGs passed on (say --dependent-launch);
#                                         DIR/summary.txt holds each process's last line, and the count of clean
#                                         ones is printed
#   sanitize_float32 PART DIR [FLAG...]   tests/sanitize_kernels.py --part PART's float32 groups (shards 1, 3, ...,
#                                         11 of 12: the only ones parts lists and folds run), FLAGs passed on, first
#                                         without a tool, all at once (WORK_LIMIT seconds each, default 150: to fill
#                                         Triton's cache), their last lines in DIR/PART-workload.txt, then under
#                                         the three tools (sanitize_shards, TOOL_LIMIT seconds each, default 300),
#                                         the logs in DIR/sanitize-PART.tgz
#   check_tests DIR LIMIT SHARDS FILE...  the tests of FILE... in SHARDS runs at once, every SHARDS-th test of
#                                         pytest's collection each (most of the truncation files' tests skip on a
#                                         GPU, and the rest come in runs: consecutive shards left some idle), LIMIT
#                                         seconds each, logs in DIR (tests-I.txt); each shard's last line is printed
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PATH=$PATH:/usr/local/cuda/bin

write_machine() {
  { nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
    python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)'
    git rev-parse HEAD 2>/dev/null; date -u; } > "$1" 2>&1
}

sanitize_shards() {
  local part=$1 shards=$2 limit=$3 dir=$4 tool shard name summary
  shift 4
  mkdir -p "$dir"
  for tool in memcheck initcheck racecheck; do
    for shard in $shards; do
      name=$tool-${shard%%/*}
      timeout "$limit" python3 tests/sanitize_kernels.py --part "$part" --tools $tool --shard "$shard" \
        --out "$dir/$name" "$@" > "$dir/$name.txt" 2>&1 &
    done
  done
  wait
  summary=$(for f in "$dir"/*check-*.txt; do echo "$(basename "$f" .txt): $(tail -n 1 "$f")"; done)
  echo "$summary" > "$dir/summary.txt"
  echo "$(grep -c clean "$dir/summary.txt") of $(wc -l < "$dir/summary.txt") clean"
}

check_trees() {
  local dir=$1 limit=$2 shard
  for shard in 1 2; do
    timeout "$limit" python3 tests/sanitize_kernels.py --part trees --workload --shard $shard/2 \
      > "$dir/work-$shard.txt" 2>&1 &
  done
  timeout "$limit" python3 -m pytest -q -p no:cacheprovider tests/test_trees_triton.py > "$dir/pytest.txt" 2>&1 &
  wait; tail -n 1 "$dir"/work-*.txt; tail -n 1 "$dir/pytest.txt"
}

check_tests() {
  local dir=$1 limit=$2 shards=$3 i ids
  shift 3
  mkdir -p "$dir"
  python3 -m pytest -q -p no:cacheprovider --collect-only "$@" 2>&1 | grep '::' > "$dir/ids.txt"
  for ((i = 0; i < shards; i++)); do
    mapfile -t ids < <(awk -v n="$shards" -v i="$i" 'NR % n == i' "$dir/ids.txt")
    [ ${#ids[@]} -gt 0 ] || continue
    timeout "$limit" python3 -m pytest -q -p no:cacheprovider "${ids[@]}" > "$dir/tests-$i.txt" 2>&1 &
  done
  wait
  for i in "$dir"/tests-*.txt; do echo "$(basename "$i" .txt): $(tail -n 1 "$i")"; done
}

sanitize_float32() {
  local part=$1 dir=$2 shards="1/12 3/12 5/12 7/12 9/12 11/12" shard
  shift 2
  mkdir -p "$dir/w"
  for shard in $shards; do
    timeout "${WORK_LIMIT:-150}" python3 tests/sanitize_kernels.py --workload --part "$part" --shard "$shard" "$@" \
      > "$dir/w/$part-${shard%%/*}.txt" 2>&1 &
  done
  wait
  tail -n 1 "$dir"/w/*.txt > "$dir/$part-workload.txt"; rm -rf "$dir/w"
  sanitize_shards "$part" "$shards" "${TOOL_LIMIT:-300}" "$dir/s" "$@"
  tar czf "$dir/sanitize-$part.tgz" -C "$dir" s && rm -rf "$dir/s"
}
