"""Write an instrumented copy of specbench/kernels/tree.py (timeline probes, %globaltimer) to a module path.

    python results/h200-tree-timeline/instrument.py OUT.py

The copy's split-path kernels take three more pointers after CHUNK: dbg_rows_ptr (int64, two stamps per rows
program: start, arrival), dbg_fin_ptr (three per finish program: start, role known, end), dbg_last_ptr (eight per
request: rows' last program after the merge and after the walk; the masses' last program after its arrival,
after the resumed walk, after the race from candidates, after publishing; the first racing program's end of
wait). Each probe reads %globaltimer after a value it depends on, so it cannot run before that value exists.
The edits are anchored on exact lines of the tree.py they were written for; a line not found stops the script.
"""

import sys
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[2] / "specbench" / "kernels" / "tree.py"

PROBE = '''

@triton.jit
def _now(dep):
    # %globaltimer (ns) once `dep` is known
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [dep.to(tl.int32)], dtype=tl.int64,
                                     is_pure=False, pack=1)

'''


def _sub(text: str, old: str, new: str, count: int = 1) -> str:
    if text.count(old) != count:
        sys.exit(f"anchor found {text.count(old)} times, not {count}: {old[:70]!r}")
    return text.replace(old, new)


def common_probes(text: str) -> str:
    """The probes every version of the split path takes: the probe function, the kernels' three pointers, the rows
    kernel's stamps, the finish kernel's first and last (another folder's instrument.py adds its own between)."""
    text = _sub(text, "\n# what is left to emit when a walk stops", PROBE + "# what is left to emit when a walk stops")
    # the two kernels' signatures: three pointers after CHUNK
    text = _sub(text, "    V, N, ROW_SPLITS, RACE_SPLITS, CHUNK,\n    MODE: tl.constexpr,",
                "    V, N, ROW_SPLITS, RACE_SPLITS, CHUNK, dbg_rows_ptr, dbg_fin_ptr, dbg_last_ptr,\n    MODE: tl.constexpr,",
                count=2)
    # rows kernel: start, arrival, merge, walk
    text = _sub(text, "    split = tl.program_id(2)\n    batch = tl.num_programs(0)\n",
                "    split = tl.program_id(2)\n    batch = tl.num_programs(0)\n"
                "    pid_lin = (b * tl.num_programs(1) + r) * tl.num_programs(2) + split\n"
                "    tl.store(dbg_rows_ptr + pid_lin * 2, _now(split))\n")
    text = _sub(text, "    store_row_partial(rows_f + cell * _ROW_FIELDS, rows_i + cell, v0, v1, v2, v3, idx)\n",
                "    store_row_partial(rows_f + cell * _ROW_FIELDS, rows_i + cell, v0, v1, v2, v3, idx)\n"
                "    tl.store(dbg_rows_ptr + pid_lin * 2 + 1, _now((v1 + v3).to(tl.int32) + idx))\n")
    text = _sub(text, "        row_lanes = tl.arange(0, ROW_BLOCK)\n        _masses, _race_f, _race_i, record_f, record_i",
                "        row_lanes = tl.arange(0, ROW_BLOCK)\n"
                "        tl.store(dbg_last_ptr + b * 8 + 0, _now(tl.sum(best, axis=0) + tl.sum(merged_s, axis=0).to(tl.int32)))\n"
                "        _masses, _race_f, _race_i, record_f, record_i")
    text = _sub(text, "        if MODE != MODE_GREEDY:\n            state = WALKED\n",
                "        tl.store(dbg_last_ptr + b * 8 + 1, _now(final + place))\n"
                "        if MODE != MODE_GREEDY:\n            state = WALKED\n")
    text = _sub(text, "    pid = tl.program_id(0)\n    first = pid < batch * RACE_SPLITS\n",
                "    pid = tl.program_id(0)\n    tl.store(dbg_fin_ptr + pid * 3, _now(pid))\n"
                "    first = pid < batch * RACE_SPLITS\n")
    return text.rstrip("\n") + "\n    tl.store(dbg_fin_ptr + pid * 3 + 2, _now(job + race.to(tl.int32)))\n"


def masses_signature(text: str) -> str:
    """The masses part's signature with the probe pointer its last program stamps through."""
    text = _sub(text, "                 num_draft_ptr, temperature_ptr, seed_ptr, position_ptr, V, N, ROW_SPLITS, RACE_SPLITS, CHUNK,\n"
                      "                 MODE: tl.constexpr, DRAFT: tl.constexpr, TARGET_PROBS: tl.constexpr,\n"
                      "                 WITHOUT_REPLACEMENT: tl.constexpr, BLOCK: tl.constexpr, NODE_BLOCK: tl.constexpr,\n"
                      "                 ROW_BLOCK: tl.constexpr, S_BLOCK: tl.constexpr, CANDIDATES: tl.constexpr):",
                "                 num_draft_ptr, temperature_ptr, seed_ptr, position_ptr, V, N, ROW_SPLITS, RACE_SPLITS, CHUNK,\n"
                "                 dbg_last_ptr,\n"
                "                 MODE: tl.constexpr, DRAFT: tl.constexpr, TARGET_PROBS: tl.constexpr,\n"
                "                 WITHOUT_REPLACEMENT: tl.constexpr, BLOCK: tl.constexpr, NODE_BLOCK: tl.constexpr,\n"
                "                 ROW_BLOCK: tl.constexpr, S_BLOCK: tl.constexpr, CANDIDATES: tl.constexpr):")
    return text


def main() -> None:
    text = common_probes(SOURCE.read_text())
    text = masses_signature(text)  # and the masses' last program's probes
    text = _sub(text, "    if last_to_arrive(counters_ptr, b, RACE_SPLITS):\n        t_at_nodes, d_at_nodes = _values_at_nodes(",
                "    if last_to_arrive(counters_ptr, b, RACE_SPLITS):\n"
                "        tl.store(dbg_last_ptr + b * 8 + 2, _now(split))\n"
                "        t_at_nodes, d_at_nodes = _values_at_nodes(")
    text = _sub(text, "        state = RACING\n        if CANDIDATES:",
                "        tl.store(dbg_last_ptr + b * 8 + 3, _now(final + place + length))\n"
                "        token = -2\n"
                "        state = RACING\n        if CANDIDATES:")
    text = _sub(text, "                    state = RACED\n        publish(record_i + 4, state)\n",
                "                    state = RACED\n"
                "        tl.store(dbg_last_ptr + b * 8 + 4, _now(token + state))\n"
                "        publish(record_i + 4, state)\n"
                "        tl.store(dbg_last_ptr + b * 8 + 5, _now(state))\n")
    # finish kernel: start, role known, end; the racing programs' end of wait
    text = _sub(text, "        race = tl.load(record_i + 4, volatile=True) == RACING  # RACED: the race ran from candidates\n",
                "        race = tl.load(record_i + 4, volatile=True) == RACING  # RACED: the race ran from candidates\n"
                "        tl.atomic_min(dbg_last_ptr + b * 8 + 6, _now(race.to(tl.int32)))\n")
    text = _sub(text, "    if first & (state == MASSES):\n        _masses_part(",
                "    tl.store(dbg_fin_ptr + pid * 3 + 1, _now(job + state))\n"
                "    if first & (state == MASSES):\n        _masses_part(")
    text = _sub(text, "                     ROW_SPLITS, RACE_SPLITS, CHUNK, MODE, DRAFT, TARGET_PROBS, WITHOUT_REPLACEMENT, BLOCK,\n"
                      "                     NODE_BLOCK, ROW_BLOCK, S_BLOCK, CANDIDATES)\n",
                "                     ROW_SPLITS, RACE_SPLITS, CHUNK, dbg_last_ptr, MODE, DRAFT, TARGET_PROBS, WITHOUT_REPLACEMENT,\n"
                "                     BLOCK, NODE_BLOCK, ROW_BLOCK, S_BLOCK, CANDIDATES)\n")
    Path(sys.argv[1]).write_text(text)


if __name__ == "__main__":
    main()
