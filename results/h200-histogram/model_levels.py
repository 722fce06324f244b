"""A numpy model of the split histogram path's levels (specbench/kernels/histogram.py, logits), on the CPU: for
rows of 151936 tokens drawn from a few distributions and several top_p, how each row would finish (``list``
and its number of candidates, ``overflow`` past the list's 1024, ``open part``: the cutoff beyond the first
level's 32 nats, ``no part``) with 64 parts a level and three levels. Bounds as the kernel takes them (float64
here). ``--shares``: instead, the share of the row's tokens inside each level's window and inside the last one's
kept parts (the tokens a level's counts and the gather's list take). Usage: python3
results/h200-histogram/model_levels.py [--sum-slack 1e-5] [--top-p 0.9,0.999] [--shares]."""

import argparse

import numpy as np

PART_SLACK = 1e-4


def finish(z: np.ndarray, top_p: float, sum_slack: float, bins: int = 64, levels: int = 3, cap: int = 1024,
           shares: list[float] | None = None, windows: list[tuple[float, float]] | None = None,
           loose: bool = False):
    # (how the row finishes, its candidates or the level it stopped at); `shares` collects the share of the
    # row's tokens inside each level's window, then inside the candidates' range; `windows` each level's window
    # [lo, hi) after it, in eighths of a nat (results/cpu-bracket-race/model_races.py reads them); `loose`: the
    # first level's bounds as the kernel took them before 2026-12-02
    z = z.astype(np.float32)
    m = z.max()
    w = np.exp(z - m).astype(np.float32)
    total = float(w.sum(dtype=np.float64))
    target = top_p * total
    x = ((m - z) * np.float32(8)).astype(np.float32)  # distances in eighths of a nat
    lo, hi, width, before = 0.0, np.inf, 256.0 / bins, 0.0
    for level in range(levels):
        if shares is not None:
            shares.append(float(((x >= lo) & (x < hi)).mean()))
        if level == 0:
            part = np.minimum(x / width, bins - 1).astype(np.int64)
        else:
            part = ((x[(x >= lo) & (x < hi)] - lo) / width).astype(np.int64)
            before = float(w[x < lo].sum(dtype=np.float64))
        count = np.bincount(part, minlength=bins)[:bins]
        j = np.arange(bins)
        upper = count * np.exp(-(lo + j * width) / 8) * (1 + PART_SLACK)
        lower = count * np.exp(-(lo + (j + 1) * width) / 8) * (1 - PART_SLACK)
        if level == 0:
            lower[-1] = 0.0
        through_lo = before * (1 - sum_slack) + np.cumsum(lower)
        through_hi = before * (1 + sum_slack) + np.cumsum(upper)
        before_lo = through_lo - lower
        if level == 0 and loose:  # (the kernel's first level before 2026-12-02: the mass through a part as the
            # bound before it plus the part's largest mass, that bound taken from the tightened bound from below)
            before_hi = through_hi - upper
            before_lo = np.maximum(before_lo, total * (1 - sum_slack) - (upper.sum() - before_hi))
            through_hi = np.minimum(before_hi, total * (1 + sum_slack) - (lower.sum() - before_lo)) + upper
        elif level == 0:  # (M less the mass from the part on, at most, and after it, at least)
            before_lo = np.maximum(before_lo, total * (1 - sum_slack) - (upper.sum() - through_hi + upper))
            through_hi = np.minimum(through_hi, total * (1 + sum_slack) - (lower.sum() - through_lo))
        possible = np.nonzero((count > 0) & (before_lo <= target) & (through_hi >= target))[0]
        if len(possible) == 0:
            return "no part", level
        first, last = possible.min(), possible.max()
        if level == 0 and last == bins - 1:
            return "open part", level
        lo, hi = lo + first * width, lo + (last + 1) * width
        if windows is not None:
            windows.append((lo, hi))
        width = width * (1 << int(np.ceil(np.log2(last - first + 1)))) / bins
    candidates = int(((x >= lo) & (x < hi)).sum())
    if shares is not None:
        shares.append(candidates / len(x))
    return ("list" if candidates <= cap else "overflow"), candidates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sum-slack", type=float, default=1e-5)
    parser.add_argument("--top-p", default="0.1,0.5,0.9,0.95,0.99,0.999,0.9999")
    parser.add_argument("--shares", action="store_true", help="each level's share of the row's tokens in play")
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    vocab = 151936
    rows = {
        "N(0, 1)": lambda: rng.standard_normal(vocab),
        "N(0, 16)": lambda: rng.standard_normal(vocab) * 4,
        "N(0, 64)": lambda: rng.standard_normal(vocab) * 8,
        "Gumbel, scale 2": lambda: rng.gumbel(size=vocab) * 2,
        "Zipf-like": lambda: -1.1 * np.log(np.arange(1, vocab + 1)) + rng.standard_normal(vocab) * 0.5,
        "50 tokens near 15, the rest N(0, 9)": lambda: np.concatenate([rng.standard_normal(50) * 2 + 15,
                                                                     rng.standard_normal(vocab - 50) * 3]),
        "N(0, 1) rounded to bfloat16": lambda: (rng.standard_normal(vocab).astype(np.float32).view(np.uint32)
                                                & 0xFFFF0000).view(np.float32),
        "U(-1, 1)": lambda: rng.uniform(-1, 1, vocab),
    }
    tops = [float(t) for t in args.top_p.split(",")]
    for name, make in rows.items():
        z = make()
        if args.shares:
            for t in tops:
                shares: list[float] = []
                finish(z, t, args.sum_slack, shares=shares)
                print(f"{name}, top_p {t}: " + " / ".join(f"{share:.2%}" for share in shares))
            continue
        print(f"{name}: " + ", ".join(f"{t}: {kind} {n}" for t in tops for kind, n in [finish(z, t, args.sum_slack)]))


if __name__ == "__main__":
    main()
