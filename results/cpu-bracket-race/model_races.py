"""A numpy model of the bracket race (specbench/kernels/bracket_race.py) on the benchmark's rows: which share of the
stop rows' races a level's bracket decides, and, for the races it leaves open, what keeps them open.

    python3 results/cpu-bracket-race/model_races.py [--vocab 128256] [--rows 24] [--draws 20] [--top-p 0.95] [--loose]

The rows are those ``bench.make_inputs`` gives a stop row at L = 3 (the inputs ``specbench kernels`` times): at a
rejected slot the target and the draft logits are independent N(0, 1) rows, and a bonus row is an N(0, 1) target row.
Each row's windows after each level come from the numpy model of the levels (``model_levels.finish``, 64 parts a
level, distances in eighths of a nat; ``--loose``: the first level's bounds as the kernel took them before
2026-12-02, one part wider on these rows); the bracket then follows the kernel's docstring: the kept mass S in
``[T - 1e-4 M, min(T + c, M) + 1e-4 M]`` (``c`` the mass at the window's start), tokens surely kept below the window,
undecided in it, cut past it; each token's race weight at its least and largest (the residual ``p' - q'`` from draft
logits truncated the same way, or from draft probabilities as given; ``p`` for the bonus race); the race decided where
the best least ratio ``w / E`` is positive and clears every other token's largest by 1e-4. ``E`` are fresh
exponentials (``--draws`` sets of them a row), so the shares are the race's law, not the kernel's stream.

The open races are then re-judged with one source of doubt removed at a time: the target's S known (its kept set
still undecided in the window), the target's kept set known (S still bracketed), the draft side known (the residual's
``q'`` exact), which says what keeps a race open.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "h200-histogram"))

from model_levels import finish

SLACK = 1e-4  # BRACKET_SLACK, and histogram.SLACK on the cutoff's own mass
MARGIN = 1e-4  # bracket_race.RACE_MARGIN


class Side:
    """One row's truncation as a level's bracket sees it: masses relative to the row's largest value."""

    def __init__(self, z: np.ndarray, top_p: float, level: int, loose: bool):
        z = z.astype(np.float32)
        m = z.max()
        self.p = np.exp(z - m).astype(np.float64)
        total = self.p.sum()
        target = top_p * total
        windows: list[tuple[float, float]] = []
        finish(z, top_p, 1e-5, windows=windows, loose=loose)
        order = np.argsort(-self.p, kind="stable")
        before = np.cumsum(self.p[order]) - self.p[order]
        self.kept = np.zeros(len(z), dtype=bool)
        self.kept[order[before < target]] = True  # the smallest prefix whose mass reaches top_p of the row's
        self.s_true = self.p[self.kept].sum()
        self.usable = len(windows) >= level
        if not self.usable:  # (the model's search ended before this level: no bracket)
            return
        lo, hi = windows[level - 1]
        distance = 8.0 * (m - z)
        self.sure = distance < lo
        self.maybe = (distance >= lo) & (distance < hi)
        cut = np.exp(-lo / 8.0) * (1 + SLACK)
        self.s_lo = target - SLACK * total
        self.s_hi = min(target + cut, total) + SLACK * total

    def bounds(self, known_s: bool = False, known_kept: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Each token's truncated probability p' at its least and largest over the bracket."""
        s_lo, s_hi = (self.s_true, self.s_true) if known_s else (self.s_lo, self.s_hi)
        sure = self.kept if known_kept else self.sure
        possible = self.kept if known_kept else (self.sure | self.maybe)
        return np.where(sure, self.p / s_hi, 0.0), np.where(possible, self.p / s_lo, 0.0)


def decided(low: np.ndarray, high: np.ndarray, e: np.ndarray) -> bool:
    least, largest = low / e, high / e
    best = int(np.argmax(least))
    if least[best] <= 0:
        return False
    largest[best] = -np.inf
    return bool(least[best] > largest.max() * (1 + MARGIN))


def residual(target: Side, draft: Side | np.ndarray, **known) -> tuple[np.ndarray, np.ndarray]:
    p_lo, p_hi = target.bounds(**{k: v for k, v in known.items() if k != "known_draft"})
    if isinstance(draft, np.ndarray):  # draft probabilities, as given
        q_lo = q_hi = draft
    elif known.get("known_draft"):
        q_lo = q_hi = np.where(draft.kept, draft.p / draft.s_true, 0.0)
    else:
        q_lo, q_hi = draft.bounds()
    return np.maximum(p_lo - q_hi, 0.0), np.maximum(p_hi - q_lo, 0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", type=int, default=128256)
    parser.add_argument("--rows", type=int, default=24)
    parser.add_argument("--draws", type=int, default=20)
    parser.add_argument("--top-p", type=float, default=0.95)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--loose", action="store_true", help="the first level's bounds before 2026-12-02")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    doubts = {"target S known": {"known_s": True}, "target kept set known": {"known_kept": True},
              "draft side known": {"known_draft": True}}
    for level in (1, 2):
        counts: dict[str, list[int]] = {}
        for _ in range(args.rows):
            target = Side(rng.standard_normal(args.vocab), args.top_p, level, args.loose)
            draft_z = rng.standard_normal(args.vocab)
            draft = Side(draft_z, args.top_p, level, args.loose)
            probs = np.exp(draft_z - draft_z.max())
            probs /= probs.sum()
            if not (target.usable and draft.usable):
                counts.setdefault("rows without a bracket", [0, 0])[0] += 1
                continue
            for _ in range(args.draws):
                e = rng.exponential(size=args.vocab)
                drafts = {"bonus": None, "residual, draft probs": probs, "residual, draft logits": draft}
                for name, given in drafts.items():
                    won = decided(*(target.bounds() if given is None else residual(target, given)), e)
                    tally = counts.setdefault(name, [0, 0])
                    tally[0] += won
                    tally[1] += 1
                    if won or given is None:
                        continue
                    for doubt, known in doubts.items():
                        if doubt == "draft side known" and given is probs:  # (probabilities are exact already)
                            continue
                        again = residual(target, given, **known)
                        tally = counts.setdefault(f"  {name}, open: decided with the {doubt}", [0, 0])
                        tally[0] += decided(*again, e)
                        tally[1] += 1
        rule = "the first level's bounds before 2026-12-02" if args.loose else "the first level's bounds now"
        print(f"after level {level} (V = {args.vocab}, top_p {args.top_p}, {args.rows} rows x {args.draws} draws, "
              f"{rule}):")
        for name, (won, total) in counts.items():
            print(f"  {name}: {won} of {total} decided ({won / max(total, 1):.1%})")


if __name__ == "__main__":
    main()
