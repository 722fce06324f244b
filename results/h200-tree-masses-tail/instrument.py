"""Write an instrumented copy of specbench/kernels/tree.py (timeline probes, %globaltimer) to a module path: the
probes of results/h200-tree-timeline/instrument.py at this folder's code (the masses' last program stamps its
arrival, the end of its own race from candidates, the publication of the state; slot 3 is the end of the part
that writes the tokens without the walk, before the walk resumes where it must).

    python results/h200-tree-timeline/timeline.py --instrument results/h200-tree-masses-tail/instrument.py

The copy's split-path kernels take three more pointers after CHUNK: dbg_rows_ptr (int64, two stamps per rows
program: start, arrival), dbg_fin_ptr (three per finish program: start, role known, end), dbg_last_ptr (eight per
request: rows' last program after the merge and after the walk; the masses' last program after its arrival,
after the resumed walk, after the race from candidates, after publishing; the first racing program's end of
wait). Each probe reads %globaltimer after a value it depends on, so it cannot run before that value exists.
The edits are anchored on exact lines of the tree.py they were written for; a line not found stops the script.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "h200-tree-timeline"))

from instrument import SOURCE, _sub, common_probes, masses_signature


def main() -> None:
    text = common_probes(SOURCE.read_text())
    text = masses_signature(text)  # and the masses' last program's probes
    text = _sub(text, "        if last_to_arrive(counters_ptr, b, RACE_SPLITS):\n            splits = tl.arange(0, S_BLOCK)\n",
                "        if last_to_arrive(counters_ptr, b, RACE_SPLITS):\n"
                "            tl.store(dbg_last_ptr + b * 8 + 2, _now(split))\n"
                "            splits = tl.arange(0, S_BLOCK)\n")
    text = _sub(text, "            if raced <= 0:  # the walk resumed",
                "            tl.store(dbg_last_ptr + b * 8 + 3, _now(raced))\n"
                "            if raced <= 0:  # the walk resumed")
    text = _sub(text, "            publish(record_i + 4, tl.where(raced > 0, RACED, RACING))\n",
                "            tl.store(dbg_last_ptr + b * 8 + 4, _now(raced))\n"
                "            publish(record_i + 4, tl.where(raced > 0, RACED, RACING))\n"
                "            tl.store(dbg_last_ptr + b * 8 + 5, _now(raced))\n")
    # finish kernel: start, role known, end; the racing programs' end of wait
    text = _sub(text, "            race = spin_until(record_i + 4, RACING) == RACING\n",
                "            race = spin_until(record_i + 4, RACING) == RACING\n"
                "            tl.atomic_min(dbg_last_ptr + b * 8 + 6, _now(race.to(tl.int32)))\n")
    text = _sub(text, "    if race:\n        _race_part(",
                "    tl.store(dbg_fin_ptr + pid * 3 + 1, _now(job + race.to(tl.int32)))\n"
                "    if race:\n        _race_part(")
    text = _sub(text, "                              position_ptr, V, N, ROW_SPLITS, RACE_SPLITS, CHUNK, MODE, DRAFT, TARGET_PROBS,\n",
                "                              position_ptr, V, N, ROW_SPLITS, RACE_SPLITS, CHUNK, dbg_last_ptr, MODE, DRAFT,\n"
                "                              TARGET_PROBS,\n")
    Path(sys.argv[1]).write_text(text)


if __name__ == "__main__":
    main()
