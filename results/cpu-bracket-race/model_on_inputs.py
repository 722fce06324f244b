"""The bracket race model (model_races.py) on the very stop rows ``share.py --vocab 16384 --batch 16`` gives the
kernels (``bench.make_inputs``, draft logits, top_p 0.95, L = 3, seed 0): each request's share of races decided
after level 1, over 50 sets of exponentials, with the first level's bounds before 2026-12-02 and now.

    python3 results/cpu-bracket-race/model_on_inputs.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from model_races import Side, decided, residual

from specbench import bench
from specbench.scenarios import make_profile

BATCH, K, VOCAB, DRAWS = 16, 3, 16384, 50


def main() -> None:
    profile = make_profile(K, acceptance_length=3.0, name="3")
    (case,) = bench.plan_cases(modes=["probabilistic"], batch_sizes=[BATCH], vocabularies=[(None, VOCAB)],
                               profiles=[profile], drafts=["logits"], top_p=0.95)
    inputs = bench.make_inputs(case, "cpu", seed=0)
    rng = np.random.default_rng(0)
    for loose in (True, False):
        shares: dict[str, list[float]] = {}
        for b in range(BATCH):
            t = int(inputs.planned_accepted[b])  # the stop row: the first rejected slot, or K (the bonus race)
            target = Side(inputs.target_logits[b, t].numpy(), 0.95, 1, loose)
            kind = "bonus" if t == K else "residual, draft logits"
            draft = None if t == K else Side(inputs.draft_logits[b, t].numpy(), 0.95, 1, loose)
            bounds = target.bounds() if draft is None else residual(target, draft)
            won = sum(decided(*bounds, rng.exponential(size=VOCAB)) for _ in range(DRAWS))
            shares.setdefault(kind, []).append(won / DRAWS)
        rule = "before 2026-12-02" if loose else "now"
        print(f"first level's bounds {rule}: " + "; ".join(
            f"{kind}: {len(values)} stops, {np.mean(values):.1%} of races decided after level 1 (per stop: "
            f"{', '.join(f'{v:.2f}' for v in values)})" for kind, values in shares.items()))


if __name__ == "__main__":
    main()
