"""How many block-wide counts the top-k path's two bisections take on the benchmark's rows (issue 20, B = 1 and 8).

A numpy model of ``cutoffs.top_k_from_groups`` (``_kth_largest_bound_from``, ``_bisect_down``, ``_shared_bits``):
the first bisection over the row's group maxima (stops once at most TOP_K_CAP_GROUPS groups are at or above its
bound), the second over the gathered tokens' values (stops once exactly k are, or at the k-th value), and the
bisection on ids where a tie at the k-th value is cut. Each count is one ``tl.sum`` over the program's block, a
reduction across its warps. The rows are ``specbench kernels``' inputs (``bench.make_inputs``), Llama 3, K = 3,
L = 3, top_k 50 + top_p 0.9, every row the prepass summarises (4 target rows a request; 3 draft rows more from
draft logits). The model's kept set is checked against the contract's (the k largest values, ties to the lowest id)
on every row.

    PYTHONPATH=. python results/cpu-prepass-search-steps/count_steps.py
"""

import numpy as np
import torch

from specbench import bench, models
from specbench.scenarios import make_profile

INT32_MIN = -(2**31)
GROUP = 32
CAP_GROUPS = 64  # launch.TOP_K_CAP_GROUPS
TOP_K = 50


def order_key(values: np.ndarray) -> np.ndarray:
    # float32 -> int32 in the values' order, as cutoffs._order_key32 (held in int64 here)
    bits = np.asarray(values, np.float32).view(np.int32).astype(np.int64)
    return np.where(bits >= 0, bits, bits ^ 0x7FFFFFFF)


def as_int32(value: int) -> int:
    return (value + 2**31) % 2**32 - 2**31


def shared_bits(high: int, guess: int) -> tuple[int, int]:
    # cutoffs._shared_bits: (start, first differing bit)
    below = (high ^ guess) & 0xFFFFFFFF
    for shift in (1, 2, 4, 8, 16):
        below |= below >> shift
    start = as_int32(((high ^ INT32_MIN) & ~below) ^ INT32_MIN)
    return start, below ^ (below >> 1)


class Counter:
    def __init__(self) -> None:
        self.counts = 0

    def count(self, mask: np.ndarray) -> int:
        self.counts += 1
        return int(mask.sum())


def bisect_down(keys, k, enough, c, count, bit, counter):
    while bit != 0 and count > enough:
        trial = c ^ as_int32(bit)
        at_least = counter.count(keys >= trial)
        if at_least >= k:
            c, count = trial, at_least
        bit >>= 1
    return c, count


def kth_largest_bound_from(keys, k, enough, high, near, far, counter):
    # cutoffs._kth_largest_bound_from (its two starts' counts are one packed sum: one count)
    entry = keys > INT32_MIN
    start_near, bit_near = shared_bits(high, near)
    start_far, bit_far = shared_bits(high, far)
    counter.counts += 1
    count_near = int(((keys >= start_near) & entry).sum())
    count_far = int(((keys >= start_far) & entry).sum())
    if count_near >= k:
        c, bit, count = start_near, bit_near, count_near
    elif count_far >= k:
        c, bit, count = start_far, bit_far, count_far
    else:
        c, bit, count = INT32_MIN, 0x80000000, count_far
    if count < k:
        count = counter.count(entry)
    return bisect_down(keys, k, enough, c, count, bit, counter)


def row_counts(row: np.ndarray) -> tuple[int, int, int]:
    """(counts of the first bisection, of the second, of the id bisection) for one row of logits."""
    vocab = row.size
    groups = -(-vocab // GROUP)
    values = np.full(groups * GROUP, -np.inf, np.float32)
    values[:vocab] = row
    by_group = values.reshape(groups, GROUP)
    keys = order_key(by_group.max(axis=1))
    top = int(keys.max())
    first, second = Counter(), Counter()
    c_groups, _ = kth_largest_bound_from(keys, TOP_K, CAP_GROUPS, top, top ^ 0x00400000, top ^ 0x02000000, first)
    gathered = np.nonzero(keys >= c_groups)[0]
    ids = (gathered[:, None] * GROUP + np.arange(GROUP)[None, :]).ravel()
    value_keys = order_key(by_group[gathered].ravel())
    c, _ = kth_largest_bound_from(value_keys, TOP_K, TOP_K, top, c_groups, as_int32(top ^ INT32_MIN), second)
    above = int((value_keys > c).sum())
    tie = value_keys == c
    id_counts = 31 if int(tie.sum()) > TOP_K - above else 0
    cut = np.sort(ids[tie])[TOP_K - above - 1] if id_counts else np.iinfo(np.int64).max
    kept = np.sort(ids[(value_keys > c) | (tie & (ids <= cut))])
    order = np.lexsort((np.arange(vocab), -row.astype(np.float64)))  # largest first, ties to the lowest id
    assert np.array_equal(kept, np.sort(order[:TOP_K])), "the model's kept set is not the contract's"
    return first.counts, second.counts, id_counts


def main() -> None:
    preset = models.resolve_model("llama3")
    profile = make_profile(3, acceptance_length=3.0, name="3")
    for draft in ("logits", "probs"):
        (case,) = bench.plan_cases(modes=["probabilistic"], batch_sizes=[64],
                                   vocabularies=[(preset.name, preset.vocab_size)], profiles=[profile],
                                   dtypes=["float32"], drafts=[draft], targets=["logits"], top_k=TOP_K, top_p=0.9,
                                   min_p=None, methods=["token"], tree=None)
        kwargs = bench.make_inputs(case, torch.device("cpu")).verify_kwargs()
        rows = [(b, kwargs["target_logits"][b, r].numpy()) for b in range(64) for r in range(4)]
        if draft == "logits":
            rows += [(b, kwargs["draft_logits"][b, r].numpy()) for b in range(64) for r in range(3)]
        counts = np.array([row_counts(row) for _b, row in rows])
        per_row = counts.sum(axis=1)
        requests = np.array([b for b, _row in rows])
        per_request = np.array([per_row[requests == b].max() for b in range(64)])  # its rows run side by side
        print(f"draft {draft}: {len(rows)} rows; counts a row, first / second bisection / id bisection: mean "
              f"{counts[:, 0].mean():.1f} / {counts[:, 1].mean():.1f} / {counts[:, 2].mean():.1f}, most "
              f"{counts[:, 0].max()} / {counts[:, 1].max()} / {counts[:, 2].max()}; both, mean {per_row.mean():.1f}; "
              f"a request's slowest row (B = 1), mean {per_request.mean():.1f}, most {per_request.max()}")


if __name__ == "__main__":
    main()
