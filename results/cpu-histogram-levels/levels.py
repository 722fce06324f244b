"""How the split histogram path would finish with more parts a level and fewer levels, on the numpy model of its
levels (``results/h200-histogram/model_levels.py``: bounds as the kernel takes them), rows of 151,936 tokens from
the model's distributions, top_p 0.9, 0.95 and 0.99. For each (parts, levels): per distribution, how each row finishes
(``list`` and its candidates, ``overflow`` past the list's 1,024, ``open part``, ``no part``).

    python3 results/cpu-histogram-levels/levels.py
"""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "h200-histogram"))

from model_levels import finish

VOCAB = 151936


def main() -> None:
    rng = np.random.default_rng(1)
    rows = {
        "N(0, 1)": rng.standard_normal(VOCAB),
        "N(0, 16)": rng.standard_normal(VOCAB) * 4,
        "N(0, 64)": rng.standard_normal(VOCAB) * 8,
        "Gumbel, scale 2": rng.gumbel(size=VOCAB) * 2,
        "Zipf-like": -1.1 * np.log(np.arange(1, VOCAB + 1)) + rng.standard_normal(VOCAB) * 0.5,
        "50 tokens near 15, the rest N(0, 9)": np.concatenate([rng.standard_normal(50) * 2 + 15,
                                                             rng.standard_normal(VOCAB - 50) * 3]),
        "U(-1, 1)": rng.uniform(-1, 1, VOCAB),
    }
    for bins, levels in ((64, 3), (64, 2), (128, 2), (256, 2), (512, 2), (1024, 1), (4096, 1)):
        print(f"{bins} parts, {levels} levels")
        for name, z in rows.items():
            finished = [finish(z, top_p, 1e-5, bins=bins, levels=levels) for top_p in (0.9, 0.95, 0.99)]
            print(f"  {name}: " + ", ".join(f"{kind} {n}" for kind, n in finished))


if __name__ == "__main__":
    main()
