"""How many tokens of a row the split histogram path's last level counts inside its window (the launcher counts
those by integer atomics on the cell's counts, launch.HISTOGRAM_ATOMIC), on the numpy model of its levels
(``results/h200-histogram/model_levels.py``), for rows like ``specbench.bench.make_inputs``'s: N(0, 1) logits of
151,936 tokens (its target rows, and its draft rows with draft logits), eight seeds, top_p 0.9 and 0.95. Per
(parts, levels): the median and largest share of the row inside each level's window, the tokens inside the last
level's window, and how the rows finish (list and the most candidates, or overflow past 1,024).

    python3 results/cpu-histogram-levels/last_window.py
"""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "h200-histogram"))

from model_levels import finish

VOCAB = 151936


def main() -> None:
    rows = [np.random.default_rng(seed).standard_normal(VOCAB) for seed in range(8)]
    for bins, levels in ((64, 3), (128, 3), (128, 2), (256, 2)):
        for top_p in (0.9, 0.95):
            shares, finished = [], []
            for z in rows:
                row_shares = []
                finished.append(finish(z, top_p, 1e-5, bins=bins, levels=levels, shares=row_shares))
                shares.append(row_shares)
            shares = np.array(shares)  # [rows, levels + 1]: each level's window, then the candidates' range
            last = shares[:, levels - 1] * VOCAB
            kinds = sorted({kind for kind, _n in finished})
            most = max(n for _kind, n in finished)
            print(f"{bins} parts, {levels} levels, top_p {top_p}: windows "
                  + ", ".join(f"level {j + 1} {np.median(shares[:, j]):.2%} (at most {shares[:, j].max():.2%})"
                              for j in range(levels))
                  + f"; last level's window {int(np.median(last)):,} tokens (at most {int(last.max()):,});"
                  + f" {'/'.join(kinds)}, at most {most} candidates")


if __name__ == "__main__":
    main()
