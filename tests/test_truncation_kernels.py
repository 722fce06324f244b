"""Truncation and log-probabilities in the Triton backend (``specbench/kernels/truncation.py``, ``logprobs.py``).

Under the interpreter (no GPU) on tiny shapes, with the truncation kernels' blocks at 16 tokens so a
row of 40 is three chunks, the last one short:

- the prepass's cutoffs keep exactly the set a sort of the row keeps (a float64 check written
  here, from the contract: value order, ties to the lowest id, min_p -> top_k -> top_p, and
  ``specbench.truncation.kept_mask``), apart from tokens whose top-p prefix mass lies within
  ``TOP_P_TOLERANCE`` of the boundary;
- every knob off equals no knob at all, bit for bit, and ``top_k = 1`` emits the greedy tokens,
  for every target and draft form;
- mixed batches (truncated, untruncated and greedy requests; ties at the top_k boundary; top_p;
  min_p) equal the torch reference's tokens and counts, and its log-probabilities to 1e-5, on every
  launch path (the deferred race of a batch given no top_k included), and so does a residual with no
  mass anywhere;
- log-probabilities without truncation equal a direct ``log_softmax``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from conftest import device_for, histogram_scratches, hostile_draft_probs, interpreted, triton_launch

from specbench import truncation
from specbench.verification import TOP_P_TOLERANCE, SamplingParams, verify

B, K, V = 6, 3, 40
FORMS = [  # (target form, draft form, truncate_draft_logits)
    ("logits", "none", True), ("logits", "logits", True), ("logits", "logits", False), ("logits", "probs", True),
    ("probs", "none", True), ("probs", "logits", True), ("probs", "probs", True),
]


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    """The truncation kernels read rows in blocks of 16 tokens here (several chunks, a short last one; the
    deferred races three slices a row, the last one short)."""
    launch = triton_launch()
    monkeypatch.setattr(launch, "_truncation_shape",
                        lambda vocab, device, fused=False: (16, 4))
    monkeypatch.setattr(launch, "_race_shape", lambda vocab, device, batch: (16, 4))
    monkeypatch.setattr(launch, "_histogram_shape", lambda vocab, device: (16, 16, 4))
    monkeypatch.setattr(launch, "_bounds_shape", lambda vocab, device: (32, 16, 4))
    monkeypatch.setattr(launch, "TOP_K_CAP_GROUPS", 4)  # the top_k fast path gathers at most 4 groups (128 tokens)
    if not interpreted("triton"):
        pytest.skip("these tests size their inputs for the interpreter")
    return launch


def _rows(generator: torch.Generator, batch: int, rows: int, vocab: int) -> torch.Tensor:
    # logits with ties (values on a grid of 0.5), a NaN and a -inf per row, one +inf row
    logits = torch.round(torch.randn(batch, rows, vocab, generator=generator) * 4) / 2
    logits[..., 3] = math.nan
    logits[..., 7] = -math.inf
    return logits


def _inputs(seed: int, target: str, draft: str, batch: int = B) -> dict:
    generator = torch.Generator().manual_seed(seed)
    logits = _rows(generator, batch, K + 1, V)
    drafts_logits = _rows(generator, batch, K, V)
    temperatures = torch.tensor([1.0, 0.7, 0.0, 1.3, 1.0, 0.9][:batch])
    if target == "logits":
        drafts = logits[:, :K].nan_to_num(nan=-math.inf).argmax(-1)  # mostly accepted at first
    else:
        drafts = torch.randint(0, V, (batch, K), generator=generator)
    drafts[1::3, 1] = torch.randint(0, V, (len(range(1, batch, 3)),), generator=generator)
    drafts[batch - 1, 0] = -1
    keywords = {"seeds": torch.arange(100, 100 + batch), "positions": torch.arange(batch) * 3,
                "num_draft_tokens": torch.tensor([3, 2, 3, 0, 1, 3][:batch], dtype=torch.int32),
                "temperatures": temperatures}
    if target == "logits":
        keywords["target_logits"] = logits
    else:
        keywords["target_probs"] = torch.softmax(logits.nan_to_num(nan=-math.inf), dim=-1)
    if draft == "logits":
        keywords["draft_logits"] = drafts_logits
    elif draft == "probs":
        keywords["draft_probs"] = torch.softmax(drafts_logits.nan_to_num(nan=-math.inf) / 0.8, dim=-1)
    return {"draft_token_ids": drafts, **keywords}


def _knobs(batch: int = B) -> dict:
    # per request: top_k cutting inside ties, top_p, min_p, every knob off, all three, top_k with min_p
    return {
        "top_k": torch.tensor([3, 0, 5, 0, 4, 7][:batch], dtype=torch.int32),
        "top_p": torch.tensor([1.0, 0.7, 0.9, 1.0, 0.8, 1.0][:batch]),
        "min_p": torch.tensor([0.0, 0.0, 0.0, 0.0, 0.05, 0.2][:batch]),
    }


def _verify(inputs: dict, backend: str = "triton", **keywords):
    inputs = dict(inputs)
    target_logits = inputs.pop("target_logits", None)
    temperatures = inputs.pop("temperatures")
    knobs = keywords.pop("knobs", {})
    sampling = SamplingParams(temperatures=temperatures, **knobs)
    device = device_for(backend)
    moved = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
    sampling = SamplingParams(*(v.to(device) if isinstance(v, torch.Tensor) else v for v in sampling))
    result = verify(None if target_logits is None else target_logits.to(device), sampling=sampling,
                    backend=backend, **moved, **keywords)
    return result.map(torch.Tensor.cpu)


def _same(got, want) -> None:
    assert torch.equal(got.output_token_ids, want.output_token_ids), (got.output_token_ids, want.output_token_ids)
    assert torch.equal(got.num_emitted, want.num_emitted)
    assert torch.equal(got.num_accepted, want.num_accepted)


# --- the prepass against a sort ------------------------------------------------------------------


def _hostile_values(logits: torch.Tensor, is_probs: bool) -> torch.Tensor:
    """The logits as given, or their softmax with negative entries in row (2, 0) (no mass) and row (3, 1)
    summing to 3 (probabilities taken as given)."""
    if not is_probs:
        return logits
    values = torch.softmax(logits.nan_to_num(nan=-math.inf), dim=-1)
    values[2, 0, 30:34] = -0.5  # negative entries: no mass
    values[3, 1] = values[3, 1] * 3  # a row that does not sum to 1
    return values


def sort_kept(values: torch.Tensor, is_probs: bool, top_k: int, top_p: float, min_p: float):
    """(kept, ambiguous) ``[V]`` bool for one cleaned row, by sorting it (float64 prefix masses)."""
    vocab = values.numel()
    ranked = torch.where(values > 0, values, -math.inf) if is_probs else values
    if is_probs:
        mass = torch.where(values > 0, values, 0.0)
    else:
        top = ranked.max()
        mass = torch.exp(ranked - (top if top > -math.inf else 0.0))
    order = sorted(range(vocab), key=lambda y: (-float(ranked[y]), y))
    keep = [bool(ranked[y] > -math.inf) for y in order]
    if min_p > 0:  # NaN: off
        threshold = float(torch.tensor(min_p) * mass[order[0]]) if is_probs else min_p
        keep = [kept and float(mass[y]) >= threshold for kept, y in zip(keep, order, strict=True)]
    if 0 < top_k < vocab:
        keep = [kept and rank < top_k for rank, kept in enumerate(keep)]
    ambiguous = [False] * vocab
    if top_p < 1:
        total = sum(float(mass[y]) for kept, y in zip(keep, order, strict=True) if kept)
        bound = float(torch.tensor(top_p, dtype=torch.float32) * torch.tensor(total, dtype=torch.float32))
        before = 0.0
        for rank, y in enumerate(order):
            if keep[rank]:
                ambiguous[rank] = abs(before - bound) <= TOP_P_TOLERANCE * total
                keep[rank] = before < bound
                before += float(mass[y])
    if ranked[order[0]] > -math.inf:
        keep[0] = True
    kept = torch.zeros(vocab, dtype=torch.bool)
    unsure = torch.zeros(vocab, dtype=torch.bool)
    for rank, y in enumerate(order):
        kept[y] = keep[rank]
        unsure[y] = ambiguous[rank]
    return kept, unsure


@pytest.mark.parametrize("is_probs", [False, True])
def test_prepass_cutoffs_keep_what_a_sort_keeps(small_blocks, is_probs):
    launch = small_blocks
    generator = torch.Generator().manual_seed(7)
    batch = 8
    logits = _rows(generator, batch, 2, V)
    logits[5, 1] = -math.inf  # a row with no value: nothing kept
    logits[6, 0, 20:26] = 9.0  # a tie at the top, wider than top_k
    logits[6, 1, 10:12] = math.inf
    logits[0, 0, [30, 31, 35]] = 9.0  # top_k = 5 cuts the next tie (8.0) at id 4, then top_p inside this one
    logits[0, 0, [2, 4, 6]] = 8.0
    temperatures = torch.tensor([1.0, 0.5, 2.0, 1.0, 1.0, 1.0, 1.0, 0.8])
    values = _hostile_values(logits, is_probs)
    top_k = torch.tensor([5, 0, 1, 17, 2, 5, 4, 40], dtype=torch.int32)
    top_p = torch.tensor([0.3, 0.6, 0.95, 1.0, -0.5, 0.5, 0.999, float("nan")])
    min_p = torch.tensor([0.0, 0.1, 0.0, 0.3, 0.0, 2.0, 0.01, 0.0])
    m, mass, tau, iota, _length = launch.truncation_summaries(
        target=values, target_is_probs=is_probs, temperatures=temperatures,
        num_draft_tokens=torch.ones(batch, dtype=torch.int32), top_k=top_k, top_p=top_p, min_p=min_p)
    # the last request has every knob off: no summary
    _check_summaries((m[:-1], mass[:-1], tau[:-1], iota[:-1]), values[:-1], temperatures[:-1], top_k[:-1],
                     top_p[:-1], min_p[:-1], is_probs)


@pytest.mark.parametrize("is_probs", [False, True])
@pytest.mark.parametrize("search", ["histogram", "histogram-no-min-p", "histogram-fallback", "histogram-sorts",
                                    "radix"])
def test_split_cutoffs_keep_what_a_sort_keeps(small_blocks, monkeypatch, is_probs, search):
    """A batch given no top_k, by the split histogram path (specbench/kernels/histogram.py; given no
    min_p, whose later levels skip the in-play test for logits; with lists of 2 candidates, so most
    rows take its one-program fallback; with lists of 8, longer ones falling back, each sorted at 1, 2, 4
    or 8 by its length, lists of three of those lengths here) and the split radix path (radix.py), in
    slices of 16 tokens:
    three programs a row of 40, the last one short. Ties at the top_p boundary (values on a grid of 0.5),
    a NaN and a -inf in every row, a tie at the top, +inf logits, a row with no value, first-token-only
    rows (top_p <= 0, min_p > 1), min_p alone, top_p NaN (off) with min_p, top_p within rounding of 1, a
    temperature of +inf: the cutoffs keep what a sort keeps, and S is the kept mass."""
    launch = small_blocks
    monkeypatch.setattr(launch, "_radix_shape", lambda vocab, device: (16, 16, 4))
    monkeypatch.setitem(launch.TUNING, "split_search", 0 if search == "radix" else 1)
    if search in ("histogram-fallback", "histogram-sorts"):
        monkeypatch.setattr(launch, "HISTOGRAM_CAP", 2 if search == "histogram-fallback" else 8)
    generator = torch.Generator().manual_seed(11)
    batch = 10
    logits = _rows(generator, batch, 2, V)
    logits[5, 1] = -math.inf  # a row with no value: nothing kept
    logits[6, 0, 20:26] = 9.0  # a tie at the top
    logits[6, 1, 10:12] = math.inf
    logits[9, 0, 0] = math.inf  # at temperature +inf: NaN, no mass, while every finite logit is 0
    temperatures = torch.tensor([1.0, 0.5, 2.0, 1.0, 1.0, 1.0, 1.0, 0.8, 1.0, math.inf])
    values = _hostile_values(logits, is_probs)
    top_p = torch.tensor([0.3, 0.6, 0.95, 1.0, -0.5, 0.5, 0.999, float("nan"), 0.9999999, 0.7])
    min_p = torch.tensor([0.0, 0.1, 0.0, 0.3, 0.0, 2.0, 0.01, 0.05, 0.0, 0.0])
    given_min_p = min_p
    if search == "histogram-no-min-p":  # (top_p 0.8 for the rows that had only min_p: each row is truncated)
        given_min_p, min_p = None, torch.zeros(batch)
        top_p = torch.where(top_p.isnan() | (top_p >= 1.0), 0.8, top_p)
    from specbench.kernels import histogram

    # (a target cell whose stage the search never wrote fails the fallback check below)
    scratches = histogram_scratches(monkeypatch, launch)
    m, mass, tau, iota, length = launch.truncation_summaries(
        target=values, target_is_probs=is_probs, temperatures=temperatures,
        num_draft_tokens=torch.ones(batch, dtype=torch.int32), top_k=None, top_p=top_p, min_p=given_min_p)
    assert not bool(length.any())  # no kept lists on this path
    if search != "radix":  # every row here fits a list: the levels narrowed to it (a level's wrong sums or
        # bounds end in the exact but slow fallback, which the kept sets alone would not show); each
        # request's two target cells (side 0: the draft cells are never searched here)
        stage, sizes = _target_stages_and_lists(scratches[0], batch, 2)
        fell_back = int((stage == histogram.FALLBACK.value).sum())
        assert fell_back > 0 if search in ("histogram-fallback", "histogram-sorts") else fell_back == 0
        if search == "histogram-sorts":
            found = sizes[stage == histogram.SEARCH.value]
            assert len({(int(size) - 1).bit_length() for size in found}) >= 3  # (the sort's length: 1, 2, 4, 8)
    no_k = torch.zeros(batch, dtype=torch.int32)
    _check_summaries((m, mass, tau, iota), values, temperatures, no_k, top_p, min_p, is_probs)


def test_split_radix_prefetch_gives_the_same_summaries(small_blocks, monkeypatch):
    """The split radix passes with each chunk loaded one iteration ahead (``radix_prefetch``, the launch
    variants ``triton-radix-...-prefetch``) give the summaries the plain passes give, bit for bit:
    rows of 40 in slices of 32, chunks of 16 (the last slice short, its reads ahead past the row masked).
    Only the rows summarised are compared (rows 0..n of requests not greedy with a knob on): the others
    hold whatever the scratch held, which another test's run before this one can change."""
    launch = small_blocks
    monkeypatch.setattr(launch, "_radix_shape", lambda vocab, device: (32, 16, 4))
    monkeypatch.setitem(launch.TUNING, "split_search", 0)
    inputs = _inputs(19, "logits", "none")
    knobs = _knobs_without_top_k()
    summaries = []
    for prefetch in (0, 1):
        monkeypatch.setitem(launch.TUNING, "radix_prefetch", prefetch)
        summaries.append(launch.truncation_summaries(
            target=inputs["target_logits"], target_is_probs=False, temperatures=inputs["temperatures"],
            num_draft_tokens=inputs["num_draft_tokens"], top_k=None, **knobs))
    on = ((knobs["top_p"] < 1) | (knobs["min_p"] > 0)) & (inputs["temperatures"] != 0)
    rows = torch.arange(inputs["target_logits"].shape[1])
    summarised = on[:, None] & (rows[None, :] <= inputs["num_draft_tokens"][:, None])
    assert int(summarised.sum()) > 0
    for plain, ahead in zip(*summaries, strict=True):
        assert torch.equal(plain[summarised], ahead[summarised])


@pytest.mark.parametrize(("atomic", "per_program"), [(1, 1), (0, 2), (1, 4)])
def test_the_histogram_path_variants_give_the_same_summaries(small_blocks, monkeypatch, atomic, per_program):
    """The split histogram path with its last level counting by atomics (the launcher's own, the launch variants
    ...-atomic) and with each program taking several slices of a row in turn (-slicesN: 2 of a row of 40's three
    slices of 16, the second program's second slice past the row; 4, the whole row in one program): the summaries
    of the path counting every level by tl.histogram, one slice a program (-noatomic), bit for bit, with no row
    fallen back (the levels ran to the end). Only the rows summarised are compared (rows 0..n of requests not
    greedy with a knob on)."""
    from specbench.kernels import histogram

    launch = small_blocks
    monkeypatch.setitem(launch.TUNING, "split_search", 1)
    inputs = _inputs(23, "logits", "none")
    knobs = _knobs_without_top_k()
    runs = _with_and_without_variant(monkeypatch, launch, atomic, per_program, lambda: launch.truncation_summaries(
        target=inputs["target_logits"], target_is_probs=False, temperatures=inputs["temperatures"],
        num_draft_tokens=inputs["num_draft_tokens"], top_k=None, **knobs))
    summaries = [summary for summary, _scratch in runs]
    batch, num_slots = inputs["target_logits"].shape[:2]
    stages = [_target_stages_and_lists(scratch, batch, num_slots)[0] for _summary, scratch in runs]
    on = ((knobs["top_p"] < 1) | (knobs["min_p"] > 0)) & (inputs["temperatures"] != 0)
    rows = torch.arange(inputs["target_logits"].shape[1])
    summarised = on[:, None] & (rows[None, :] <= inputs["num_draft_tokens"][:, None])
    assert int(summarised.sum()) > 0
    for stage in stages:
        assert not bool((stage[summarised] == histogram.FALLBACK.value).any())
    for plain, variant in zip(*summaries, strict=True):
        assert torch.equal(plain[summarised], variant[summarised])


@pytest.mark.parametrize(("bins", "levels", "target"), [(128, 2, "logits"), (256, None, "probs")])
def test_more_parts_and_fewer_levels_give_the_same_step(small_blocks, monkeypatch, bins, levels, target):
    """The split histogram path with 128 or 256 parts a level in two levels (as many as its rule asks at 256, the
    launcher's own from Triton 3.8): the tokens and summaries of 64 parts in three levels (its own before), bit for
    bit, target logits or probabilities
    with truncated draft logits (no target row falls back to one program's search here, whose sums run in another
    order). Not covered here: a window of more than 64 parts (the rows are 40 tokens)."""
    launch = small_blocks
    monkeypatch.setitem(launch.TUNING, "split_search", 1)
    inputs = _inputs(31, target, "logits")
    knobs = _knobs_without_top_k()
    runs = []
    for tuning in ({"histogram_bins": 64, "histogram_levels": None},
                   {"histogram_bins": bins, "histogram_levels": levels}):
        for name, value in tuning.items():
            monkeypatch.setitem(launch.TUNING, name, value)
        scratches = histogram_scratches(monkeypatch, launch)
        with launch.strategy("split"):
            runs.append((_verify(inputs, knobs=knobs, truncate_draft_logits=True), scratches[0]))
    (plain, plain_scratch), (variant, variant_scratch) = runs
    _same(variant, plain)
    for name in ("summary_f", "summary_i"):
        want, got = getattr(plain_scratch, name), getattr(variant_scratch, name)
        assert torch.equal(want.nan_to_num(7.0), got.nan_to_num(7.0)), name
    from specbench.kernels import histogram

    batch, num_slots = inputs[f"target_{target}"].shape[:2]
    on = ((knobs["top_p"] < 1) | (knobs["min_p"] > 0)) & (inputs["temperatures"] != 0)
    searched = on[:, None] & (torch.arange(num_slots)[None, :] <= inputs["num_draft_tokens"][:, None])
    for scratch in (plain_scratch, variant_scratch):  # (every searched target row found in the list)
        stage = _target_stages_and_lists(scratch, batch, num_slots)[0]
        assert not bool((stage[searched] == histogram.FALLBACK.value).any())


def _first_level_window(z: np.ndarray, top_p: float, tight: bool) -> tuple[int, int, int]:
    """A float64 mirror of the split histogram path's first level of 64 parts on one row of logits: (first, last)
    part it keeps and the part of the exact cutoff; ``tight``: its bounds now, else as they were before 2026-12-02
    (the mass through a part bounded as the bound before it plus the part's largest mass)."""
    slack, sum_slack, bins = 1e-4, 1e-5, 64
    m = float(z.max())
    part = np.minimum(np.floor(8.0 * (m - z) / 4.0), bins - 1).astype(np.int64)  # parts of 4 units (half a nat)
    count = np.bincount(part, minlength=bins).astype(np.float64)
    edges = np.exp(-np.arange(bins + 1) * 4.0 / 8.0)
    upper, lower = count * edges[:-1] * (1 + slack), count * edges[1:] * (1 - slack)
    lower[-1] = 0.0  # (the open-ended last part)
    mass = np.exp(z.astype(np.float64) - m)
    total, target = mass.sum(), top_p * mass.sum()
    through_lo, through_hi = np.cumsum(lower), np.cumsum(upper)
    before_lo, before_hi = through_lo - lower, through_hi - upper
    before_lo = np.maximum(before_lo, total * (1 - sum_slack) - (upper.sum() - before_hi))
    if tight:
        through_hi = np.minimum(through_hi, total * (1 + sum_slack) - (lower.sum() - through_lo))
    else:
        through_hi = np.minimum(before_hi, total * (1 + sum_slack) - (lower.sum() - before_lo)) + upper
    possible = np.flatnonzero((count > 0) & (before_lo <= target) & (through_hi >= target))
    order = np.lexsort((np.arange(len(z)), -z))
    cutoff = order[int(np.searchsorted(np.cumsum(mass[order]), target))]
    return int(possible.min()), int(possible.max()), int(part[cutoff])


def test_the_first_level_keeps_the_parts_its_bounds_allow(small_blocks, monkeypatch):
    """One level of 64 parts on flat rows (N(0, 1) logits of 384 tokens, top_p 0.95: the parts about the cutoff
    hold much of the mass): the window the level keeps is the float64 mirror's, where the mass before a part is
    bounded from below by the larger of the parts' sum before it and M less their largest masses from it on, and
    the mass through it from above by the smaller of their sum through it and M less their least masses after it;
    every window holds the exact cutoff. On these rows the bounds before (the mass through a part as the bound
    before it plus the part's largest mass) keep one part more, a wider window for every later level and for the
    bracket race (results/cpu-bracket-race/)."""
    from specbench.kernels import histogram

    launch = small_blocks
    for name, value in (("split_search", 1), ("histogram_bins", 64), ("histogram_levels", 1)):
        monkeypatch.setitem(launch.TUNING, name, value)
    batch, vocab = 3, 384
    generator = torch.Generator().manual_seed(41)
    inputs = {"target_logits": torch.randn(batch, 2, vocab, generator=generator),
              "draft_token_ids": torch.randint(0, vocab, (batch, 1), generator=generator),
              "num_draft_tokens": torch.ones(batch, dtype=torch.int32), "temperatures": torch.ones(batch),
              "seeds": torch.arange(batch), "positions": torch.zeros(batch, dtype=torch.int64)}
    knobs = {"top_p": torch.full((batch,), 0.95)}
    scratches = histogram_scratches(monkeypatch, launch)
    with launch.strategy("split"):
        got = _verify(inputs, knobs=knobs)
    _same(got, _reference(inputs, knobs=knobs))
    state = scratches[0].radix_state_f[:batch * 2 * 2 * histogram.STATE.value].view(batch, 2, 2, -1)[:, :, 0]
    wider = 0
    for b in range(batch):
        for r in range(2):
            z = inputs["target_logits"][b, r].numpy()
            first, last, cutoff = _first_level_window(z, 0.95, tight=True)
            window = (float(state[b, r, histogram.F_LO.value]), float(state[b, r, histogram.F_HI.value]))
            assert window == (4.0 * first, 4.0 * (last + 1)), (b, r, window, first, last)
            assert first <= cutoff <= last
            before_first, before_last, _ = _first_level_window(z, 0.95, tight=False)
            assert before_first <= first and last <= before_last
            wider += (before_first, before_last) != (first, last)
    assert wider >= batch, wider


@pytest.mark.parametrize(("atomic", "per_program", "way", "rows", "after"),
                         [(1, 1, None, 0, None), (0, 2, None, 0, None), (1, 2, 2, 0, None), (1, 1, 2, 1, None),
                          (0, 2, 2, 1, None), (1, 1, None, 1, None), (1, 1, 2, 2, None), (0, 2, 2, 2, None),
                          (1, 1, 2, 2, 2), (0, 2, 2, 2, 1)])
def test_the_histogram_path_variants_give_the_same_step(small_blocks, monkeypatch, atomic, per_program, way, rows,
                                                        after):
    """Both sides of the split histogram path's variants (target logits, truncated draft logits: two sides a slot's
    cell, the programs' sides decoded from the grid), with every row searched or the drafts decided first from the
    bounds (way 2), one program a row and slice, each program its slice of every row of its request (rows 1), or of
    its request's stop row and then of the rows after it (rows 2; requests that decide nothing, with min_p or every
    knob off, stop at 0 not clean, and request 0 at 1 not clean (its first draft surely accepted, its second row of
    no mass), so the rows after take the rest, their programs leaving at once where the request stopped clean;
    ``after``: those programs take that many of the row's three slices each, None the launcher's): the same tokens as the path counting by tl.histogram,
    one slice and one row a program, and the same summaries and level counts in its scratch, bit for bit (counts that
    only bound a part's mass could be wrong without changing a token)."""
    launch = small_blocks
    monkeypatch.setitem(launch.TUNING, "split_search", 1)
    monkeypatch.setitem(launch.TUNING, "histogram_decide", way)
    inputs = _inputs(29, "logits", "logits")
    inputs["draft_logits"][0, 0] = inputs["target_logits"][0, 0]  # (q' = p' at request 0's first draft: accepted)
    inputs["target_logits"][0, 1] = math.nan  # (no mass: no bounds, so request 0 decides nothing at its second)
    knobs = _knobs_without_top_k()
    with launch.strategy("split"):
        runs = _with_and_without_variant(monkeypatch, launch, atomic, per_program,
                                         lambda: _verify(inputs, knobs=knobs, truncate_draft_logits=True),
                                         rows, after)
    (plain, _), (variant, _) = runs
    scratches = [scratch for _result, scratch in runs]
    _same(variant, plain)
    for name in ("summary_f", "summary_i", "counts"):
        want, got = getattr(scratches[0], name), getattr(scratches[1], name)
        assert torch.equal(want.nan_to_num(7.0), got.nan_to_num(7.0)), name
    batch, num_slots = inputs["target_logits"].shape[:2]
    summaries = scratches[0].summary_f[:batch * num_slots * 8].view(batch, num_slots, 2, 4)
    assert bool(summaries[..., 1, 1].isfinite().any())  # draft cells were summarised (their kept mass written)
    if way == 2:  # (request 0 stopped at 1 not clean: its rows after the stop, 2 and 3, searched too)
        assert scratches[1].decided.view(batch, 3)[0, :2].tolist() == [1, 0]
        assert bool(summaries[0, 2:, 0, 1].isfinite().all()) and bool(summaries[0, 0].isnan().all())


def _with_and_without_variant(monkeypatch, launch, atomic: int, per_program: int, call, rows: int = 0,
                              after: int | None = None) -> list[tuple]:
    """(call's result, the split histogram search's scratch) with every level counted by tl.histogram, one slice and
    one row a program, then with the launch variants' settings (``histogram_atomic``,
    ``histogram_slices_per_program``, ``histogram_rows``, ``histogram_after_slices``), each on fresh scratch."""
    runs = []
    for tuning in ({"histogram_atomic": 0, "histogram_slices_per_program": 1, "histogram_rows": 0,
                    "histogram_after_slices": None},
                   {"histogram_atomic": atomic, "histogram_slices_per_program": per_program, "histogram_rows": rows,
                    "histogram_after_slices": after}):
        for name, value in tuning.items():
            monkeypatch.setitem(launch.TUNING, name, value)
        scratches = histogram_scratches(monkeypatch, launch)
        runs.append((call(), scratches[0]))
    return runs


@pytest.mark.parametrize("target", ["logits", "probs"])
def test_the_finish_sorts_crowded_lists_at_every_length(small_blocks, monkeypatch, target):
    """Rows whose top_p boundary falls in a crowd of 100, 200, 400 or 800 tied tokens (the sanitizer's
    crowded_inputs, its part "lists"; the cutoff three quarters through each crowd), the lists holding 1,024 as on a
    GPU: each row's list is its crowd exactly, sorted at 128, 256, 512 and 1,024, no row falls back, and the kept sets
    are a sort's (ties by id). Fails with a list of 200 sorted at 128."""
    from sanitize_kernels import crowded_inputs

    from specbench.kernels import histogram

    launch = small_blocks
    monkeypatch.setattr(launch, "_histogram_shape", lambda vocab, device: (1024, 1024, 4))  # (two slices a row)
    monkeypatch.setattr(launch, "_histogram_cap", lambda device: 1024)
    monkeypatch.setitem(launch.TUNING, "split_search", 1)
    crowds = (100, 200, 400, 800)
    kwargs = crowded_inputs(1, 1031, "none", target, crowds=crowds)
    values, sampling = kwargs[f"target_{target}"], kwargs["sampling"]
    scratches = histogram_scratches(monkeypatch, launch)
    m, mass, tau, iota, _length = launch.truncation_summaries(
        target=values, target_is_probs=target == "probs", temperatures=sampling.temperatures,
        num_draft_tokens=kwargs["num_draft_tokens"], top_k=None, top_p=sampling.top_p, min_p=None)
    batch, rows = values.shape[:2]
    stage, sizes = _target_stages_and_lists(scratches[0], batch, rows)
    assert bool((stage == histogram.SEARCH.value).all())
    assert sizes.tolist() == [[crowd] * rows for crowd in crowds]
    _check_summaries((m, mass, tau, iota), values, sampling.temperatures, torch.zeros(batch, dtype=torch.int32),
                     sampling.top_p, torch.zeros(batch), target == "probs")


def _target_stages_and_lists(scratch, batch: int, rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Each target cell's search stage and list length (the last of its counts), [batch, rows], from a split histogram
    search's scratch (cells (request, row, side), side 0 the target)."""
    from specbench.kernels import histogram

    cells = batch * rows * 2
    stage = scratch.radix_state_i[:cells * histogram.STATE.value].view(batch, rows, 2, -1)[:, :, 0, 0]
    sizes = scratch.counts[:cells * histogram.COUNTS.value].view(batch, rows, 2, -1)[:, :, 0, -1]
    return stage, sizes


def test_the_histogram_path_orders_negative_and_positive_zero_candidates_by_id(small_blocks, monkeypatch):
    """Logits given top_p alone, by the split histogram path: a row of four logits of 2 and 36 zeros, every other one
    -0, whose cutoff falls among the zeros (top_p 0.7: the 17th zero). The candidates are the zeros; a -0 copied to
    the list as -0 would sort apart from the +0 (its order key differs) and move the cutoff (it fails so with the
    values' -0 left as it is), so the kept set is a sort's, ties by id, and the cutoff token is id 20 with value +0."""
    from specbench.kernels import histogram

    launch = small_blocks
    monkeypatch.setitem(launch.TUNING, "split_search", 1)
    logits = torch.zeros(1, 1, V)
    logits[0, 0, :4] = 2.0
    logits[0, 0, 5::2] = -0.0
    temperatures = torch.ones(1)
    top_p = torch.tensor([0.7])
    scratches = histogram_scratches(monkeypatch, launch)
    m, mass, tau, iota, _length = launch.truncation_summaries(
        target=logits, target_is_probs=False, temperatures=temperatures,
        num_draft_tokens=torch.zeros(1, dtype=torch.int32), top_k=None, top_p=top_p, min_p=None)
    stage = scratches[0].radix_state_i[:2 * histogram.STATE.value].view(2, -1)[0, 0]
    assert int(stage) == histogram.SEARCH.value  # (found among the candidates, not by the fallback)
    assert int(iota[0, 0]) == 20 and float(tau[0, 0]) == 0.0 and math.copysign(1.0, float(tau[0, 0])) == 1.0
    _check_summaries((m, mass, tau, iota), logits, temperatures, torch.zeros(1, dtype=torch.int32), top_p,
                     torch.zeros(1), False)


def _check_summaries(summaries, values, temperatures, top_k, top_p, min_p, is_probs) -> None:
    # every row's cutoff keeps what a sort keeps and what specbench.truncation keeps; S and m as the row says
    m, mass, tau, iota = summaries
    vocab = values.shape[-1]
    for b in range(values.shape[0]):
        for r in range(values.shape[1]):
            if is_probs:
                cleaned = torch.where(values[b, r] > 0, values[b, r].clamp(max=1.0), 0.0)
            else:
                cleaned = (values[b, r] * (1.0 / temperatures[b])).nan_to_num(
                    nan=-math.inf, posinf=3.4028234663852886e38, neginf=-math.inf)
            kept, unsure = sort_kept(cleaned, is_probs, int(top_k[b]), float(top_p[b]), float(min_p[b]))
            ranked = torch.where(cleaned > 0, cleaned, -math.inf) if is_probs else cleaned
            ids = torch.arange(vocab)
            got = ((ranked > tau[b, r]) | ((ranked == tau[b, r]) & (ids <= iota[b, r]))) & (ranked > -math.inf)
            assert torch.equal(got[~unsure], kept[~unsure]), (b, r, got.nonzero().flatten(), kept.nonzero().flatten())
            reference = truncation.kept_mask(cleaned[None], top_k[b:b + 1], top_p[b:b + 1], min_p[b:b + 1], is_probs)[0]
            assert torch.equal(got[~unsure], reference[~unsure]), (b, r)
            if bool(kept.any()):
                masses = torch.where(got, cleaned if is_probs else torch.exp(cleaned - cleaned.max()), 0.0)
                assert float(mass[b, r]) == pytest.approx(float(masses.sum()), rel=1e-5)
                assert float(m[b, r]) == float(ranked.max())
            else:
                assert float(m[b, r]) == -math.inf


def _fast_rows(values, temperatures, top_k, is_probs, cap_groups) -> torch.Tensor:
    # [B, R] bool: the rows the top_k fast path resolves (1 <= top_k <= 64 and at most cap_groups groups
    # of 32 with a maximum >= the k-th largest group maximum; a row with no mass too)
    batch, rows, vocab = values.shape
    out = torch.zeros(batch, rows, dtype=torch.bool)
    for b in range(batch):
        k = int(top_k[b])
        for r in range(rows):
            if is_probs:
                ranked = torch.where(values[b, r] > 0, values[b, r], -math.inf)
            else:
                ranked = (values[b, r] / temperatures[b]).nan_to_num(nan=-math.inf, posinf=3.4e38, neginf=-math.inf)
            maxima = torch.nn.functional.pad(ranked, (0, -vocab % 32), value=-math.inf).view(-1, 32).amax(-1)
            finite = maxima[maxima > -math.inf].sort(descending=True).values
            c = finite[k - 1] if k <= finite.numel() else -math.inf
            out[b, r] = 1 <= k <= 64 and (finite.numel() == 0 or int((finite >= c).sum()) <= cap_groups)
    return out


@pytest.mark.parametrize("is_probs", [False, True])
def test_top_k_fast_path_equals_sort_and_radix_path(small_blocks, monkeypatch, is_probs):
    """Rows with 1 <= top_k <= 64 (the one-pass path; gathering at most 4 groups of 32 here): ties at the
    top_k boundary and across group edges, top_k = 1, 64 and 65 (the radix path), all three knobs, NaN and
    -inf, V = 150 (not a multiple of 32), rows whose values all tie (more groups than the cap: the radix
    path), temperature +inf with a +inf logit (no mass there: its group still has a maximum of 0); the
    cutoffs equal a sort's, specbench.truncation's and the radix path's, and the rows meant for
    the fast path are resolved by it (they have a kept list, the radix path's rows none)."""
    launch = small_blocks
    monkeypatch.setattr(launch, "_truncation_shape",
                        lambda vocab, device, fused=False: (32, 4))
    vocab = 150
    generator = torch.Generator().manual_seed(5)
    logits = _rows(generator, 8, 2, vocab)
    logits[0, 0, 30:34] = 9.0  # a tie across the edge of groups 0 and 1, cut by top_k = 2
    logits[0, 1, [31, 32, 95, 149]] = 9.0  # ... and one spread over three groups, the last one short
    logits[1, :, 60:] = -math.inf  # fewer tokens with mass than top_k = 64
    logits[3, 0] = 1.5  # every value ties: every group qualifies, more than the cap
    logits[3, 1, ::2] = math.nan
    logits[3, 1, 1::2] = -2.0
    logits[5, 1] = -math.inf  # nothing has mass
    temperatures = torch.tensor([1.0, 0.5, 2.0, 1.0, 0.7, 1.0, 1.0, math.inf])
    if is_probs:
        values = torch.softmax(logits.nan_to_num(nan=-math.inf), dim=-1)
        values[2, 0, 40:50] = -0.5  # negative entries: no mass
    else:
        values = logits
        values[7, 0, 0] = math.inf  # at temperature +inf: NaN, no mass, while every finite logit is 0
    top_k = torch.tensor([2, 64, 1, 3, 7, 5, 65, 10], dtype=torch.int32)
    top_p = torch.tensor([1.0, 0.8, 1.0, 0.5, 0.6, 0.9, 0.7, 0.999])
    min_p = torch.tensor([0.0, 0.05, 0.0, 0.0, 0.1, 0.0, 0.0, 0.02])
    keywords = {"target": values, "target_is_probs": is_probs, "temperatures": temperatures,
                "num_draft_tokens": torch.ones(8, dtype=torch.int32), "top_k": top_k, "top_p": top_p, "min_p": min_p}
    fast = launch.truncation_summaries(**keywords)
    _check_summaries(fast[:4], values, temperatures, top_k, top_p, min_p, is_probs)
    expected_fast = _fast_rows(values, temperatures, top_k, is_probs, 4)
    assert bool(expected_fast.any()) and not bool(expected_fast.all())
    assert not bool(expected_fast[3].any()) and not bool(expected_fast[6].any())
    has_mass = fast[0] > -math.inf
    assert torch.equal(fast[4] > 0, expected_fast & has_mass), (fast[4], expected_fast)
    assert bool((fast[4] <= top_k[:, None].clamp(max=64)).all())
    monkeypatch.undo()
    monkeypatch.setattr(launch, "_truncation_shape",
                        lambda vocab, device, fused=False: (32, 4))
    monkeypatch.setattr(launch, "MAX_GROUPS", 1)  # no row fits: the radix path everywhere
    radix = launch.truncation_summaries(**keywords)
    assert not bool(radix[4].any())
    for got, want in zip(fast[:4], radix[:4], strict=True):
        assert torch.allclose(got, want, rtol=1e-5, atol=0, equal_nan=True), (got, want)
    assert torch.equal(fast[2], radix[2]) and torch.equal(fast[3], radix[3])  # the cutoffs themselves


def test_top_k_path_on_continuous_rows_of_thousands_of_tokens(small_blocks, monkeypatch):
    """The launcher's own shapes and cap (64 groups) on rows of 5000 tokens with continuous values (the
    bisections stop early there: at a bound with at most 64 groups above it, then at one with exactly
    top_k tokens above it) and with values on a grid (ties at the boundary: they run to the last bit);
    top_k from 1 to 64, with top_p and min_p: the cutoffs equal the sort's."""
    launch = small_blocks
    monkeypatch.undo()
    generator = torch.Generator().manual_seed(3)
    batch, vocab = 6, 5000
    values = torch.randn(batch, 2, vocab, generator=generator) * 3
    values[1] = torch.round(values[1] * 8) / 8  # ties
    values[2, :, 100:] = torch.randn(2, vocab - 100, generator=generator) - 30  # a few large values
    temperatures = torch.tensor([1.0, 0.7, 1.3, 1.0, 0.5, 2.0])
    top_k = torch.tensor([50, 50, 1, 64, 17, 33], dtype=torch.int32)
    top_p = torch.tensor([0.9, 0.95, 1.0, 0.5, 0.99, 1.0])
    min_p = torch.tensor([0.0, 0.0, 0.0, 0.01, 0.0, 0.0])
    for is_probs in (False, True):
        rows = torch.softmax(values, dim=-1) if is_probs else values
        summaries = launch.truncation_summaries(
            target=rows, target_is_probs=is_probs, temperatures=temperatures,
            num_draft_tokens=torch.ones(batch, dtype=torch.int32), top_k=top_k, top_p=top_p, min_p=min_p)
        # every row on the top-k path: a kept list, full (top_k long) where min_p cuts nothing before top_k
        lengths = summaries[4]
        assert bool((lengths >= 1).all()) and bool((lengths <= top_k[:, None]).all())
        assert bool((lengths[min_p == 0] == top_k[min_p == 0, None]).all())
        _check_summaries(summaries[:4], rows, temperatures, top_k, top_p, min_p, is_probs)


# --- properties of the step that need no reference ----------------------------------------------


@pytest.mark.parametrize(("target", "draft", "truncate_draft"), FORMS)
def test_knobs_off_equal_no_knobs_and_top_k_one_is_greedy(target, draft, truncate_draft):
    inputs = _inputs(1, target, draft)
    plain = _verify(inputs, logprobs="processed")
    off = {"top_k": torch.zeros(B, dtype=torch.int32), "top_p": torch.ones(B), "min_p": torch.zeros(B)}
    off["top_k"][1] = V  # >= V is off too
    off["top_p"][2] = float("nan")
    knobs_off = _verify(inputs, knobs=off, truncate_draft_logits=truncate_draft, logprobs="processed",
                        check_values=False)
    _same(knobs_off, plain)
    assert torch.equal(knobs_off.logprobs.nan_to_num(nan=9.0), plain.logprobs.nan_to_num(nan=9.0))
    one = _verify(inputs, knobs={"top_k": 1}, truncate_draft_logits=truncate_draft, logprobs="processed")
    greedy = _verify({**inputs, "temperatures": torch.zeros(B)})
    _same(one, greedy)
    emitted = torch.arange(K + 1)[None, :] < one.num_emitted[:, None].long()
    sampled = (inputs["temperatures"] > 0)[:, None]  # a greedy row's processed logprob ignores truncation
    assert bool((one.logprobs[emitted & sampled] == 0.0).all())  # p' is one-hot
    assert bool(one.logprobs[~emitted].isnan().all())


def test_synthetic_mode_knobs_off_and_top_k_one():
    inputs = _inputs(2, "logits", "none")
    rates = [0.6, 0.5, 0.4]
    plain = _verify(inputs, mode="synthetic", acceptance_rates=rates)
    _same(_verify(inputs, mode="synthetic", acceptance_rates=rates, knobs={"top_p": 1.0}), plain)
    one = _verify(inputs, mode="synthetic", acceptance_rates=rates, knobs={"top_k": 1})
    greedy = _verify({**inputs, "temperatures": torch.zeros(B)}, mode="synthetic", acceptance_rates=rates)
    _same(one, greedy)


@pytest.mark.parametrize("target", ["logits", "probs"])
def test_untruncated_logprobs_are_log_softmax(target):
    inputs = _inputs(3, target, "logits")
    for which in ("processed", "raw"):
        result = _verify(inputs, logprobs=which)
        rows = inputs.get("target_logits", inputs.get("target_probs"))
        for b in range(B):
            for j in range(K + 1):
                if j >= int(result.num_emitted[b]):
                    assert math.isnan(float(result.logprobs[b, j]))
                    continue
                y = int(result.output_token_ids[b, j])
                temperature = float(inputs["temperatures"][b])
                if target == "probs":
                    row = rows[b, j].clamp(min=0.0, max=1.0)
                    want = math.log(float(row[y]) / float(row.sum()))
                else:
                    scale = 1.0 if which == "raw" or temperature == 0 else 1.0 / temperature
                    row = (rows[b, j] * scale).nan_to_num(nan=-math.inf, neginf=-math.inf)
                    want = float(torch.log_softmax(row.double(), dim=-1)[y])
                assert float(result.logprobs[b, j]) == pytest.approx(want, abs=1e-5)


# --- against the torch reference ------------------------------------------------------------------


def _reference(inputs: dict, **keywords):
    return _verify(inputs, backend="torch", **keywords)


def _knobs_without_top_k(batch: int = B) -> dict:
    # per request: top_p, min_p alone, every knob off, both, a top_p that keeps one token, top_p near 1 with
    # min_p = 1 (the tokens tied at the top)
    return {
        "top_p": torch.tensor([0.7, 1.0, 1.0, 0.8, 0.01, 0.999][:batch]),
        "min_p": torch.tensor([0.0, 0.1, 0.0, 0.05, 0.0, 1.0][:batch]),
    }


# a batch given no top_k, each split search on two forms (the suite's time on the interpreter): one-hot drafts
# and draft logits left whole by the radix path, draft logits cut and probabilities on both sides by the
# histogram path
_SPLIT_FORMS = {"split-radix": (FORMS[0], FORMS[2]), "split-histogram": (FORMS[1], FORMS[6])}


def _no_top_k(monkeypatch, launch, path: str) -> bool:
    # whether `path` is a split search of a batch given no top_k (then forced: "split-radix" or "split-histogram")
    if path not in _SPLIT_FORMS:
        return False
    monkeypatch.setitem(launch.TUNING, "split_search", ("split-radix", "split-histogram").index(path))
    return True


@pytest.mark.parametrize("path", ["fused", "prepass", "split-radix", "split-histogram"])
@pytest.mark.parametrize(("form", "which"), [(form, ("processed", "raw")[i % 2]) for i, form in enumerate(FORMS)])
def test_mixed_batch_equals_reference(small_blocks, monkeypatch, form, which, path):
    """Every launch path: rows summarised inside the step as it reaches them (``FUSED``), by the
    prepass first, each row split across programs (forced by the split strategy), and, for a batch
    given no top_k, by the split radix or histogram path (slices of 16 tokens), the step then leaving its
    races over whole rows to the split terminal launch (the split strategy)."""
    target, draft, truncate_draft = form
    if path in _SPLIT_FORMS and form not in _SPLIT_FORMS[path]:
        pytest.skip(f"{path} is tested on two forms (the suite's time on the interpreter)")
    inputs = _inputs(11 + FORMS.index(form), target, draft)
    knobs = _knobs()
    if _no_top_k(monkeypatch, small_blocks, path):
        knobs = _knobs_without_top_k()
    keywords = {"knobs": knobs, "truncate_draft_logits": truncate_draft, "logprobs": which}
    want = _reference(inputs, **keywords)
    with small_blocks.strategy("auto" if path == "fused" else "split"):
        got = _verify(inputs, **keywords)
    _same(got, want)
    assert torch.allclose(got.logprobs, want.logprobs, atol=1e-5, rtol=0, equal_nan=True), (got.logprobs,
                                                                                           want.logprobs)


@pytest.mark.parametrize(("path", "way"), [("fused", None), ("prepass", None), ("split-histogram", None),
                                         ("split-histogram", 2)])
def test_hostile_draft_probabilities_are_read_cleaned_when_truncating(small_blocks, monkeypatch, path, way):
    """-inf, negative, NaN, +inf and above-1 draft probabilities under truncation, with the drafts of every other
    request drawn at random (most outside the kept set, where a draft probability read below 0 would accept them):
    the reference and the kernels (the step summarising its rows, after the prepass, after the split histogram path
    with its deferred race, and with the drafts decided first from the bounds, way 2) give what the call with the
    contract's cleaned values gives, bit for bit."""
    inputs = _inputs(19, "logits", "probs")
    knobs = _knobs_without_top_k() if _no_top_k(monkeypatch, small_blocks, path) else _knobs()
    monkeypatch.setitem(small_blocks.TUNING, "histogram_decide", way)
    drafts = inputs["draft_token_ids"]  # (each row's argmax at first: kept) and in every other request at random
    drafts[::2] = torch.randint(0, V, drafts[::2].shape, generator=torch.Generator().manual_seed(19))
    inputs["draft_probs"], cleaned = hostile_draft_probs(inputs["draft_probs"], inputs["draft_token_ids"], seed=4)
    want = _reference({**inputs, "draft_probs": cleaned}, knobs=knobs)
    _same(_reference(inputs, knobs=knobs), want)
    with small_blocks.strategy("auto" if path == "fused" else "split"):
        _same(_verify(inputs, knobs=knobs), want)
    assert 0 < int(want.num_accepted.sum()) < int(inputs["num_draft_tokens"].sum())  # some accepted, some rejected


@pytest.mark.parametrize("path", ["fused", "prepass", "split-histogram"])
def test_synthetic_mixed_batch_equals_reference(small_blocks, monkeypatch, path):
    inputs = _inputs(13, "logits", "none")
    knobs = _knobs_without_top_k() if _no_top_k(monkeypatch, small_blocks, path) else _knobs()
    keywords = {"mode": "synthetic", "acceptance_rates": [0.7, 0.5, 0.3], "knobs": knobs, "logprobs": "processed"}
    want = _reference(inputs, **keywords)
    with small_blocks.strategy("auto" if path == "fused" else "split"):
        got = _verify(inputs, **keywords)
    _same(got, want)
    assert torch.allclose(got.logprobs, want.logprobs, atol=1e-5, rtol=0, equal_nan=True)


@pytest.mark.parametrize("path", ["fused", "split-histogram"])
def test_residual_with_no_mass_races_the_kept_target(small_blocks, monkeypatch, path):
    """Draft probabilities three times the target's (taken as given, unnormalised): every test accepts
    with probability p'/q' < 1, and on a rejection max(p' - q', 0) is 0 at every token, so the token is
    the race over p' itself; in one program per request (fused) and in the split terminal launch that
    the step defers its race to (split strategy, three slices a row)."""
    batch = 3
    inputs = _inputs(17, "probs", "none", batch)
    inputs["draft_probs"] = torch.clamp(inputs["target_probs"][:, :K] * 3, max=1.0)
    knobs = {"top_p": torch.full((batch,), 0.9)}
    if not _no_top_k(monkeypatch, small_blocks, path):
        knobs["top_k"] = torch.full((batch,), 0, dtype=torch.int32)  # given: the fused path, one program per request
    keywords = {"knobs": knobs}
    want = _reference(inputs, **keywords)
    assert int((want.num_accepted < inputs["num_draft_tokens"]).sum()) >= 2  # rejections, each racing over p'
    with small_blocks.strategy("auto" if path == "fused" else "split"):
        got = _verify(inputs, **keywords)
    _same(got, want)


def test_deferred_residuals_race_against_the_draft_as_given(small_blocks, monkeypatch):
    """Draft logits near the target's (its log plus noise of 0.3), drafts drawn at random (all rejected),
    top_p 0.5 on both sides: each rejection's deferred race runs over max(p' - q', 0) with the draft cut the
    same way (q'), as the torch reference does; against q (the draft left whole) the reference picks other
    tokens here, so a race against the wrong law fails."""
    inputs = _inputs(23, "probs", "logits")
    generator = torch.Generator().manual_seed(29)
    inputs["draft_token_ids"] = torch.randint(0, V, (B, K), generator=generator)
    inputs["draft_logits"] = torch.log(inputs["target_probs"][:, :K]) + 0.3 * torch.randn(B, K, V, generator=generator)
    inputs["temperatures"] = torch.ones(B)
    keywords = {"knobs": {"top_p": torch.full((B,), 0.5)}}
    want = _reference(inputs, **keywords, truncate_draft_logits=True)
    with small_blocks.strategy("split"):
        got = _verify(inputs, **keywords, truncate_draft_logits=True)
    _same(got, want)
    # (the draft left whole, deferred too in the mixed-batch tests, gives other tokens on these inputs)
    whole = _reference(inputs, **keywords, truncate_draft_logits=False)
    assert not torch.equal(want.output_token_ids, whole.output_token_ids)


# --- a batch given no top_k: drafts decided before the search (histogram.STEP_DECIDE) ---------------------


def _decided_run(monkeypatch, launch, inputs: dict, keywords: dict, strategy: str, decide: int, rounds: int = 0,
                 fold: int = 0):
    """The Triton step on fresh scratch whose floats are NaN and ints the search's fallback stage (a summary
    read that nothing wrote gives other tokens), with the split histogram path's decisions off (0), after its
    first level (1) or from one pass's bounds (2; with `rounds`, one round per slot; with `fold`, each request's
    decision by its last program of the pass): the result, each request's (t, clean) and how many cells were
    skipped."""
    from specbench.kernels import histogram

    monkeypatch.setitem(launch.TUNING, "split_search", 1)
    monkeypatch.setitem(launch.TUNING, "histogram_decide", decide)  # (at any batch)
    monkeypatch.setitem(launch.TUNING, "bounds_rounds", rounds)
    monkeypatch.setitem(launch.TUNING, "decision_fold", fold)
    scratches = histogram_scratches(monkeypatch, launch)
    with launch.strategy(strategy):
        got = _verify(inputs, **keywords)
    batch, num_slots = inputs["draft_token_ids"].shape[0], inputs["draft_token_ids"].shape[1] + 1
    cells = batch * num_slots * 2
    stage = scratches[0].radix_state_i[:cells * histogram.STATE.value].view(cells, -1)[:, histogram.I_STAGE.value]
    decided = scratches[0].decided.view(batch, 3).cpu() if decide else None
    return got, decided, int((stage == histogram.SKIPPED.value).sum())


_DECIDED_FORMS = [(FORMS[0], "split"), (FORMS[1], "split"), (FORMS[1], "sequential"), (FORMS[3], "sequential"),
                  (FORMS[4], "split"), (FORMS[5], "sequential"), (FORMS[6], "split")]


@pytest.mark.parametrize(("form", "strategy", "way", "rounds", "fold"),
                         [(*_DECIDED_FORMS[i], 1, 0, 0) for i in (1, 3, 6)]
                         + [(*case, 2, 0, 0) for case in _DECIDED_FORMS]
                         + [(*_DECIDED_FORMS[i], 2, 1, 0) for i in (2, 5)]
                         + [(*_DECIDED_FORMS[i], 2, 0, 1) for i in (0, 1, 6)] + [(*_DECIDED_FORMS[5], 2, 1, 1)]
                         + [(*_DECIDED_FORMS[i], 1, 0, 1) for i in (1, 3, 6)])
def test_decided_drafts_equal_the_reference(small_blocks, monkeypatch, form, strategy, way, rounds, fold):
    """A batch given no top_k decides its requests' first drafts after the histogram path's first level (way 1,
    three forms) or from one pass's bounds before it (way 2, requests without min_p, every form; all slots at
    once or one round per slot), each request's decisions by a launch of their own or, `fold` (seven cases), by
    the request's last program of the launch before (the bounds pass, or the first level), from bounds on p'(x)
    and q'(x), and searches only the rows its step then reads: the same tokens and counts as the torch reference
    (and, way 1, as every row searched; folded, the same decisions as by a launch), every clean decision the
    reference's, some requests decided past their first draft, and cells skipped; the step reads no summary of a
    skipped cell (the scratch starts as NaN)."""
    target, draft, truncate_draft = form
    inputs = _inputs(31 + FORMS.index(form), target, draft)
    values = inputs.get("target_logits", inputs.get("target_probs"))
    inputs["draft_token_ids"] = values[:, :K].nan_to_num(nan=-math.inf).argmax(-1)  # accepted mostly
    inputs["draft_token_ids"][4, 1] = 5  # a draft the target's cut may leave out
    if target == "logits":  # a draft far below its row's largest value (p(x) about exp(-1e4): rejected)
        values[5, 1, inputs["draft_token_ids"][5, 1]] = -1.0e4
    keywords = {"knobs": {"top_p": torch.tensor([0.7, 0.9, 0.95, 0.8, 0.6, 0.999]),
                          "min_p": torch.tensor([0.0, 0.1, 0.0, 0.05, 0.0, 0.0])},
                "truncate_draft_logits": truncate_draft}
    want = _reference(inputs, **keywords)
    got, decided, skipped = _decided_run(monkeypatch, small_blocks, inputs, keywords, strategy, way, rounds, fold)
    _same(got, want)
    if fold:  # (the decisions a launch after the pass takes, to the bit)
        launched, by_launch, launched_skipped = _decided_run(monkeypatch, small_blocks, inputs, keywords, strategy,
                                                             way, rounds, 0)
        _same(got, launched)
        assert torch.equal(decided, by_launch) and skipped == launched_skipped, (decided, by_launch)
    if way == 1:  # (every row searched: the same tokens, nothing skipped; once a form)
        every_row, _none, none_skipped = _decided_run(monkeypatch, small_blocks, inputs, keywords, strategy, 0)
        _same(every_row, want)
        assert none_skipped == 0
    assert skipped > 0
    clean = decided[:, 1] == 1
    assert bool(clean.any()), decided
    # a clean decision is the reference's: its drafts accepted, and the next one rejected (or none left)
    assert torch.equal(decided[clean, 0], want.num_accepted[clean]), (decided, want.num_accepted)
    assert int(decided[2, 0]) == 0 and int(decided[2, 1]) == 0  # the greedy request: nothing decided
    if way == 2:  # requests with min_p decide nothing this way
        assert int(decided[1, 0]) == 0 and int(decided[1, 1]) == 0
    if target == "logits":  # the draft far below the largest value: rejected without a search, where reached
        assert int(decided[5, 1]) == 1 and int(decided[5, 0]) <= 1, decided
    if form != ("probs", "none", True):  # (one-hot drafts on these target probabilities: all rejected at once)
        assert bool((decided[clean, 0] > 0).any()), decided  # a draft accepted without a search


@pytest.mark.parametrize(("form", "strategy"), [(FORMS[0], "split"), (FORMS[1], "split"), (FORMS[3], "sequential"),
                                                (FORMS[4], "split"), (FORMS[6], "sequential")])
def test_races_decided_from_the_first_levels_bracket_are_the_reference(small_blocks, monkeypatch, form, strategy):
    """Drafts decided from one pass's bounds, and each clean stop's race tried from the first level's bracket (the
    launcher's way, bracket_race.py) or the second's: over several batches with drafts drawn at random (most rejected: residual races,
    or for one-hot drafts the race over p' without the draft) or the target's argmax (bonus races), top_p from 0.5 to
    0.99 on rows with ties, NaN and -inf, the tokens are the torch reference's (as those of the race left to the
    whole search are: test_the_stop_rows_largest_values_from_the_bounds_pass_give_the_same_search); some races are
    decided there, and their stop rows are never summarised (the scratch starts as NaN: the step reads no summary of
    them, and the later launches pass over them), and some are not. (Five forms, not seven: the suite's time.)"""
    from specbench.kernels import histogram

    target, draft, truncate_draft = form
    raced, not_raced = [0, 0], [0, 0]
    monkeypatch.setitem(small_blocks.TUNING, "split_search", 1)
    monkeypatch.setitem(small_blocks.TUNING, "histogram_decide", 2)  # (at any batch)
    for seed in range(4):
        inputs = _inputs(200 + seed, target, draft)
        values = inputs.get("target_logits", inputs.get("target_probs"))
        generator = torch.Generator().manual_seed(seed)
        if seed % 2:  # the target's own argmax: mostly accepted, so bonus races
            inputs["draft_token_ids"] = values[:, :K].nan_to_num(nan=-math.inf).argmax(-1)
        else:
            inputs["draft_token_ids"] = torch.randint(0, V, (B, K), generator=generator)
        inputs["temperatures"] = torch.tensor([1.0, 0.7, 0.8, 1.3, 1.0, 0.9])
        keywords = {"knobs": {"top_p": torch.tensor([0.5, 0.9, 0.95, 0.99, 0.8, 0.7])},
                    "truncate_draft_logits": truncate_draft}
        want = _reference(inputs, **keywords)
        for race in (1, 2):  # (after the first level, after the second)
            monkeypatch.setitem(small_blocks.TUNING, "histogram_race", race)
            scratches = histogram_scratches(monkeypatch, small_blocks)
            with small_blocks.strategy(strategy):
                _same(_verify(inputs, **keywords), want)
            num_slots = K + 1
            decided = scratches[0].decided.view(B, 3).cpu()
            summaries = scratches[0].summary_f[:B * num_slots * 8].view(B, num_slots, 2, 4).cpu()
            stages = scratches[0].radix_state_i[:B * num_slots * 2 * histogram.STATE.value].view(
                B, num_slots, 2, -1)[..., histogram.I_STAGE.value].cpu()
            won = decided[:, 2] >= 0
            assert bool((decided[won, 1] == 1).all()), decided  # (clean stops only)
            for b in won.nonzero().flatten().tolist():
                t = int(decided[b, 0])
                assert int(want.output_token_ids[b, t]) == int(decided[b, 2])
                assert int(stages[b, t, 0]) == histogram.RACED.value
                assert bool(summaries[b, t, 0].isnan().all()), (b, t)  # never summarised
            raced[race - 1] += int(won.sum())
            not_raced[race - 1] += int(((decided[:, 1] == 1) & ~won).sum())
    assert min(raced) > 0 and not_raced[0] > 0, (raced, not_raced)


_SENTINEL_MAX = 1234.5  # (a largest value no row of these tests has)


def _poisoned_row_maxima(monkeypatch, launch, num_draft: torch.Tensor, num_slots: int, sides: int) -> None:
    """From here on, after each launch of the bounds pass that takes the decisions (its decision launch, or the pass
    itself folded), the cells of every row a request stopped at (t < n) hold _SENTINEL_MAX as the row's largest value
    in the search's state, where the search may take it from."""
    from specbench.kernels import histogram

    bounds = launch._DRAFT_BOUNDS

    def poisoned(grid, args, num_warps, stream, **constexprs):
        bounds(grid, args, num_warps, stream, **constexprs)
        if constexprs["STEP"] == 1 or constexprs["FOLD"]:  # (args: partials, decisions, the state's largest values,
            # ...)
            decided, row_max = args[1].view(-1, 3).cpu(), args[2]
            for b, t in enumerate(decided[:, 0].tolist()):
                if t < int(num_draft[b]):
                    for side in range(sides):
                        row_max[((b * num_slots + t) * 2 + side) * histogram.STATE.value] = _SENTINEL_MAX

    monkeypatch.setattr(launch, "_DRAFT_BOUNDS", poisoned)


@pytest.mark.parametrize(("form", "rounds", "rows", "after"),
                         [(FORMS[1], 0, 1, None), (FORMS[1], 1, 0, None), (FORMS[6], 0, 0, None),
                          (FORMS[5], 0, 1, None), (FORMS[1], 1, 2, None), (FORMS[6], 0, 2, 2)])
def test_the_stop_rows_largest_values_from_the_bounds_pass_give_the_same_search(small_blocks, monkeypatch, form,
                                                                                rounds, rows, after):
    """Drafts decided from one pass's bounds (all slots at once, or a round per slot; one program per cell, per
    request, or per request for its stop row and then for the rows after it): the search's first launch taking the
    largest value of each row searched at a request's stop from that pass (``histogram_bounds_max`` 1, the
    launcher's) gives the same tokens, summaries (bit for bit: request
    0's target rows peak at -0.0, which both read as +0.0) and level counts as reading the rows again (0), on fresh
    NaN scratch, the latter with those values replaced by a sentinel after the pass (ignored); with the sentinel
    and 1, every stop row's summary holds the sentinel, on each side the search reads: the values are taken."""
    from specbench.kernels import histogram

    target, draft, truncate_draft = form
    inputs = _inputs(37 + FORMS.index(form), target, draft)
    if target == "logits":
        logits = inputs["target_logits"]
        logits[0] = -logits[0].nan_to_num(nan=-math.inf).abs()
        peaks = logits[0].argmax(-1)
        logits[0, torch.arange(K + 1), peaks] = -0.0
    values = inputs.get("target_logits", inputs.get("target_probs"))
    inputs["draft_token_ids"] = values[:, :K].nan_to_num(nan=-math.inf).argmax(-1)  # accepted mostly
    for b, slot in ((0, 1), (4, 0), (5, 1)):  # drafts the target's cut leaves out (its least value): rejected
        row = values[b, slot].nan_to_num(nan=math.inf)
        inputs["draft_token_ids"][b, slot] = row.masked_fill(row <= (0 if target == "probs" else -1e30),
                                                             math.inf).argmin()
    keywords = {"knobs": {"top_p": torch.tensor([0.7, 0.9, 0.95, 0.8, 0.6, 0.999])},
                "truncate_draft_logits": truncate_draft}
    batch, num_slots = inputs["draft_token_ids"].shape[0], K + 1
    sides = 2 if draft == "logits" and truncate_draft else 1
    runs, bounds = [], small_blocks._DRAFT_BOUNDS
    for bounds_max, poison in ((0, True), (1, False), (1, True)):
        monkeypatch.setattr(small_blocks, "_DRAFT_BOUNDS", bounds)
        for name, value in (("histogram_bounds_max", bounds_max), ("split_search", 1), ("histogram_decide", 2),
                            ("bounds_rounds", rounds), ("histogram_rows", rows),
                            ("histogram_after_slices", after), ("histogram_race", 0)):  # (every stop row searched)
            monkeypatch.setitem(small_blocks.TUNING, name, value)
        scratches = histogram_scratches(monkeypatch, small_blocks)
        if poison:
            _poisoned_row_maxima(monkeypatch, small_blocks, inputs["num_draft_tokens"], num_slots, sides)
        with small_blocks.strategy("split"):
            runs.append((_verify(inputs, **keywords), scratches[0]))
    (plain, plain_scratch), (variant, variant_scratch), (_poisoned, poisoned_scratch) = runs
    _same(variant, plain)
    _same(plain, _reference(inputs, **keywords))
    for name in ("summary_f", "summary_i", "counts"):
        want, got = getattr(plain_scratch, name), getattr(variant_scratch, name)
        if want.is_floating_point():
            want, got = want.nan_to_num(7.0).view(torch.int32), got.nan_to_num(7.0).view(torch.int32)
        assert torch.equal(want, got), name
    decided = variant_scratch.decided.view(batch, 3)
    deciding = (keywords["knobs"]["top_p"] < 1) & (inputs["temperatures"] != 0)
    stops = deciding & (decided[:, 0] < inputs["num_draft_tokens"])
    assert int(stops.sum()) >= 2, decided
    summaries = variant_scratch.summary_f[:batch * num_slots * 8].view(batch, num_slots, 2, 4)
    poisoned = poisoned_scratch.summary_f[:batch * num_slots * 8].view(batch, num_slots, 2, 4)
    for b in stops.nonzero().flatten().tolist():
        t = int(decided[b, 0])
        for side in range(sides):
            assert float(poisoned[b, t, side, 0]) == _SENTINEL_MAX, (b, t, side)
            assert float(summaries[b, t, side, 0]) != _SENTINEL_MAX, (b, t, side)
    if target == "logits":  # (request 0's row at its stop was searched, its largest value +0.0)
        assert bool(stops[0]), decided
        m = summaries[0, int(decided[0, 0]), 0, 0]
        assert float(m) == 0.0 and not bool(torch.signbit(m)), m
    stage = variant_scratch.radix_state_i[:batch * num_slots * 2 * histogram.STATE.value]
    # (rows 2 takes only the cells the step reads: the others are never marked, nor their state written)
    assert bool((stage.view(batch, num_slots, 2, -1)[..., 0] == histogram.SKIPPED.value).any()) is (rows != 2)


@pytest.mark.parametrize("draft", ["logits", "probs"])
@pytest.mark.parametrize("way", [1, 2])
def test_decisions_on_rows_of_no_mass(small_blocks, monkeypatch, draft, way):
    """Rows with no value of mass among decided requests: a draft-logit row (the step reads its draft as one-hot,
    q'(x) = 1), a target row (invalid: nothing accepted there) beside a negative draft probability; a target
    row whose only value is +inf; a draft 80 nats below its row's largest value; equal to the reference either
    way of deciding. (Bounds that call a row of no mass sure, for one, accept the first two drafts here.)"""
    generator = torch.Generator().manual_seed(43)
    logits = torch.randn(4, K + 1, V, generator=generator)
    logits[1, 0] = math.nan  # the target row of request 1, slot 0: no value of mass
    logits[2, 1] = -math.inf
    logits[2, 1, 9] = math.inf  # one token of +inf
    inputs = {"target_logits": logits, "draft_token_ids": logits[:, :K].nan_to_num(nan=-math.inf).argmax(-1),
              "temperatures": torch.ones(4), "num_draft_tokens": torch.full((4,), K, dtype=torch.int32),
              "seeds": torch.arange(4) + 7, "positions": torch.zeros(4, dtype=torch.int64)}
    # request 3, slot 0: a draft 80 nats below its row's largest value (masses clamped 64 nats above it, and
    # p'(x) about exp(-80), a normal float32)
    inputs["draft_token_ids"][3, 0] = (inputs["draft_token_ids"][3, 0] + 1) % V
    logits[3, 0, inputs["draft_token_ids"][3, 0]] = logits[3, 0].max() - 80.0
    draft_logits = logits[:, :K] + 0.5 * torch.randn(4, K, V, generator=generator)
    draft_logits[1, 0] = 0.0
    if draft == "logits":
        draft_logits[0, 0] = math.nan  # the draft row of request 0, slot 0: a one-hot draft
        inputs["draft_logits"] = draft_logits
    else:
        inputs["draft_probs"] = torch.softmax(draft_logits, dim=-1)
        inputs["draft_probs"][1, 0, inputs["draft_token_ids"][1, 0]] = -0.5
    keywords = {"knobs": {"top_p": torch.full((4,), 0.9)}, "truncate_draft_logits": True}
    want = _reference(inputs, **keywords)
    got, _decided, _skipped = _decided_run(monkeypatch, small_blocks, inputs, keywords, "split", way)
    _same(got, want)


@pytest.mark.parametrize(("way", "rounds"), [(1, 0), (2, 0), (2, 1)])
def test_decisions_where_the_bounds_are_wide(small_blocks, monkeypatch, way, rounds):
    """Peaked rows of 40 tokens (a cutoff token of a few percent of the mass, so the bounds on S are wide),
    draft logits near the target's and drafts among each row's first three tokens: u q'(x) falls inside the
    bounds often, so requests stop deciding there (clean 0) and the step tests those drafts itself from
    exact summaries; equal to the reference over three seeds. (Bounds on S that leave out the cutoff token's
    mass, for one, accept drafts here that the reference rejects.)"""
    batch = 8
    generator = torch.Generator().manual_seed(37)
    logits = torch.randn(batch, K + 1, V, generator=generator) * 2.5
    ranked = logits[:, :K].argsort(-1, descending=True)
    pick = torch.randint(0, 3, (batch, K, 1), generator=generator)
    inputs = {"target_logits": logits, "draft_logits": logits[:, :K] + 0.3 * torch.randn(batch, K, V,
                                                                                        generator=generator),
              "draft_token_ids": ranked.gather(-1, pick).squeeze(-1), "temperatures": torch.ones(batch),
              "num_draft_tokens": torch.full((batch,), K, dtype=torch.int32), "positions": torch.zeros(batch,
                                                                                                      dtype=torch.int64)}
    keywords = {"knobs": {"top_p": torch.tensor([0.5, 0.8, 0.9, 0.95]).repeat(batch // 4)},
                "truncate_draft_logits": True}
    unsure = 0
    for seed in range(3):
        inputs["seeds"] = torch.arange(batch) + 1000 * seed
        want = _reference(inputs, **keywords)
        got, decided, _skipped = _decided_run(monkeypatch, small_blocks, inputs, keywords, "split", way, rounds)
        _same(got, want)
        unsure += int(((decided[:, 1] == 0)).sum())
    assert unsure > 0


# --- the group maxima pass, loading a chunk ahead or not ---------------------------------------------------------


try:  # (the kernel below calls cutoffs.group_maxima; without Triton the fixture skips every test here)
    import triton
    import triton.language as tl

    from specbench.kernels.cutoffs import _kth_largest_bound, _kth_largest_bound_from, group_maxima
except ModuleNotFoundError:
    triton = None

if triton is not None:

    @triton.jit
    def _group_maxima_kernel(rows_ptr, out_ptr, V, num_groups, SLICE: tl.constexpr, inv_temperature,
                             TARGET_PROBS: tl.constexpr, GROUP_ROWS: tl.constexpr, PREFETCH: tl.constexpr):
        # a program per (row, slice of SLICE groups) writes its slice's maxima
        row = tl.program_id(0)
        first = tl.program_id(1) * SLICE
        last = tl.minimum(first + SLICE, num_groups)
        group_maxima(rows_ptr + row * V, V, inv_temperature, out_ptr + row * num_groups, first, last, TARGET_PROBS,
                     GROUP_ROWS, PREFETCH)

    @triton.jit
    def _bisections_kernel(keys_ptr, guesses_ptr, out_ptr, k, enough, N: tl.constexpr):
        # row r's order keys (INT32_MIN: no entry): the bisection from the top bit, then from the bits the row's
        # largest key shares with each guess (near, far) of row r: (c, count) of each
        r = tl.program_id(0)
        key = tl.load(keys_ptr + r * N + tl.arange(0, N))
        c, count = _kth_largest_bound(key, k, enough)
        c_from, count_from = _kth_largest_bound_from(key, k, enough, tl.max(key, axis=0), tl.load(guesses_ptr + r * 2),
                                                     tl.load(guesses_ptr + r * 2 + 1))
        tl.store(out_ptr + r * 4 + 0, c)
        tl.store(out_ptr + r * 4 + 1, count)
        tl.store(out_ptr + r * 4 + 2, c_from)
        tl.store(out_ptr + r * 4 + 3, count_from)


def _order_keys(values: torch.Tensor) -> torch.Tensor:
    """The kernels' int32 order keys of float32 values (cutoffs._order_key32), NaN as no entry (INT32_MIN)."""
    bits = values.float().view(torch.int32)
    keys = torch.where(bits >= 0, bits, bits ^ 0x7FFFFFFF)
    return keys.masked_fill(values.isnan(), torch.iinfo(torch.int32).min)


@pytest.mark.parametrize("enough", [5, 12])
def test_a_bisection_started_from_shared_bits_bounds_the_kth_largest_as_from_the_top(small_blocks, enough):
    """cutoffs._kth_largest_bound_from, the top-k path's bisections started from the bits the row's largest key
    shares with a guess, on rows of 64 keys (continuous values of both signs, ties, probabilities, a few entries
    or none): with guesses just below the k-th largest (the start holds k keys), above it (it does not: the
    other guess, or both above: the top bit), and of the other sign, k = 5. Its bound is one (at least k keys
    at or above it, their count returned, at most `enough` of them or the k-th largest itself), and where the
    bisection from the top bit ends at the k-th largest or at exactly k keys (enough = k), the keys at or above
    each bound are the same set."""
    k, n = 5, 64
    generator = torch.Generator().manual_seed(11)
    rows = [torch.randn(n, generator=generator) * 3, torch.randn(n, generator=generator).abs() + 20.0,
            torch.randint(-3, 4, (n,), generator=generator).float(),
            torch.softmax(torch.randn(n, generator=generator) * 2, 0),
            -torch.rand(n, generator=generator) - 1.0]
    sparse = torch.full((n,), math.nan)
    sparse[[3, 9, 40]] = torch.tensor([1.0, 2.0, 0.5])  # fewer than k entries
    rows += [sparse, torch.full((n,), math.nan)]
    values = torch.stack(rows)
    cases = []
    for row in values:
        entries = row[~row.isnan()].sort(descending=True).values
        kth = entries[k - 1].item() if len(entries) >= k else 0.0
        top = entries.max().item() if len(entries) else 1.0
        for near, far in ((kth * 0.999 if kth > 0 else kth * 1.001, -kth), (top, kth - 1.0), (top, top),
                          (-abs(kth) - 5.0, 1e30)):
            cases.append((row, near, far))
    keys = _order_keys(torch.stack([row for row, _near, _far in cases]))
    guesses = _order_keys(torch.tensor([[near, far] for _row, near, far in cases], dtype=torch.float32))
    out = torch.zeros(len(cases), 4, dtype=torch.int32)
    _bisections_kernel[(len(cases),)](keys, guesses, out, k, enough, n)
    for row, (c, count, c_from, count_from) in zip(keys, out.tolist()):
        entries = int((row > torch.iinfo(torch.int32).min).sum())
        kth = row.sort(descending=True).values[k - 1].item() if entries >= k else torch.iinfo(torch.int32).min
        for bound, counted in ((c, count), (c_from, count_from)):
            at_least = int((row >= bound).sum()) if bound > torch.iinfo(torch.int32).min else entries
            assert counted == at_least and bound <= kth
            assert counted <= enough or bound == kth or entries < k
        if enough == k and entries >= k:
            assert torch.equal(row >= c, row >= c_from)


@pytest.mark.parametrize("is_probs", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_group_maxima_pass_loading_ahead_writes_what_the_plain_one_does(small_blocks, is_probs, dtype):
    """The pass (cutoffs.group_maxima) with each chunk loaded one iteration ahead (the fused step's) and
    without (the prepass's), on rows of several chunks of 2 groups cut into slices of 3 and 4 groups (a
    slice ending inside a chunk, a short last one): the same maxima, bit for bit, equal to the groups'
    largest values (temperature 1.3, and 0 where a +inf logit has no mass), and nothing written outside
    each program's slice."""
    vocab = 233  # 8 groups, the last one short
    generator = torch.Generator().manual_seed(3)
    stored = _rows(generator, 1, 3, vocab)[0]
    stored[1, 40:70] = math.inf
    if is_probs:
        stored = torch.softmax(stored.nan_to_num(nan=-math.inf, posinf=30.0), dim=-1)
        stored[2, 100:140] = -0.25  # no mass
    stored = stored.to(dtype)
    groups = -(-vocab // 32)
    for inv_temperature in (1 / 1.3, 0.0):
        for slice_groups in (3, 4):
            got = {}
            for prefetch in (False, True):
                out = torch.full((3, groups), math.nan)
                _group_maxima_kernel[(3, -(-groups // slice_groups))](stored, out, vocab, groups, slice_groups, inv_temperature,
                                                                      is_probs, 2, prefetch)
                got[prefetch] = out
            assert torch.equal(got[True], got[False]), (got[True], got[False])
            padded = torch.nn.functional.pad(stored.float(), (0, groups * 32 - vocab), value=-math.inf)
            padded = padded.masked_fill(padded.isnan(), -math.inf)  # a NaN entry has no mass: never a maximum
            if is_probs:
                largest = padded.view(3, groups, 32).amax(-1).clamp(0.0, 1.0)
                want = torch.where(largest > 0, largest, -math.inf)
            else:
                raw = padded if inv_temperature else padded.masked_fill(padded == math.inf, -math.inf)
                want = (raw.view(3, groups, 32).amax(-1) * inv_temperature).nan_to_num(nan=-math.inf)
                want = want.clamp(max=torch.finfo(torch.float32).max) + 0.0  # -0 read as 0
            assert torch.equal(got[True], want), (got[True], want)


@pytest.mark.parametrize("strategy, capped", [("sequential", True), ("split", False)])
def test_only_the_fused_step_launches_with_its_register_cap(small_blocks, monkeypatch, strategy, capped):
    """The launcher caps the truncated step's registers (launch._register_cap) where the step summarises its own
    rows (FUSED: a batch that does not split), not where the prepass did; the tokens are the same either way."""
    asked = []
    launcher = small_blocks._TRUNCATED

    def recorded(grid, args, num_warps, stream, max_registers=None, **constexprs):
        asked.append((constexprs["FUSED"], max_registers))
        return launcher(grid, args, num_warps, stream, max_registers=max_registers, **constexprs)

    monkeypatch.setattr(small_blocks, "_TRUNCATED", recorded)
    monkeypatch.setattr(small_blocks, "_register_cap", lambda num_warps: 77)
    inputs = _inputs(7, "logits", "logits", batch=2)
    knobs = {"top_k": torch.tensor([3, 5], dtype=torch.int32)}
    with small_blocks.strategy(strategy):
        got = _verify(inputs, knobs=knobs)
    assert asked == [(capped, 77 if capped else None)]
    _same(got, _verify(inputs, backend="torch", knobs=knobs))
