"""Issue 24, both children of a place rejected: how often the mass R1 bracketed inside the statistics pass would
decide the second child's test and the race after both, without the pass that sums R1 (results/kernels-notes.md,
"Issue 24: the floor under both children rejected"). A float64 model, no kernel.

The rule (verification.py, "Trees"): after the first child x1 (drawn from q1) is rejected, the second child x2 is
accepted iff u q2(x2) R1 < r1(x2), with r1 = max(p - q1, 0) and R1 = sum r1; when it is rejected too, the token is
the race argmax_y r2(y) / E_y over r2 = max(r1 - R1 q2, 0). r1 > 0 exactly where d(y) = z_p(y) - z_q1(y) > c, with
c = LSE(z_p) - LSE(z_q1), known only once the row's statistics are. The bracket: thresholds e_0 < ... < e_T, w apart,
centred on an estimate of c from the row's first chunk (CHUNK tokens, what a one-program pass has read before its
second chunk), and per threshold the sums of p and q1 over d >= e_j (in a kernel: exp(z - m) sums rescaled with the
running maxima, two per threshold a lane). At the pass's end, with e_j <= c < e_(j+1):
R1 = (A_(j+1) - B_(j+1)) + (the part of bucket j above c), and that part lies in [0, (1 - exp(-(e_(j+1) - c))) A_j'],
A_j' the bucket's p-mass (a token there has q1 = p exp(-(d - c)... ) >= p exp(-w)). So R1 is in [lo, hi]; c outside
the thresholds leaves it open (the exact pass, as today).

Rows: "planned" are `specbench kernels --tree 2x2`'s (tree_inputs.py: target N(0, 1) logits with both children's
tokens at -1e4, their draft rows independent N(0, 1) logits), "natural" draft rows near the target (z_q = z_p +
sigma N(0, 1)) with x1 ~ q1 and x2 ~ q2 drawn and the requests whose first child is rejected kept, and "peaked" the
same with three target logits raised by 6 to 12 at random places (where the first chunk misjudges c).

    PYTHONPATH=. python results/cpu-tree-mass-bracket/model.py
"""

import numpy as np

V = 128256  # Llama 3
CHUNK = 8192  # the one-program walk's block (launch.SEQUENTIAL_PROBABILISTIC_SHAPE)
REQUESTS = 400
CANDIDATES = 512  # about what the split path keeps at B = 1 (two a slice)


def lse(z: np.ndarray) -> float:
    m = z.max()
    return float(m + np.log(np.exp(z - m).sum()))


def softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max())
    return e / e.sum()


def request(rng: np.random.Generator, rows: str, sigma: float):
    """(z_p, z_q1, z_q2, x1, x2) of one request whose first child is rejected, or None (natural rows, accepted)."""
    zp = rng.standard_normal(V)
    if rows == "planned":
        zq1, zq2 = rng.standard_normal(V), rng.standard_normal(V)
        top = int(zp.argmax())
        x1, x2 = (top + rng.integers(1, V, size=2)) % V
        zp[[x1, x2]] = -1e4
        return zp, zq1, zq2, int(x1), int(x2)
    if rows == "peaked":  # a few tokens far above the rest, anywhere in the row
        zp[rng.integers(0, V, size=3)] += rng.uniform(6.0, 12.0, size=3)
    zq1, zq2 = zp + sigma * rng.standard_normal(V), zp + sigma * rng.standard_normal(V)
    p, q1 = softmax(zp), softmax(zq1)
    x1 = int(rng.choice(V, p=q1))
    if rng.random() * q1[x1] < p[x1]:
        return None  # the first child accepted: not this case
    x2 = int(rng.choice(V, p=softmax(zq2)))
    return zp, zq1, zq2, x1, x2


def bracket(zp, zq1, p, threshold_count: int, width: float):
    """[lo, hi] around R1 from the thresholds (module docstring), or None where c falls outside them."""
    d = zp - zq1
    c = lse(zp) - lse(zq1)
    estimate = lse(zp[:CHUNK]) - lse(zq1[:CHUNK])
    edges = estimate + (np.arange(threshold_count + 1) - threshold_count / 2) * width
    j = int(np.searchsorted(edges, c, side="right")) - 1
    if j < 0 or j >= threshold_count:
        return None
    q1 = softmax(zq1)
    upper = d >= edges[j + 1]
    lo = float((p[upper] - q1[upper]).sum())
    bucket = (d >= edges[j]) & ~upper
    hi = lo + (1.0 - np.exp(-(edges[j + 1] - c))) * float(p[bucket].sum())
    return lo, hi


def lowest_threshold(zp, zq1, threshold_count: int, width: float) -> float:
    # e_0 (bracket's thresholds)
    estimate = lse(zp[:CHUNK]) - lse(zq1[:CHUNK])
    return estimate - threshold_count / 2 * width


def main() -> None:
    rng = np.random.default_rng(20261202)
    for rows, sigma in (("planned", 0.0), ("natural", 0.5), ("natural", 1.0), ("peaked", 0.5)):
        cases = []
        while len(cases) < REQUESTS:
            drawn = request(rng, rows, sigma)
            if drawn is not None:
                cases.append(drawn)
        for threshold_count, width in ((8, 0.25), (8, 0.125), (16, 0.125), (16, 0.0625)):
            outside = test_open = race_open = races = candidates_open = 0
            for zp, zq1, zq2, x1, x2 in cases:
                p, q1, q2 = softmax(zp), softmax(zq1), softmax(zq2)
                r1 = np.maximum(p - q1, 0.0)
                mass = float(r1.sum())
                bounds = bracket(zp, zq1, p, threshold_count, width)
                if bounds is None:
                    outside += 1
                    continue
                lo, hi = bounds
                assert lo <= mass <= hi * (1 + 1e-12) + 1e-15, (lo, mass, hi)
                u = rng.random()
                accepted = u * q2[x2] * mass < r1[x2]
                if (u * q2[x2] * hi < r1[x2]) != (u * q2[x2] * lo < r1[x2]):
                    test_open += 1
                    continue
                if accepted:
                    continue
                races += 1
                e = -np.log(rng.random(V))
                low = np.maximum(r1 - hi * q2, 0.0) / e
                high = np.maximum(r1 - lo * q2, 0.0) / e
                winner = int(low.argmax())
                exact = int((np.maximum(r1 - mass * q2, 0.0) / e).argmax())
                rival = np.delete(high, winner).max()
                if not low[winner] > rival:
                    race_open += 1
                else:
                    assert winner == exact
                # the race from candidates the statistics pass could keep: by a bound on r1 / E that holds for any
                # c at or above the lowest threshold, p (1 - exp(-(d - e_0)))+ / E, in the pass's own scale (a
                # common factor: the order is the final one); the CANDIDATES largest kept, every other token's
                # bound its largest
                d = zp - zq1
                edge = lowest_threshold(zp, zq1, threshold_count, width)
                with np.errstate(over="ignore"):  # exp of a large argument: inf, a bound of 0 there
                    bound = p * np.maximum(1.0 - np.exp(-(d - edge)), 0.0) / e
                kept = np.argpartition(-bound, CANDIDATES)[:CANDIDATES]
                dropped = np.delete(bound, kept).max()
                best = kept[int(low[kept].argmax())]
                others = max(np.delete(high[kept], int(np.nonzero(kept == best)[0][0])).max(), dropped)
                if not low[best] > others:
                    candidates_open += 1
                else:
                    assert best == exact
            inside = REQUESTS - outside
            print(f"{rows:>8} sigma {sigma:<4} {threshold_count:>2} thresholds {width:<6} apart: c outside "
                  f"{outside / REQUESTS:6.1%}; of the rest, test open {test_open / max(inside, 1):6.1%}, races "
                  f"{races} of which open {race_open / max(races, 1):6.1%} (from {CANDIDATES} candidates kept in the "
                  f"statistics pass {candidates_open / max(races, 1):6.1%})")


if __name__ == "__main__":
    main()
