"""How often a top_p race could be decided from the first histogram level's bracket alone (issue 20's lead).

    python results/cpu-topp-bracket-race/simulate.py [--seeds N] > results/cpu-topp-bracket-race/simulate.txt

float64, CPU, on the rows `specbench kernels` builds (`bench.make_inputs`, draft logits, top_p 0.95 alone): B = 8
K = 3 Llama 3 rows and B = 64 K = 4 Qwen3 rows at L = 3, and Qwen3 at L = 5 (every draft accepted: the bonus race).
For each row, the first level of the split histogram search (`specbench/kernels/histogram.py`) as it bounds the
cutoff from counts alone: a token's distance 8 (m - z) in eighths of a nat, the window [0, 256) cut into BINS parts
(the last part also taking every token further), each part's mass bounded by its count times the masses at its
edges, the mass before a part bounded from the left and (at the first level) from M less the mass from the part on,
and the parts that may hold the cutoff kept (a token, the mass before possibly <= T = top_p M, the mass through
possibly >= T). Tokens in earlier parts are surely kept, in later parts surely cut, in the kept parts uncertain. The
exact kept set (the contract: the shortest prefix of the row's order whose mass reaches T) is checked to lie inside
that bracket. No slack for float32 rounding: the kernel's bounds are wider by it, which this leaves out.

Two races, each with its own exponentials (numpy's, one per token; the kernels' stream has the same law):
- the bonus race over p' (a row's p on its kept set, renormalised): S_p is a common factor, so the winner is
  decided from the bracket when the best p / E among surely kept and uncertain tokens is a surely kept token;
- the residual race max(p' - q', 0) / E (target and draft rows of one slot, both truncated): each token's score
  bounded over S_p and S_q in their ranges (S within [max(T, sure), min(sure + uncertain, T + the largest uncertain
  mass)], the sums a pass over the row can take exactly) and over the uncertain tokens' membership; decided when
  the best lower bound beats every other token's upper bound.
Each request runs the race its step runs (`planned_accepted`): the residual race at its first rejected slot, or the
bonus race at slot K. The benchmark's draft row there is independent of the target's ("independent"); "close"
replaces it by the target's logits plus N(0, 1) noise, a draft near the target (this script's own, not a
benchmark input: `--inputs natural` refuses truncation). Printed per case and BINS (256: the
launcher under Triton 3.8+; 64: before): requests, the mean share of a row's mass that is uncertain, and the races
not decided.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from specbench import bench, models
from specbench.scenarios import make_profile

TOP_P = 0.95


def bracket(z: np.ndarray, bins: int) -> tuple[np.ndarray, float, float]:
    """(status per token: 0 surely kept, 1 uncertain, 2 surely cut, 3 no mass; M; T) of one row's first level."""
    finite = np.isfinite(z)
    m = z[finite].max()
    w = np.where(finite, np.exp(z - m), 0.0)
    total = w.sum()
    target = TOP_P * total
    width = 256 / bins  # units (eighths of a nat) a part
    part = np.minimum(np.floor(8 * (m - z[finite]) / width), bins - 1).astype(np.int64)
    counts = np.bincount(part, minlength=bins).astype(np.float64)
    edges = np.exp(-np.arange(bins + 1) * width / 8)
    hi = counts * edges[:-1]
    lo = counts * edges[1:]
    lo[-1] = 0.0  # the last part takes every token further
    before_lo = np.maximum(np.concatenate([[0.0], np.cumsum(lo)[:-1]]), total - np.cumsum(hi[::-1])[::-1])
    through_hi = np.minimum(np.cumsum(hi), total - np.concatenate([np.cumsum(lo[::-1])[::-1][1:], [0.0]]))
    may_hold = (counts > 0) & (before_lo <= target) & (through_hi >= target)
    kept_parts = np.flatnonzero(may_hold)
    first, last = kept_parts[0], kept_parts[-1]
    status = np.full(z.shape, 3, dtype=np.int8)
    status[finite] = np.where(part < first, 0, np.where(part <= last, 1, 2))
    return status, total, target


def kept(z: np.ndarray) -> np.ndarray:
    """The contract's kept set: the shortest prefix of the row's order (value, then id) whose mass reaches T."""
    finite = np.isfinite(z)
    m = z[finite].max()
    w = np.where(finite, np.exp(z - m), 0.0)
    order = np.lexsort((np.arange(z.size), -z))
    cumulative = np.cumsum(w[order])
    stop = int(np.searchsorted(cumulative, TOP_P * cumulative[-1]))
    out = np.zeros(z.size, dtype=bool)
    out[order[: stop + 1]] = True
    return out


def s_range(w: np.ndarray, status: np.ndarray, target: float) -> tuple[float, float]:
    sure = w[status == 0].sum()
    uncertain = w[status == 1]
    return max(target, sure), min(sure + uncertain.sum(), target + (uncertain.max() if uncertain.size else 0.0))


def races(target_row: np.ndarray, draft_row: np.ndarray | None, bins: int, rng: np.random.Generator) -> dict:
    st_p, total_p, t_p = bracket(target_row, bins)
    keep_p = kept(target_row)
    assert not (keep_p & (st_p == 2)).any() and (keep_p | (st_p != 0)).all(), "the cutoff outside the bracket"
    w_p = np.exp(target_row - target_row.max())
    out = {"uncertain_mass": w_p[st_p == 1].sum() / total_p}
    e = rng.exponential(size=target_row.size)
    ratio = np.where(st_p <= 1, w_p / e, -1.0)
    out["bonus_undecided"] = bool(st_p[int(np.argmax(ratio))] != 0)
    if draft_row is None:
        return out
    st_q, _total_q, t_q = bracket(draft_row, bins)
    w_q = np.exp(draft_row - draft_row.max())
    sp_lo, sp_hi = s_range(w_p, st_p, t_p)
    sq_lo, sq_hi = s_range(w_q, st_q, t_q)
    e = rng.exponential(size=target_row.size)
    upper = np.where(st_p <= 1, w_p / sp_lo - np.where(st_q == 0, w_q / sq_hi, 0.0), 0.0)
    lower = np.where(st_p == 0, w_p / sp_hi - np.where(st_q <= 1, w_q / sq_lo, 0.0), 0.0)
    upper, lower = np.maximum(upper, 0.0) / e, np.maximum(lower, 0.0) / e
    best = int(np.argmax(lower))
    others = upper.copy()
    others[best] = -1.0
    out["residual_undecided"] = bool(lower[best] <= 0.0 or lower[best] <= others.max())
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=8, help="batches a case (seeds of make_inputs; Llama 3: 4x)")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    cases = (("llama3", 8, 3, 3.0, "independent", args.seeds * 4),
             ("qwen3", 64, 4, 3.0, "independent", args.seeds), ("qwen3", 64, 4, 3.0, "close", args.seeds),
             ("qwen3", 64, 4, 5.0, "independent", args.seeds))
    for model, batch, k, length, kind, seeds in cases:
        preset = models.resolve_model(model)
        vocab = preset.vocab_size
        profile = make_profile(k, acceptance_length=length, name=f"{length:g}")
        (case,) = bench.plan_cases(modes=["probabilistic"], batch_sizes=[batch],
                                   vocabularies=[(preset.name, preset.vocab_size)], profiles=[profile],
                                   dtypes=["float32"], drafts=["logits"], targets=["logits"], top_p=TOP_P)
        found = {256: [], 64: []}
        for seed in range(seeds):
            inputs = bench.make_inputs(case, "cpu", seed=seed)
            stops = inputs.planned_accepted.numpy()
            temperatures = bench.sampling_params(case).temperatures.double().numpy()
            target = inputs.target_logits.double().numpy()
            draft = inputs.draft_logits.double().numpy()
            for b in range(batch):
                slot, inv_t = int(stops[b]), 1.0 / temperatures[b]
                draft_row = draft[b, slot] * inv_t if slot < k else None
                if kind == "close" and draft_row is not None:  # a draft near the target: its logits plus N(0, 1)
                    draft_row = (target[b, slot] + rng.standard_normal(vocab)) * inv_t
                for bins, rows in found.items():
                    rows.append(races(target[b, slot] * inv_t, draft_row, bins, rng))
        for bins, rows in found.items():
            residual = [f["residual_undecided"] for f in rows if "residual_undecided" in f]
            bonus = [f["bonus_undecided"] for f in rows if "residual_undecided" not in f]
            masses = [f["uncertain_mass"] for f in rows]
            print(f"{model} {kind} B={batch} K={k} V={preset.vocab_size} L={length:g} bins={bins}, {seeds} "
                  f"batches: {len(rows)} requests; uncertain mass {np.mean(masses):.4f} of a row (max "
                  f"{np.max(masses):.4f}); residual races undecided {sum(residual)} of {len(residual)}; bonus races "
                  f"undecided {sum(bonus)} of {len(bonus)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
