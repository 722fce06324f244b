"""Kernel benchmarks: cases, inputs with controlled acceptance, implementations, runs, records.

A *case* is one shape and setting: mode, ``B``, ``K``, ``V``, dtype, draft kind, the acceptance
the inputs are built to have, and whether calls are timed inside a CUDA graph. Every
implementation runs on the same inputs; its output is checked against the torch reference
before it is timed, and a wrong one is recorded as ``FAIL`` and not timed.

Controlled acceptance. Each request ``b`` gets a planned accepted count ``A_b``, assigned so the
batch follows ``P(A = j)`` of the profile as closely as ``B`` allows (largest remainders, then a
fixed shuffle; an acceptance length ``L`` becomes rates by the minimum-variance schedule). The
inputs make every position ``i < A_b`` accepted and position ``A_b`` rejected, for sure:

- ``i < A_b``: the draft is the argmax of the target row. Greedy accepts it. With draft logits
  the draft row is the target row with the draft's logit lowered by 1, so ``q(x) < p(x)`` and
  ``u * q(x) < p(x)`` for every ``u < 1``; draft probabilities are that row's softmax; without
  a draft distribution the target logit of the draft is raised by 40, so ``p(x) = 1``.
- ``i = A_b``: the draft is another token whose target logit is set to ``-1e4``: it is not the
  argmax and ``p(x) = 0``, so it is rejected.
- Everything else is random normal logits (never zeros) and random draft tokens.

Under truncation (``top_k``, ``top_p``, ``min_p``, the mixed batch) the plan still holds: an
accepted draft is the argmax of its target row, which every knob keeps, and renormalising over
the kept set only raises ``p'(x)``; the draft row (the target row with ``x`` lowered by 1) keeps at
least the other tokens the target keeps (each knob cuts it no deeper), so ``q'(x) < p'(x)`` still,
or ``x`` is cut from the draft (``q'(x) = 0``); draft probabilities are taken as given
(``q(x) < p(x) <= p'(x)``); a one-hot draft has ``p'(x) = 1``. A rejected draft has ``p(x) = 0``, so
``p'(x) = 0``. Greedy rows are not truncated at all.

The synthetic mode ignores the distributions and accepts at the profile's rates, so its measured
acceptance varies around the requested one; every record reports the measured mean length.

Bytes a case must move (``bytes_needed``), counted from the accepted counts the reference
emits, with early exit (nothing after a request's first rejection is needed):

- target rows ``0..A_b`` (``A_b + 1`` rows of ``V`` elements; the last is the rejected or
  bonus row), except the synthetic mode, which never looks at accepted rows: one row;
- draft logits: rows ``0..min(A_b, K - 1)`` (a draft row must be normalised to give ``q(x)``);
  draft probabilities: one value per accepted position plus the whole rejected row (its
  residual), nothing more when all ``K`` are accepted;
- re-reading the rejected row for the residual is not counted (a re-read is not a needed byte);
- small tensors: draft ids and outputs (int64), per-request counts, seeds, positions and
  temperatures;
- under truncation with target probabilities, every target row ``0..A_b`` whole (``p'(x)`` needs
  the kept set's sum), as for logits; draft rows as without truncation (a draft-logit row is read
  whole anyway). The per-request knobs are not counted (12 bytes a request);
- with ``logprobs``, the ``[B, K + 1]`` float32 log-probabilities written, and with target
  probabilities every target row ``0..A_b`` whole (each emitted token's row over its sum);
- ``method="block"`` (``verification.py``, for ``n = K``): the weights need ``p_i(x_i)`` and
  ``q_i(x_i)`` for every ``i < K``, so with logits every target row ``0..K-1`` and every draft-logit
  row ``0..K-1``, whatever ``A_b``; with probabilities those values are gathered. The terminal row
  ``A_b`` (its draft row as well) or the bonus row ``K`` is read whole. The backward pass also reads
  row ``i`` (``max(A_b, 1) <= i < K``) for its residual mass where ``u_{i-1} < w_i``; which rows
  those are depends on the uniforms, so they are not counted: a floor, as the other counts are.

``bytes_all_rows`` counts every target row and every draft row once, plus the same small tensors.
GB/s in a record is ``bytes_needed`` over the median time.

Warm or cold (``cache_state``). Every timed record names its timer (``timing.TIMERS``) and says
whether its samples start from a cold cache: ``cold`` when the cache is flushed before every
sample outside a graph, or when ``bytes_needed`` exceeds the cache (the device's L2, a CPU's
last-level cache); ``warm`` when those bytes fit and nothing evicts them between calls: under a
graph (the flush runs once per replay of ``graph_calls`` calls) or without the flush. A ``cold``
record whose median is below the bytes-to-DRAM floor (``bytes_needed`` over the measured copy
bandwidth), by more than ``DRAM_FLOOR_MARGIN`` (a kernel that only reads beats the copy's
bandwidth by a few percent: up to 1.05x on an H200), cannot have moved its bytes from DRAM: it is
flagged ``below_dram_floor`` (its samples look warm, or it reads fewer bytes than the case needs).
"""

from __future__ import annotations

import gc
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

import torch

from specbench import acceptance, natural_inputs, rng, timing, tree_inputs
from specbench.errors import SpecbenchError
from specbench.implementations import Implementation
from specbench.methods import METHODS, check_method
from specbench.records import DRAM_FLOOR_MARGIN, describe_record, record_key
from specbench.sampling_cases import (
    KNOBS,
    MIXED,
    check_logprobs,
    checked_knobs,
    sampling_fields,
)
from specbench.scenarios import Profile
from specbench.timing import is_out_of_memory
from specbench.tree_shapes import TreeShape
from specbench.verification import MODES, SamplingParams, VerifyResult, verify

DRAFTS: tuple[str, ...] = ("logits", "probs", "none")
TARGETS: tuple[str, ...] = ("logits", "probs")
DTYPES: dict[str, torch.dtype] = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
BASELINE = "torch"
MIN_TOKEN_AGREEMENT = 0.999
INTERPRET_MAX_ELEMENTS = 1 << 18  # target logits elements the Triton interpreter is asked to run
# planned inputs (module docstring; tree_inputs too): a rejected draft's target logit, an accepted one-hot
# draft's raise
REJECTED_LOGIT = -1.0e4
PEAK_LOGIT = 40.0
# a GPU case whose inputs take at most PLACEMENT_BYTES is timed on TimingConfig.placement_count() copies
# of them at other addresses, each copy with its own set of the Triton kernels' scratch and arrival
# counters, each sample averaging one call on each (timing.py, "Placements": forty steady small rows
# between processes; whether by their addresses or by more calls a sample is open). Larger inputs take one.
PLACEMENT_BYTES = 64 << 20


@dataclass(frozen=True)
class Case:
    """One benchmark case. ``draft`` is ``"none"`` outside the probabilistic mode.

    ``acceptance`` is the label the case was asked for (``"3"``, ``"full"``, a scenario
    profile's name); ``rates`` the ``K`` unconditional rates the inputs are built to follow.

    ``top_k``, ``top_p``, ``min_p`` (None: off) truncate every request alike when ``sampling`` is
    ``"fixed"``; ``sampling="mixed"`` gives each request its own (``specbench.sampling_cases``).
    ``logprobs`` (``"processed"`` or ``"raw"``) times the step with log-probabilities returned.

    ``method`` is the verification method the step runs (``specbench/methods.py``). ``inputs`` is
    ``"planned"`` (``make_inputs``: acceptance by construction, the same for every method) or
    ``"natural"`` (``specbench/natural_inputs.py``: drafts drawn from target logits plus Gaussian noise
    of std ``draft_noise``; ``rates`` then only set ``K``, and the expected length comes from the inputs).

    ``tree`` (a shape string, ``tree_shapes``) and ``tree_parents``: the drafts form that tree
    (``specbench/tree_inputs.py``); ``num_spec_tokens`` is then its node count ``N`` and ``rates`` run
    over its spine's ``D`` depths.
    """

    mode: str
    batch_size: int
    num_spec_tokens: int
    vocab_size: int
    dtype: str = "float32"
    draft: str = "none"
    rates: tuple[float, ...] = ()
    acceptance: str = ""
    cuda_graph: bool = False
    model: str | None = None
    target: str = "logits"
    top_k: int | None = None
    top_p: float | None = None
    min_p: float | None = None
    sampling: str = "fixed"
    logprobs: str | None = None
    method: str = "token"
    inputs: str = "planned"
    draft_noise: float | None = None
    tree: str | None = None
    tree_parents: tuple[int, ...] = ()

    @property
    def truncated(self) -> bool:
        """Whether any request's distribution is cut (a knob set, or the mixed batch)."""
        return self.sampling == "mixed" or any(getattr(self, name) is not None for name in KNOBS)

    @property
    def acceptance_length(self) -> float:
        return acceptance.mean_acceptance_length(self.rates)

    def key(self, impl: str, conversion: str | None = None) -> tuple:
        """What identifies one implementation's row of this case (``--resume`` skips known keys);
        ``conversion`` is where its inputs were converted, None when it took them as given."""
        return record_key(_record(self, impl, "planned", conversion=conversion))

    def describe(self) -> str:
        """``probabilistic/logits B=8 K=3 V=128256 float32 L=3 graph``: the case in one line."""
        return describe_record(_record(self, "", "planned"))


def plan_cases(
    *,
    modes: Sequence[str],
    batch_sizes: Sequence[int],
    vocabularies: Sequence[tuple[str | None, int]],
    profiles: Sequence[Profile],
    dtypes: Sequence[str] = ("float32",),
    drafts: Sequence[str] = ("logits",),
    cuda_graph: Sequence[bool] = (False,),
    targets: Sequence[str] = ("logits",),
    top_k: int | None = None,
    top_p: float | None = None,
    min_p: float | None = None,
    sampling: str = "fixed",
    logprobs: str | None = None,
    methods: Sequence[str] = ("token",),
    inputs: str = "planned",
    draft_noise: float | None = None,
    tree: TreeShape | None = None,
) -> list[Case]:
    """Every combination, validated: ``vocabularies`` are ``(model name or None, V)``; each
    acceptance profile brings its ``K`` and rates. Greedy and synthetic cases take no draft
    distribution, so they appear once whatever ``drafts`` holds.

    Every case takes the sampling parameters (``sampling_cases.checked_knobs``: a knob at its off
    value is None) except greedy cases, which truncation cannot change: they are planned untruncated
    (``logprobs`` they keep).

    ``methods``: the verification methods each probabilistic case runs (greedy and synthetic cases run
    ``token``: the greedy rule is every method's, and the synthetic profile has no other). ``inputs``
    ``"natural"`` (probabilistic cases only) builds ``natural_inputs`` with ``draft_noise`` (default
    ``natural_inputs.DEFAULT_DRAFT_NOISE``; an error with planned inputs); their cases keep one profile
    per ``K`` (its rates only set ``K``).

    ``tree``: every case verifies that tree (``specbench/tree_inputs.py``); each profile's ``K`` must be the
    length of the tree's spine, and the cases take the token method, untruncated, without logprobs and with
    planned inputs (what tree verification takes).
    """
    knobs = checked_knobs(top_k, top_p, min_p, sampling)
    for name in methods:
        check_method(name)
    if inputs not in natural_inputs.INPUTS:
        raise SpecbenchError(f"--inputs must be one of {', '.join(natural_inputs.INPUTS)}, got {inputs!r}")
    natural = inputs == "natural"
    if draft_noise is not None and not natural:
        raise SpecbenchError("--draft-noise is the noise of natural inputs: give --inputs natural with it")
    if draft_noise is None:
        draft_noise = natural_inputs.DEFAULT_DRAFT_NOISE
    if natural:
        for mode in modes:
            natural_inputs.check_natural(mode, sampling == "mixed" or any(knobs[name] is not None for name in KNOBS),
                                         draft_noise)
        profiles = list({profile.num_spec_tokens: profile for profile in profiles}.values())
    inputs_fields = {"inputs": inputs, "draft_noise": float(draft_noise)} if natural else {}
    tree_fields = _tree_fields(tree, profiles, knobs, sampling, logprobs, methods, natural)
    check_logprobs(logprobs)
    for mode in modes:
        if mode not in MODES:
            raise SpecbenchError(f"unknown mode {mode!r}; choose from {', '.join(MODES)} or all")
    for draft in drafts:
        if draft not in DRAFTS:
            raise SpecbenchError(f"unknown draft kind {draft!r}; choose from {', '.join(DRAFTS)}")
    for target in targets:
        if target not in TARGETS:
            raise SpecbenchError(f"unknown target input {target!r}; choose from {', '.join(TARGETS)}")
    for dtype in dtypes:
        if dtype not in DTYPES:
            raise SpecbenchError(f"unknown dtype {dtype!r}; choose from {', '.join(DTYPES)}")
    for batch in batch_sizes:
        if batch < 1:
            raise SpecbenchError(f"batch size must be at least 1, got {batch}")
    for _, vocab in vocabularies:
        if vocab < 2:
            raise SpecbenchError(f"vocabulary size must be at least 2 (a rejected draft needs another token), got {vocab}")
    cases = []
    for model, vocab in vocabularies:
        for profile in profiles:
            for mode in modes:
                for draft in (drafts if mode == "probabilistic" else ("none",)):
                    for dtype in dtypes:
                        for batch in batch_sizes:
                            for graph in cuda_graph:
                                for target in targets:
                                    for method in (methods if mode == "probabilistic" else ("token",)):
                                        cases.append(Case(
                                            mode, batch, tree_fields.get("num_nodes", profile.num_spec_tokens), vocab,
                                            dtype, draft, profile.rates, "natural" if natural else profile.name, graph,
                                            model, target, logprobs=logprobs, method=method, **inputs_fields,
                                            **(_knobs_at(knobs, vocab) if mode != "greedy" else {}),
                                            **tree_fields.get("case", {})))
    return list(dict.fromkeys(cases))


def _knobs_at(knobs: dict[str, Any], vocab: int) -> dict[str, Any]:
    # a case's knobs over its vocabulary: top_k >= V keeps every token, so it is off (None) there, as 0 is
    top_k = knobs["top_k"]
    return {**knobs, "top_k": None if top_k is not None and top_k >= vocab else top_k}


def _tree_fields(tree: TreeShape | None, profiles: Sequence[Profile], knobs: dict, sampling: str,
                 logprobs: str | None, methods: Sequence[str], natural: bool) -> dict[str, Any]:
    # a tree run's Case fields and node count, after refusing what trees do not take (one sentence each)
    if tree is None:
        return {}
    name = tree.name or "parents:" + ",".join(map(str, tree.parents))
    if sampling == "mixed" or any(knobs[knob] is not None for knob in KNOBS):
        raise SpecbenchError("--tree does not take truncation (--top-k, --top-p, --min-p, --sampling mixed) in this "
                             "version: tree verification is untruncated")
    if logprobs is not None:
        raise SpecbenchError("--tree does not take --logprobs in this version")
    if any(method != "token" for method in methods):
        raise SpecbenchError("--tree follows the token method only in this version; drop --method")
    if natural:
        raise SpecbenchError("--tree takes planned inputs only (its accepted path is planned); drop --inputs natural")
    depth = len(tree_inputs.spine(tree.parents))
    for profile in profiles:
        if profile.num_spec_tokens != depth:
            raise SpecbenchError(f"tree {name}: an acceptance profile of K={profile.num_spec_tokens} does not fit its "
                                 f"spine of {depth} first children (a tree case's K is that depth)")
    return {"num_nodes": len(tree.parents), "case": {"tree": name, "tree_parents": tuple(tree.parents)}}


def assign_accepted_counts(rates: Sequence[float], batch_size: int, seed: int = 0) -> list[int]:
    """Accepted drafts per request, ``0..K``, whose batch follows ``P(A = j)`` of ``rates``.

    Each count ``j`` appears ``B * P(A = j)`` times rounded by largest remainders (so the mean
    is exact whenever those products are whole); then, while the batch's total is off the nearest
    whole number to ``B * E[A]``, one request moves to the neighbouring count that strays least
    from the quotas, so the planned mean is within ``1 / (2B)`` of the profile's at every ``B``
    (at ``B = 1``: the count nearest ``E[A]``). The order is shuffled by ``seed``.
    """
    distribution = acceptance.accepted_distribution(rates)
    quotas = [batch_size * max(p, 0.0) for p in distribution]
    counts = [math.floor(q + 1e-9) for q in quotas]
    by_remainder = sorted(range(len(quotas)), key=lambda j: counts[j] - quotas[j])
    for j in by_remainder[: batch_size - sum(counts)]:
        counts[j] += 1
    missing = round(batch_size * sum(j * p for j, p in enumerate(distribution))) - sum(
        j * n for j, n in enumerate(counts))
    step = 1 if missing > 0 else -1
    for _ in range(abs(missing)):  # each move shifts the total by `step`
        moves = [j for j in range(len(counts)) if counts[j] > 0 and 0 <= j + step < len(counts)]
        j = max(moves, key=lambda j: (counts[j] - quotas[j]) - (counts[j + step] - quotas[j + step]))
        counts[j] -= 1
        counts[j + step] += 1
    planned = torch.tensor([j for j, n in enumerate(counts) for _ in range(n)], dtype=torch.int64)
    order = torch.randperm(batch_size, generator=torch.Generator().manual_seed(seed))
    return planned[order].tolist()


@dataclass
class CaseInputs:
    """The tensors of one case, as ``verify`` takes them."""

    case: Case
    target_logits: torch.Tensor  # [B, K + 1, V]
    draft_token_ids: torch.Tensor  # [B, K] int64
    planned_accepted: torch.Tensor | None  # [B] int64, the A_b the inputs are built for (None: natural inputs)
    draft_logits: torch.Tensor | None = None  # [B, K, V]
    draft_probs: torch.Tensor | None = None  # [B, K, V]
    # num_draft_tokens, sampling (a SamplingParams: temperatures and truncation), seeds, positions
    extra: dict[str, Any] = field(default_factory=dict)

    def verify_kwargs(self) -> dict[str, Any]:
        """Arguments of the public ``specbench.verification.verify`` (without ``backend``)."""
        synthetic = self.case.mode == "synthetic"
        rates = list(self.case.rates)
        if synthetic and self.case.tree is not None:  # rank 0 at each depth takes the profile's conditional rate
            rates = [[rate] for rate in acceptance.conditional_rates(self.case.rates)]
        if self.case.target == "probs":
            # built outside the timed region: softmax of the planned logits in float32, then the case dtype
            target = {"target_probs": torch.softmax(self.target_logits.float(), dim=-1).to(self.target_logits.dtype)}
        else:
            target = {"target_logits": self.target_logits}
        logprobs = {"logprobs": self.case.logprobs} if self.case.logprobs is not None else {}
        if self.case.method != "token":
            logprobs["method"] = self.case.method
        return dict(**target, draft_token_ids=self.draft_token_ids, mode=self.case.mode,
                    draft_logits=self.draft_logits, draft_probs=self.draft_probs,
                    acceptance_rates=rates if synthetic else None, **self.extra, **logprobs)


def sampling_params(case: Case, device: str | torch.device = "cpu") -> SamplingParams:
    """Each request's temperature and truncation for ``case`` (the one place a case's sampling becomes
    ``verify``'s ``sampling=``): temperature 1 (0 in the greedy mode) and the case's knobs for every
    request, each None when off; or, ``sampling="mixed"``, request ``b`` takes ``MIXED[b % 6]``
    (``specbench.sampling_cases``) as ``[B]`` tensors."""
    batch = case.batch_size
    if case.sampling == "mixed" and case.mode != "greedy":
        rows = [MIXED[b % len(MIXED)] for b in range(batch)]
        temperature, top_k, top_p, min_p = (list(column) for column in zip(*rows))
        return SamplingParams(
            temperatures=torch.tensor(temperature, dtype=torch.float32, device=device),
            top_k=torch.tensor(top_k, dtype=torch.int32, device=device),
            top_p=torch.tensor(top_p, dtype=torch.float32, device=device),
            min_p=torch.tensor(min_p, dtype=torch.float32, device=device))
    temperatures = torch.full((batch,), 0.0 if case.mode == "greedy" else 1.0, dtype=torch.float32, device=device)
    if case.mode == "greedy":  # truncation cannot change a greedy row
        return SamplingParams(temperatures=temperatures)
    return SamplingParams(temperatures=temperatures, top_k=case.top_k, top_p=case.top_p, min_p=case.min_p)


def make_inputs(case: Case, device: str | torch.device = "cpu", seed: int = 0) -> CaseInputs:
    """Random inputs for ``case`` whose accepted counts are planned (see the module docstring), or, for
    ``case.inputs == "natural"``, drafts drawn from a noisy copy of the target (``natural_inputs``)."""
    device = torch.device(device)
    if case.inputs == "natural":
        return _natural(case, device, seed)
    if case.tree is not None:
        return _tree(case, device, seed)
    batch, num_spec, vocab = case.batch_size, case.num_spec_tokens, case.vocab_size
    dtype = DTYPES[case.dtype]
    gen = torch.Generator(device=device).manual_seed(seed)
    planned = torch.tensor(assign_accepted_counts(case.rates, batch, seed), dtype=torch.int64, device=device)

    target = torch.randn(batch, num_spec + 1, vocab, generator=gen, dtype=dtype, device=device)  # [B, K + 1, V]
    slots = torch.arange(num_spec, device=device)
    accepted = slots[None, :] < planned[:, None]  # [B, K]
    rejected = slots[None, :] == planned[:, None]  # [B, K]
    top = target[:, :num_spec].argmax(dim=-1)  # [B, K]; ties to the lowest id, as greedy verification
    other = (top + torch.randint(1, vocab, (batch, num_spec), generator=gen, device=device)) % vocab
    anything = torch.randint(0, vocab, (batch, num_spec), generator=gen, device=device)
    drafts = torch.where(accepted, top, torch.where(rejected, other, anything))  # [B, K]

    rej_b, rej_i = rejected.nonzero(as_tuple=True)
    target[rej_b, rej_i, drafts[rej_b, rej_i]] = REJECTED_LOGIT  # p(x) = 0 and x is not the argmax
    acc_b, acc_i = accepted.nonzero(as_tuple=True)
    inputs = CaseInputs(case, target, drafts, planned)
    if case.mode == "probabilistic" and case.draft == "none":
        target[acc_b, acc_i, drafts[acc_b, acc_i]] += PEAK_LOGIT  # one-hot drafts: accept iff u < p(x) = 1
    elif case.mode == "probabilistic":
        draft_logits = torch.randn(batch, num_spec, vocab, generator=gen, dtype=dtype, device=device)  # [B, K, V]
        draft_logits[acc_b, acc_i] = target[acc_b, acc_i]
        draft_logits[acc_b, acc_i, drafts[acc_b, acc_i]] -= 1.0  # q(x) < p(x): u * q(x) < p(x) for every u < 1
        if case.draft == "logits":
            inputs.draft_logits = draft_logits
        else:
            inputs.draft_probs = torch.softmax(draft_logits.float(), dim=-1).to(dtype)
            del draft_logits
    inputs.extra = {
        "num_draft_tokens": torch.full((batch,), num_spec, dtype=torch.int32, device=device),
        "sampling": sampling_params(case, device),
        "seeds": rng.request_seed(seed, torch.arange(batch, dtype=torch.int64)).to(device),  # as in sweeps
        "positions": torch.zeros(batch, dtype=torch.int64, device=device),
    }
    return inputs


def _tree(case: Case, device: torch.device, seed: int) -> CaseInputs:
    batch = case.batch_size
    gen = torch.Generator(device=device).manual_seed(seed)
    planned = torch.tensor(assign_accepted_counts(case.rates, batch, seed), dtype=torch.int64, device=device)
    made = tree_inputs.tree_tensors(case.tree_parents, planned, case.vocab_size, DTYPES[case.dtype], case.mode,
                                    case.draft, gen, device)
    inputs = CaseInputs(case, made["target_logits"], made["draft_token_ids"], planned, made["draft_logits"],
                        made["draft_probs"])
    inputs.extra = {"num_draft_tokens": torch.full((batch,), case.num_spec_tokens, dtype=torch.int32, device=device),
                    "sampling": sampling_params(case, device),
                    "seeds": rng.request_seed(seed, torch.arange(batch, dtype=torch.int64)).to(device),
                    "positions": torch.zeros(batch, dtype=torch.int64, device=device), "tree": made["tree"]}
    return inputs


def _natural(case: Case, device: torch.device, seed: int) -> CaseInputs:
    batch, num_spec = case.batch_size, case.num_spec_tokens
    target, draft_logits, drafts = natural_inputs.natural_tensors(batch, num_spec, case.vocab_size, case.draft_noise,
                                                                  DTYPES[case.dtype], device, seed)
    inputs = CaseInputs(case, target, drafts, None)
    if case.draft == "logits":
        inputs.draft_logits = draft_logits
    elif case.draft == "probs":
        inputs.draft_probs = torch.softmax(draft_logits.float(), dim=-1).to(draft_logits.dtype)
    inputs.extra = {"num_draft_tokens": torch.full((batch,), num_spec, dtype=torch.int32, device=device),
                    "sampling": sampling_params(case, device),
                    "seeds": natural_inputs.request_seeds(seed, batch, device),
                    "positions": torch.zeros(batch, dtype=torch.int64, device=device)}
    return inputs


def bytes_moved(case: Case, num_accepted: torch.Tensor) -> tuple[int, int]:
    """``(bytes_needed, bytes_all_rows)`` of a case given the accepted counts (module docstring)."""
    batch, num_spec, vocab = case.batch_size, case.num_spec_tokens, case.vocab_size
    elem = DTYPES[case.dtype].itemsize
    row = vocab * elem
    accepted = num_accepted.to(torch.int64).cpu()
    if case.tree is not None:  # tree_inputs.tree_bytes; the tree's parents (int64) read as well
        small = batch * (num_spec * 8 * 2 + (num_spec + 1) * 8 + num_spec * 4 + 4 + 4) + batch * (4 + 8 + 8 + 4)
        has_draft = case.mode == "probabilistic" and case.draft != "none"
        all_rows = batch * (num_spec + 1 + (num_spec if has_draft else 0)) * row
        needed = tree_inputs.tree_bytes(case.tree_parents, accepted, row, elem, case.mode, case.draft)
        return needed + small, all_rows + small
    # per request: draft ids and output tokens (int64), num_emitted and num_accepted (int32) written,
    # num_draft_tokens (int32), seed and position (int64), temperature (float32) read
    small = batch * (num_spec * 8 + (num_spec + 1) * 8 + 4 + 4) + batch * (4 + 8 + 8 + 4)
    target_rows = batch if case.mode == "synthetic" else int((accepted + 1).sum())
    if case.logprobs is not None:
        small += batch * (num_spec + 1) * 4  # the float32 log-probabilities written
    # target rows read whole for their statistics (else target probabilities, gathered at the drafts)
    whole_rows = case.target == "logits" or case.truncated or case.logprobs is not None
    if case.mode == "probabilistic" and not whole_rows:
        # probabilities: p(x) gathered per accepted draft, the terminal row read whole
        needed = batch * row + int(accepted.sum()) * elem
    else:
        needed = target_rows * row
    has_draft = case.mode == "probabilistic" and case.draft != "none"
    if case.method == "block" and case.mode == "probabilistic":
        gathers = 0 if whole_rows else batch * num_spec * elem * (2 if has_draft else 1)  # p_i(x_i), q_i(x_i)
        needed = _block_rows(case, accepted, whole_rows) * row + gathers
    elif has_draft and case.draft == "logits":
        needed += int(torch.clamp(accepted + 1, max=num_spec).sum()) * row
    elif has_draft:
        needed += int((accepted < num_spec).sum()) * row + int(accepted.sum()) * elem
    all_rows = batch * (num_spec + 1 + (num_spec if has_draft else 0)) * row
    return needed + small, all_rows + small


def _block_rows(case: Case, accepted: torch.Tensor, whole_rows: bool) -> int:
    # the whole rows block verification must read (module docstring), summed over the requests; whole_rows:
    # target rows give p_i(x_i) from their statistics (else it is gathered)
    num_spec = case.num_spec_tokens
    has_draft = case.draft != "none"
    rows = 0
    for a in accepted.tolist():
        # whole rows as (target, draft) index sets: the terminal row, then the rows' statistics
        target = {a}
        draft = {a} if a < num_spec else set()
        if whole_rows:
            target |= set(range(num_spec))  # statistics for p_i(x_i) at every i < K
        if case.draft == "logits":
            draft |= set(range(num_spec))  # statistics for q_i(x_i)
        rows += len(target) + (len(draft) if has_draft else 0)
    return rows


def bytes_to_run(case: Case) -> int:
    """A floor on the memory ``case`` takes: its inputs (target rows, draft rows, per-request tensors)
    and, in the probabilistic mode, the float32 probabilities the torch reference computes from them."""
    batch, num_spec, vocab = case.batch_size, case.num_spec_tokens, case.vocab_size
    has_draft = case.mode == "probabilistic" and case.draft != "none"
    rows = batch * (num_spec + 1) + (batch * num_spec if has_draft else 0)
    per_element = DTYPES[case.dtype].itemsize + (4 if case.mode == "probabilistic" else 0)
    return rows * vocab * per_element + batch * (num_spec * 16 + 64)


def check_sizes(cases: Sequence[Case], implementations: Sequence[Implementation], device: str | torch.device,
                memory: int | None) -> None:
    """Refuse, before any input is built, cases that cannot run here (one sentence naming the first):

    - a case whose ``bytes_to_run`` exceeds ``memory`` (the device's, see ``machine.memory_bytes``;
      None skips this check): it could never be allocated;
    - a grid in which an implementation run by the Triton interpreter (a GPU implementation on a CPU)
      has no case of at most ``INTERPRET_MAX_ELEMENTS`` target logits: every row of it would be skipped.
    """
    device = torch.device(device)
    if memory is not None:
        for case in cases:
            needed = bytes_to_run(case)
            if needed > memory:
                where = "the host's memory" if device.type == "cpu" else f"the memory of {device}"
                raise SpecbenchError(f"case {case.describe()} needs at least {needed / 2**30:,.1f} GiB (its inputs "
                                     f"and the reference's probabilities), more than {where} ({memory / 2**30:,.1f} "
                                     f"GiB); use a smaller --batch-size or --vocab-size")
    interpreted = [impl.name for impl in implementations if impl.needs_gpu and device.type != "cuda"]
    smallest = min((case.batch_size * (case.num_spec_tokens + 1) * case.vocab_size for case in cases), default=0)
    if interpreted and smallest > INTERPRET_MAX_ELEMENTS:
        raise SpecbenchError(f"{', '.join(interpreted)} would run under the Triton interpreter, which takes at most "
                             f"{INTERPRET_MAX_ELEMENTS:,} target logits a case (B x (K+1) x V, a tree's K its N nodes), and the smallest case "
                             f"here has {smallest:,}; use a smaller --vocab-size or --batch-size")


class Check(NamedTuple):
    """Whether an output matches the reference; ``reason`` says how not; ``token_agreement`` in [0, 1]."""

    ok: bool
    reason: str | None
    token_agreement: float


def check_output(mode: str, result: VerifyResult, expected: VerifyResult, vocab_size: int,
                 same_rng: bool = True, draft_token_ids: torch.Tensor | None = None, logprobs: bool = False,
                 method: str = "token", planned: bool = True) -> Check:
    """Compare an implementation's output with the reference's.

    Greedy and synthetic: equal tensors. Probabilistic (inputs with planned acceptance): equal
    counts and accepted tokens, every emitted id in ``[0, V)``, ``-1`` after. On natural inputs
    (``planned=False``) the counts follow the random draws, so an implementation with its own
    generator is held to its own: at most ``K`` accepted, the reference's number of tokens of its
    own (one, unless the request is invalid), its accepted tokens its drafts. The sampled tokens
    (the residual after a rejection, or the bonus token) may differ from torch's only at float
    near-ties, so an implementation that shares specbench's RNG must match at least 99.9 % of them
    (``token_agreement`` is that fraction); one that does not is only held to never emitting, at
    a rejection, the draft it rejected (``draft_token_ids`` ``[B, K]``: the planned inputs give
    that draft no residual mass; a ``method`` whose replacement can be the rejected draft skips this).

    ``logprobs``: the case asked for log-probabilities; they must be ``[B, K + 1]``, ``NaN`` past the
    last emitted slot, and within ``1e-3`` (absolute and relative) of the reference's wherever the
    emitted token is the reference's.
    """
    out, ref = result.output_token_ids.cpu(), expected.output_token_ids.cpu()
    if tuple(out.shape) != tuple(ref.shape):
        return Check(False, f"output shape {list(out.shape)} differs from the reference's {list(ref.shape)}", 0.0)
    batch, num_slots = ref.shape
    emitted = expected.num_emitted.cpu().to(torch.int64)
    accepted = expected.num_accepted.cpu().to(torch.int64)
    own_draws = mode == "probabilistic" and not planned and not same_rng and draft_token_ids is not None
    if own_draws:  # its own counts, checked against the drafts and the request's size
        got_accepted = result.num_accepted.cpu().to(torch.int64)
        got_emitted = result.num_emitted.cpu().to(torch.int64)
        if bool(((got_accepted < 0) | (got_accepted > num_slots - 1)).any()):
            return Check(False, f"num_accepted outside [0, {num_slots - 1}]", 0.0)
        if not torch.equal(got_emitted - got_accepted, emitted - accepted):
            return Check(False, "num_emitted - num_accepted differs from the torch reference's (a token of its own "
                                "after the accepted drafts)", 0.0)
        out_drafts = torch.full_like(out, -2)
        out_drafts[:, :num_slots - 1] = draft_token_ids.cpu().to(torch.int64)
        if bool((out != out_drafts)[torch.arange(num_slots)[None, :] < got_accepted[:, None]].any()):
            return Check(False, "accepted tokens are not the drafts", 0.0)
        emitted, accepted = got_emitted, got_accepted
        expected = expected._replace(num_accepted=got_accepted, num_emitted=got_emitted)
    slot_used = torch.arange(num_slots)[None, :] < emitted[:, None]  # [B, K + 1]
    sampled = emitted > accepted  # [B]: the request emitted a token of its own at slot `accepted`
    requests = torch.arange(batch)
    sampled_slot = accepted.clamp(max=num_slots - 1)
    same_sample = (out[requests, sampled_slot] == ref[requests, sampled_slot])[sampled]
    agreement = float(same_sample.float().mean()) if bool(sampled.any()) else 1.0
    for name, got, want in (("num_accepted", result.num_accepted, expected.num_accepted),
                            ("num_emitted", result.num_emitted, expected.num_emitted)):
        wrong = int((got.cpu().to(torch.int64) != want.cpu().to(torch.int64)).sum())
        if wrong:
            return Check(False, f"{name} differs from the torch reference in {wrong} of {batch} requests", agreement)
    if bool(((out < 0) | (out >= vocab_size))[slot_used].any()):
        return Check(False, f"emits token ids outside [0, {vocab_size})", agreement)
    if bool((out[~slot_used] != -1).any()):
        return Check(False, "writes tokens past the last emitted slot (expected -1)", agreement)
    if logprobs:
        reason = _logprobs_differ(result.logprobs, expected.logprobs, out == ref, slot_used)
        if reason:
            return Check(False, reason, agreement)
    if expected.accepted_nodes is not None:  # a tree: the same path
        got_nodes = result.accepted_nodes
        if got_nodes is None or not torch.equal(got_nodes.cpu().to(torch.int64), expected.accepted_nodes.cpu().to(torch.int64)):
            return Check(False, "accepted_nodes (the tree path) differ from the torch reference", agreement)
    if mode != "probabilistic":
        wrong = int((out != ref).any(dim=1).sum())
        if wrong:
            return Check(False, f"tokens differ from the torch reference in {wrong} of {batch} requests", agreement)
        return Check(True, None, agreement)
    accepted_slot = torch.arange(num_slots)[None, :] < accepted[:, None]
    if not own_draws and bool((out != ref)[accepted_slot].any()):
        return Check(False, "accepted tokens differ from the torch reference", agreement)
    if same_rng and agreement < MIN_TOKEN_AGREEMENT:
        return Check(False, f"only {agreement:.2%} of sampled (residual and bonus) tokens agree with the torch "
                            f"reference (needs {MIN_TOKEN_AGREEMENT:.1%})", agreement)
    if draft_token_ids is not None and num_slots > 1 and METHODS[method].never_emits_rejected_draft:
        drafts = draft_token_ids.cpu().to(torch.int64)
        rejected = sampled & (accepted < num_slots - 1)  # the sampled token is a residual, not the bonus
        rejected_draft = drafts[requests, accepted.clamp(max=num_slots - 2)]
        if bool((out[requests, sampled_slot] == rejected_draft)[rejected].any()):
            return Check(False, "emits, after a rejection, the very draft it rejected (no residual mass there)",
                         agreement)
    return Check(True, None, agreement)


def _logprobs_differ(got: torch.Tensor | None, want: torch.Tensor | None, same_token: torch.Tensor,
                     slot_used: torch.Tensor) -> str | None:
    if not isinstance(got, torch.Tensor):
        return "returns no logprobs, though the case asks for them"
    if tuple(got.shape) != tuple(slot_used.shape):
        return f"logprobs have shape {list(got.shape)}, not {list(slot_used.shape)}"
    got = got.detach().cpu().to(torch.float32)
    if not bool(torch.isnan(got[~slot_used]).all()):
        return "logprobs past the last emitted slot are not NaN"
    if want is None:
        return None
    compared = slot_used & same_token
    close = torch.isclose(got[compared], want.detach().cpu().to(torch.float32)[compared], rtol=1e-3, atol=1e-3,
                          equal_nan=True)
    if not bool(close.all()):
        return f"logprobs differ from the torch reference's at {int((~close).sum())} emitted tokens"
    return None


def _unsupported(impl: Implementation, case: Case, device: torch.device) -> str | None:
    """Why ``impl`` does not run ``case`` here: its declaration, or a shape too large for the Triton interpreter."""
    reason = impl.unsupported(case.mode, device)
    if reason:
        return reason
    if case.method not in impl.methods:
        return f"{impl.name} declares the methods {', '.join(impl.methods)}, not {case.method}"
    if case.cuda_graph and not impl.cuda_graph:
        return f"{impl.name} declares that its calls cannot be captured in a CUDA graph"
    if case.truncated and not impl.truncation:
        return f"{impl.name} does not declare truncation (top_k, top_p, min_p), so it cannot run a truncated case"
    if case.truncated and not impl.truncates(case.method):
        return (f"{impl.name} declares truncation with the {', '.join(impl.truncation_methods)} method only, "
                f"not {case.method}")
    if case.logprobs is not None and not impl.logprobs:
        return f"{impl.name} does not declare logprobs, so it cannot return them"
    if case.tree is not None and not impl.trees:
        return f"{impl.name} does not declare trees, so it cannot verify a draft tree"
    elements = case.batch_size * (case.num_spec_tokens + 1) * case.vocab_size
    if impl.needs_gpu and device.type != "cuda" and elements > INTERPRET_MAX_ELEMENTS:
        return (f"too large for the Triton interpreter ({elements} logits > {INTERPRET_MAX_ELEMENTS}); "
                f"use a smaller --vocab-size or --batch-size")
    return None


def torch_reference(inputs: CaseInputs) -> VerifyResult:
    """The expected output: the public ``verify`` on the torch backend."""
    return verify(**inputs.verify_kwargs(), backend="torch")


def _record(case: Case, impl: str, status: str, reason: str | None = None, **values: Any) -> dict[str, Any]:
    record = {
        "kind": "kernels", "mode": case.mode, "impl": impl, "batch_size": case.batch_size,
        "num_spec_tokens": case.num_spec_tokens, "vocab_size": case.vocab_size, "model": case.model,
        "dtype": case.dtype, "draft": case.draft, "acceptance": case.acceptance,
        "acceptance_length": case.acceptance_length, "expected_acceptance_length": None,
        "measured_acceptance_length": None,
        "median_us": None, "p20_us": None, "p80_us": None, "samples": 0, "samples_us": [],
        "cuda_graph": case.cuda_graph, "target": case.target, "converted": [], "conversion": None,
        "l2_flush": None, "timer": None, "backlog_us": None, "backlog_ran_out": None, "placements": None, "cache": None,
        "dram_floor_us": None, "below_dram_floor": None, "bytes_needed": None, "bytes_all_rows": None, "gbps": None, "pct_peak": None,
        "speedup_vs_torch": None, "tokens_per_s": None, "token_agreement": None, "status": status, "reason": reason,
    }
    record.update(sampling_fields(case))  # only what is set: an untruncated record is as before
    record["method"] = case.method
    if case.inputs != "planned":
        record.update(inputs=case.inputs, draft_noise=case.draft_noise)
    if case.tree is not None:
        record.update(tree=case.tree, tree_parents=list(case.tree_parents))
    record.update(values)
    return record


def cache_state(timer: str, l2_flush: bool, working_set_bytes: int, cache_size: int | None) -> str | None:
    """``warm`` or ``cold``: whether a record's samples can find their inputs cached (module docstring);
    None when it depends on a cache size that is unknown."""
    if l2_flush and timer != "graph":
        return "cold"
    if cache_size is None:
        return None
    return "warm" if working_set_bytes <= cache_size else "cold"


def dram_floor_us(bytes_needed: int, peak_gbps: float | None) -> float | None:
    """Microseconds ``bytes_needed`` take to cross DRAM at the measured copy bandwidth (None without one)."""
    return bytes_needed / (peak_gbps * 1e3) if peak_gbps else None


def run_case(
    case: Case,
    implementations: Sequence[Implementation],
    *,
    device: str | torch.device = "cpu",
    config: timing.TimingConfig | None = None,
    peak_gbps: float | None = None,
    baselines: dict[tuple, float] | None = None,
    reference: Callable[[CaseInputs], VerifyResult] = torch_reference,
    seed: int = 0,
    conversion: str = "outside",
) -> list[dict[str, Any]]:
    """Check, then time, every implementation on one case; one record per implementation.

    ``conversion``: where an implementation that takes its inputs in another form (a plugin taking
    probabilities, on a case with logits) gets them converted: ``"outside"`` the timed call, or
    ``"inside"`` it. Its record lists what was converted (``converted``) and where (``conversion``).

    ``baselines`` maps ``case.key("torch")`` to a torch median already measured (``--resume``).
    Out of memory anywhere marks the implementations not yet done as skipped; the run goes on.
    """
    device = torch.device(device)
    config = replace(config or timing.TimingConfig(), cuda_graph=case.cuda_graph)
    records: dict[str, dict] = {}
    facts: dict[str, float] = {}  # natural inputs: their expected length, computed from them when they are made
    try:
        _check_and_time(case, implementations, device, config, peak_gbps, baselines or {}, reference, seed, records,
                        conversion, facts)
    except Exception as exc:  # out of memory anywhere skips what is not done; a FAIL found before it stays
        if not is_out_of_memory(exc):
            raise
        first_line = (str(exc).splitlines() or [""])[0]
        reason = "out of memory: " + ". ".join(first_line.split(". ")[:2]).rstrip(".")  # what it tried to allocate
        for impl in implementations:
            records.setdefault(impl.name, _record(case, impl.name, "skipped", reason))
        del exc  # its traceback holds the case's tensors
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
    length = facts.get("length") if case.inputs == "natural" else expected_acceptance_length(case, seed)
    for impl in implementations:
        records[impl.name]["expected_acceptance_length"] = length
    return [records[impl.name] for impl in implementations]


def expected_acceptance_length(case: Case, seed: int = 0) -> float:
    """The mean L a case's inputs are built for: the planned counts' mean (within ``1 / (2B)`` of the
    profile's), or in the synthetic mode, where acceptance is drawn at the profile's rates, the profile's L.
    (Natural inputs: ``natural_inputs.expected_acceptance_length`` of the inputs themselves.)"""
    if case.mode == "synthetic":
        return case.acceptance_length
    planned = assign_accepted_counts(case.rates, case.batch_size, seed)
    return 1.0 + sum(planned) / len(planned)


def _check_and_time(case, implementations, device, config, peak_gbps, baselines, reference, seed,
                    records: dict[str, dict], conversion: str, facts: dict[str, float]) -> None:
    # fills ``records`` as it goes, so an out-of-memory error leaves the rows already decided
    # what an implementation's declaration rules out is said first, whatever the reference does
    for impl in implementations:
        reason = _unsupported(impl, case, device)
        if reason:
            records[impl.name] = _record(case, impl.name, "skipped", reason)
    implementations = [impl for impl in implementations if impl.name not in records]
    if not implementations:
        return
    inputs = make_inputs(case, device, seed)
    if case.inputs == "natural":  # E[A | drafts] under the case's method, before anything runs
        facts["length"] = natural_inputs.expected_acceptance_length(
            inputs.target_logits, inputs.draft_token_ids, inputs.draft_logits, inputs.draft_probs, case.method)
    try:
        expected = reference(inputs)
    except Exception as exc:  # nothing can be checked without the reference: skip the case
        if is_out_of_memory(exc):
            raise
        reason = f"the torch reference failed, nothing to check against: {type(exc).__name__}: {exc}"
        records.update((impl.name, _record(case, impl.name, "skipped", reason)) for impl in implementations)
        return
    calls, outputs, agreements, converted = {}, {}, {}, {}
    kwargs = inputs.verify_kwargs()
    placed = _placed_copies(kwargs, device, config)
    for impl in implementations:
        done = impl.conversions(kwargs)
        converted[impl.name] = {"converted": done, "conversion": conversion if done else None}
        try:
            call = impl.bind(kwargs, conversion)
            result = call()
        except SpecbenchError as exc:
            records[impl.name] = _record(case, impl.name, "skipped", str(exc))
            continue
        except (Exception, SystemExit) as exc:  # a crashing (or exiting) implementation is a FAIL row, not a run's end
            if is_out_of_memory(exc):
                raise
            said = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            records[impl.name] = _record(case, impl.name, "FAIL", f"raised {said}")
            continue
        if not isinstance(result, VerifyResult):
            records[impl.name] = _record(case, impl.name, "FAIL", f"returned {type(result).__name__}, not a VerifyResult")
            continue
        check = check_output(case.mode, result, expected, case.vocab_size, impl.same_rng,
                             None if case.tree is not None else inputs.draft_token_ids,
                             logprobs=case.logprobs is not None, method=case.method,
                             planned=case.inputs != "natural")
        # a FAIL row keeps the length its counts give, unless its output is not the reference's shape (the
        # check stopped there: its counts say nothing, as a FAIL that raised has none)
        same_shape = (tuple(result.output_token_ids.shape) == tuple(expected.output_token_ids.shape)
                      and tuple(result.num_accepted.shape) == tuple(expected.num_accepted.shape))
        measured = 1.0 + float(result.num_accepted.double().mean()) if same_shape else None
        if not check.ok:
            records[impl.name] = _record(case, impl.name, "FAIL", check.reason, measured_acceptance_length=measured,
                                         token_agreement=check.token_agreement, **converted[impl.name])
            continue
        calls[impl.name] = [call] + [_in_scratch_set(impl.bind(copy, conversion), index)
                                     for index, copy in enumerate(placed, start=1)]
        outputs[impl.name], agreements[impl.name] = result, check.token_agreement

    timings, timer_of = {}, {}
    for group, group_config in _timer_groups(calls, implementations, device, config):
        if not group:
            continue
        measurement = timing.time_implementations(group, device, group_config)
        for name, reason in measurement.errors.items():
            records[name] = _record(case, name, "skipped", reason)
        for name, reason in measurement.failures.items():
            records[name] = _record(case, name, "FAIL", reason, token_agreement=agreements[name], **converted[name])
        timings.update(measurement.timings)
        timer_of.update((name, measurement.timer) for name in measurement.timings)
    needed, all_rows = bytes_moved(case, expected.num_accepted)
    floor_us = dram_floor_us(needed, peak_gbps)
    cache_size = timing.cache_bytes(device)
    baseline = timings.get(BASELINE)
    baseline_us = baseline.median_us if baseline else baselines.get(case.key(BASELINE))
    for name, t in timings.items():
        seconds = t.median_us * 1e-6
        gbps = needed / seconds / 1e9
        cache = cache_state(timer_of[name], config.l2_flush, needed, cache_size)
        records[name] = _record(
            case, name, "ok",
            measured_acceptance_length=1.0 + float(outputs[name].num_accepted.double().mean()),
            median_us=t.median_us, p20_us=t.p20_us, p80_us=t.p80_us, samples=t.samples,
            samples_us=[round(x, 4) for x in t.samples_us],
            l2_flush=config.l2_flush, timer=timer_of[name], backlog_us=t.backlog_us,
            backlog_ran_out=t.backlog_ran_out, placements=t.placements, cache=cache, dram_floor_us=floor_us,
            below_dram_floor=(t.median_us * DRAM_FLOOR_MARGIN < floor_us
                              if cache == "cold" and floor_us is not None else None),
            bytes_needed=needed, bytes_all_rows=all_rows, gbps=gbps,
            pct_peak=100.0 * gbps / peak_gbps if peak_gbps else None,
            speedup_vs_torch=baseline_us / t.median_us if baseline_us else None,
            tokens_per_s=int(outputs[name].num_emitted.sum()) / seconds,
            token_agreement=agreements[name], **converted[name],
        )


def _timer_groups(calls: dict[str, list], implementations: list[Implementation], device: torch.device,
                  config: timing.TimingConfig) -> list[tuple[dict[str, list], timing.TimingConfig]]:
    """The calls to time together and their settings: all of them, except that under ``cold-graph`` an
    implementation that declares its calls cannot be captured in a CUDA graph is timed apart with
    ``host-free`` (its rows name that timer) rather than captured."""
    declared = {impl.name: impl.cuda_graph for impl in implementations}
    apart = [name for name in calls if not declared.get(name, True)]
    if timing.timer_name(device, config) != "cold-graph" or not apart:
        return [(calls, config)]
    return [({name: fns for name, fns in calls.items() if name not in apart}, config),
            ({name: calls[name] for name in apart}, replace(config, timer="host-free"))]


def _placed_copies(kwargs: dict[str, Any], device: torch.device, config: timing.TimingConfig) -> list[dict[str, Any]]:
    """The inputs again at other addresses, ``config.placement_count() - 1`` times, for a GPU case whose
    tensors take at most ``PLACEMENT_BYTES`` (``[]`` otherwise: on a CPU, or large inputs)."""
    tensors = [value for value in kwargs.values() if isinstance(value, torch.Tensor)]
    if torch.device(device).type != "cuda" or sum(t.numel() * t.element_size() for t in tensors) > PLACEMENT_BYTES:
        return []
    return [{key: value.clone() if isinstance(value, torch.Tensor) else value for key, value in kwargs.items()}
            for _ in range(config.placement_count() - 1)]


def _in_scratch_set(call: Callable[[], VerifyResult], index: int) -> Callable[[], VerifyResult]:
    """``call`` with the Triton kernels' scratch buffers and arrival counters of set ``index``
    (``launch.scratch_set``): a placement moves them with its inputs (``_placed_copies``). ``call`` itself
    when nothing has loaded the Triton launcher (an implementation without our kernels, or no Triton)."""
    launch = sys.modules.get("specbench.kernels.launch")
    if launch is None:
        return call

    def placed() -> VerifyResult:
        with launch.scratch_set(index):
            return call()
    return placed


def run_benchmark(
    cases: Sequence[Case],
    implementations: Sequence[Implementation],
    *,
    device: str | torch.device = "cpu",
    config: timing.TimingConfig | None = None,
    peak_gbps: float | None = None,
    previous: Sequence[dict] = (),
    on_record: Callable[[dict], None] = lambda record: None,
    on_case: Callable[[int, Case], None] = lambda index, case: None,
    reference: Callable[[CaseInputs], VerifyResult] = torch_reference,
    seed: int = 0,
    conversion: str = "outside",
    positions: Sequence[int] | None = None,
) -> list[dict[str, Any]]:
    """Run ``cases`` in order; implementations with a row in ``previous`` are not run again.

    ``on_record`` receives each record as soon as its case is done (write it to disk there, so
    an interrupted run keeps what it finished); ``on_case(index, case)`` is called before each case.
    Each record's ``case`` is the case's position in the planned grid: ``positions[index]`` when the
    cases are a slice of it (a shard, ``specbench.shards``), else its index in ``cases``.
    Returns the new records.
    """
    done = {record_key(r) for r in previous}
    baselines = {record_key(r): r["median_us"] for r in previous if r.get("status") == "ok" and r["impl"] == BASELINE}
    new_records = []
    for index, case in enumerate(cases):
        on_case(index, case)
        todo = [impl for impl in implementations
                if case.key(impl.name) not in done and case.key(impl.name, conversion) not in done]
        if not todo:
            continue
        for record in run_case(case, todo, device=device, config=config, peak_gbps=peak_gbps, baselines=baselines,
                               reference=reference, seed=seed, conversion=conversion):
            record["case"] = index if positions is None else positions[index]
            new_records.append(record)
            on_record(record)
    return new_records
