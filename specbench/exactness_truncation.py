"""The truncation and log-probability checks of the exactness suite (``specbench/exactness.py``, whose
``Suite`` takes them in from ``_TruncationChecks``), their configs, and the float64 laws they test against:

- Truncation (``top_k``, ``top_p``, ``min_p``), where the implementation declares it: for each of
  ``TRUNCATION_CONFIGS`` (ties of equal value across the ``top_k`` and ``top_p`` boundaries,
  ``min_p``, all three at once) rows whose kept sets are exact (``oracle.truncation``), drafts drawn
  from the truncated draft law ``q'`` (given as draft logits, cut by the sampler, or as ``q'``
  itself, or one-hot; once from the whole ``q`` with ``truncate_draft_logits=False``; once with the
  target given as probabilities): the token of each slot against ``p'`` (chi-square), the accepted-count law,
  and an exact count of emitted tokens outside their row's kept set (ambiguous tokens allowed).
  Then ``top_k = 1`` emits the greedy mode's tokens; every knob given as an "off" tensor gives the
  call without knobs bit for bit (seeded implementations); a batch of more than 64 rows mixing
  knob sets per request (``MIXED_KNOBS``: ``top_p = 0.95`` among them, where vLLM once left every
  row its whole tail in batches of more than 64 rows) emits nothing outside a kept set.
- Log-probabilities, where declared: ``"processed"`` and ``"raw"`` equal the float64 oracle's
  (``log p'`` of the emitted token, or the untempered log-softmax) within ``LOGPROB_TOLERANCE``,
  ``NaN`` past the last emitted token.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from specbench import oracle, rng
from specbench.errors import SpecbenchError
from specbench.exactness_base import (
    _MAX_DRAWS,
    LAW_CONFIGS,
    MIN_BONUS_SHARE,
    MIN_SLOT_SPREAD,
    NUM_SPEC,
    VOCAB,
    CheckResult,
    _exact_equal,
    _reference,
    _token_and_count_checks,
)
from specbench.verification import SamplingParams, VerifyResult


@dataclass(frozen=True)
class _TruncationConfig:
    label: str
    temperature: float
    draft_kind: str  # logits (cut by the implementation, or by the harness's conversion to q'), probs (q'), none
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    tie: bool = False  # every target row has two tokens of equal value on either side of its boundary
    truncate_draft: bool = True  # False: truncate_draft_logits=False, drafts drawn from the whole q
    target_probs: bool = False  # the target given as probabilities, softmax(logits / T) (min_p is then relative)


TRUNCATION_CONFIGS = (
    _TruncationConfig("top_k=4, tie at the boundary, draft logits", 1.0, "logits", top_k=4, tie=True),
    _TruncationConfig("top_k=3, tie at the boundary, one-hot drafts", 0.8, "none", top_k=3, tie=True),
    _TruncationConfig("top_p=0.7, tie at the boundary, draft probs", 1.0, "probs", top_p=0.7, tie=True),
    _TruncationConfig("top_p=0.8, T=0.8, tie at the boundary, draft logits", 0.8, "logits", top_p=0.8, tie=True),
    _TruncationConfig("min_p=0.1, T=0.7, draft logits", 0.7, "logits", min_p=0.1),
    _TruncationConfig("top_k=6, top_p=0.9, min_p=0.05, draft logits", 1.0, "logits", top_k=6, top_p=0.9,
                      min_p=0.05),
    _TruncationConfig("top_k=5, top_p=0.85, whole draft logits (truncate_draft_logits=False)", 1.0, "logits",
                      top_k=5, top_p=0.85, truncate_draft=False),
    _TruncationConfig("target probabilities, top_k=4, min_p=0.15, tie at the boundary, draft logits", 0.9, "logits",
                      top_k=4, min_p=0.15, tie=True, target_probs=True),
)
# (temperature, top_k, top_p, min_p) of the requests of the mixed-knob checks, request r taking set r % 8:
# two at top_p 0.95 (the vLLM bug left such rows their whole 5% tail in batches of more than 64 rows),
# one with every knob off and one greedy (truncation cannot change an argmax)
MIXED_KNOBS = ((1.0, 0, 0.95, 0.0), (0.8, 0, 0.95, 0.0), (1.0, 3, 1.0, 0.0), (1.2, 0, 1.0, 0.2),
               (1.0, 5, 0.8, 0.05), (1.0, 0, 1.0, 0.0), (0.0, 4, 0.5, 0.0), (0.7, 2, 0.9, 0.1))
LARGE_BATCH = 160  # requests, 640 rows: well past the 64 rows where vLLM's top-p changed its path
LOGPROB_TOLERANCE = 1e-4


class _TruncationChecks:
    """The truncation and log-probability checks, as methods of ``exactness.Suite`` (which inherits them): they
    run through the suite's ``_guard``, ``_declared``, ``_call``, ``_kwargs``, ``_rows``, ``_few`` and
    ``_small_batch``, and read its ``impl``, ``device``, ``seed``, ``samples`` and ``results``."""

    def _truncation_checks(self, mode: str) -> None:
        if not self.impl.truncates(self.method):
            detail = (f"{self.impl.name} does not declare it" if not self.impl.truncation else
                      f"{self.impl.name} declares it with {', '.join(self.impl.truncation_methods)} only")
            self.results.append(CheckResult("truncation (top_k, top_p, min_p)", mode, "skipped", "-", detail=detail))
        else:
            for index, config in enumerate(TRUNCATION_CONFIGS):
                self._guard(f"truncated token and count law ({config.label})", mode, self._truncated_law, config,
                            index)
            self._guard("truncation: top_k = 1 is greedy", mode, self._top_k_one)
            if self.impl.seeded:
                self._guard("truncation: every knob off is the untruncated call", mode, self._knobs_off)
            else:
                self.results.append(CheckResult(
                    "truncation: every knob off is the untruncated call", mode, "skipped", "-",
                    detail=f"{self.impl.name} does not declare seed reproducibility (a bit-for-bit comparison)"))
            self._guard("truncation: mixed per-request knobs, batch of more than 64 rows", mode, self._mixed_batch)
        self._declared("log-probabilities (processed, raw)", mode, self.impl.logprobs, self._logprobs)

    def _truncation_rows(self, config: _TruncationConfig, index: int) -> tuple[torch.Tensor, torch.Tensor, tuple]:
        """Target logits ``[K + 1, V]``, draft logits ``[K, V]`` and their truncated laws (``_knob_laws``), drawn
        until every kept set is exact (no token near a boundary), a tie straddles each target row's boundary
        where the config asks for one, and every slot's token law can be tested (the best of ``_MAX_DRAWS``)."""
        gen = torch.Generator().manual_seed(self.seed * 1000 + 500 + index)
        knobs = (config.temperature, config.top_k, config.top_p, config.min_p)
        best, best_score = None, -1.0
        for _ in range(_MAX_DRAWS):
            target = torch.randn(NUM_SPEC + 1, VOCAB, generator=gen) * 1.5
            draft = target[:NUM_SPEC] + torch.randn(NUM_SPEC, VOCAB, generator=gen) * 0.45
            if config.tie:
                target = _tie_boundaries(target, knobs)
            laws = _knob_laws(target, draft, knobs, exact=True, tie=config.tie, cut_draft=config.truncate_draft,
                              target_probs=_target_probs(target, config))
            if laws is None:
                continue
            score = _truncated_testable(laws[0], laws[1], config.draft_kind == "none")
            if score >= 1.0:
                return target, draft, laws
            if score > best_score:
                best, best_score = (target, draft, laws), score
        if best is None:
            raise SpecbenchError(f"no rows with exact kept sets for {config.label} (seed {self.seed})")
        return best

    def _knob_params(self, knobs: list[tuple[float, int, float, float]]) -> tuple[torch.Tensor, SamplingParams]:
        """Per-request temperatures and ``SamplingParams`` of one knob set per request: a knob as a tensor
        where some request sets it, None where none does (as a server passes them; a batch given no
        ``top_k`` takes other kernels than one given ``top_k = 0``)."""
        device = self.device
        columns = list(zip(*knobs, strict=True))
        temperatures = torch.tensor(columns[0], dtype=torch.float32, device=device)
        top_k, top_p, min_p = columns[1:]
        return temperatures, SamplingParams(
            top_k=torch.tensor(top_k, dtype=torch.int64, device=device) if any(k > 0 for k in top_k) else None,
            top_p=torch.tensor(top_p, dtype=torch.float32, device=device) if any(p < 1 for p in top_p) else None,
            min_p=torch.tensor(min_p, dtype=torch.float32, device=device) if any(p > 0 for p in min_p) else None)

    @staticmethod
    def _draft_given(kind: str, draft_logits: torch.Tensor, q_cut: torch.Tensor) -> dict[str, torch.Tensor]:
        # draft logits reach an implementation taking draft probabilities as the harness's q' (contract.convert)
        return {"logits": {"draft_logits": draft_logits}, "probs": {"draft_probs": q_cut.to(torch.float32)},
                "none": {}}[kind]

    def _truncated_law(self, config: _TruncationConfig, index: int) -> list[CheckResult]:
        target, draft_logits, (p_cut, q_cut, allowed) = self._truncation_rows(config, index)
        n = self.samples
        drafts = oracle.sample_drafts(q_cut, n, seed=self.seed * 7919 + 500 + index)
        given = self._draft_given(config.draft_kind, draft_logits, q_cut)
        kwargs = self._kwargs("probabilistic", target, drafts, config.temperature, n, **given)
        if not config.truncate_draft or "draft_probs" in given:
            # draft probabilities are taken as given whatever the flag; False keeps an implementation that takes
            # draft logits from cutting their conversion (T * log q') a second time
            kwargs["truncate_draft_logits"] = False
        _, kwargs["sampling"] = self._knob_params([(config.temperature, config.top_k, config.top_p, config.min_p)] * n)
        if config.target_probs:
            kwargs.pop("target_logits")
            probs = _target_probs(target, config)
            kwargs["target_probs"] = probs.expand(n, *probs.shape).contiguous().to(self.device)
        result = self._call(kwargs)
        one_hot = config.draft_kind == "none"
        if self.method == "token":
            emit, accept = _truncated_emitted_law(p_cut, q_cut, one_hot=one_hot)
        elif one_hot:  # another method's own law on the cut rows (block: every draft block enumerated)
            emit, accept = oracle.sampled_step_law_one_hot(self.method, p_cut, q_cut)
        else:
            emit, accept = oracle.sampled_step_law(self.method, p_cut, q_cut)
        checks = _token_and_count_checks(result, emit, accept, config.label)
        checks.append(_outside_check(f"outside the kept set ({config.label})", result, allowed.expand(n, -1, -1)))
        return checks

    def _top_k_one(self) -> list[CheckResult]:
        gen = torch.Generator().manual_seed(self.seed + 31)
        n = self._few(256)
        target = torch.randn(n, NUM_SPEC + 1, VOCAB, generator=gen) * 1.5
        target[0::4, :, 3] = target[0::4, :, 5] = 9.0  # a tie: the lowest id is the one token kept
        target[3::4, :, 0] = float("-inf")
        top = target.argmax(dim=-1)[:, :NUM_SPEC]
        other = torch.randint(0, VOCAB, (n, NUM_SPEC), generator=gen)
        drafts = torch.where(torch.rand(n, NUM_SPEC, generator=gen) < 0.7, top, other)
        temperatures = 0.3 + 1.2 * torch.rand(n, generator=gen)
        device = self.device
        kwargs = {"mode": "probabilistic", "target_logits": target.to(device), "draft_token_ids": drafts.to(device),
                  "draft_probs": torch.softmax(torch.randn(n, NUM_SPEC, VOCAB, generator=gen), -1).to(device),
                  "temperatures": temperatures.to(device),
                  "sampling": SamplingParams(top_k=torch.ones(n, dtype=torch.int64, device=device)),
                  "seeds": rng.request_seed(self.seed, torch.arange(n, dtype=torch.int64)).to(device)}
        got = self._call(kwargs)
        want = _reference({"mode": "greedy", "target_logits": kwargs["target_logits"],
                           "draft_token_ids": kwargs["draft_token_ids"]})
        check = _exact_equal(got, want, n)
        check.detail = check.detail.replace("the torch reference", "the greedy mode's")
        return [check]

    def _knobs_off(self) -> list[CheckResult]:
        n = self._few(512)
        kwargs = self._small_batch("probabilistic", n)
        device = self.device
        off = SamplingParams(top_k=torch.zeros(n, dtype=torch.int64, device=device),
                             top_p=torch.ones(n, dtype=torch.float32, device=device),
                             min_p=torch.zeros(n, dtype=torch.float32, device=device))
        plain, knobs = self._call(kwargs), self._call({**kwargs, "sampling": off})
        check = _exact_equal(knobs, plain, n)
        check.detail = check.detail.replace("the torch reference", "the same call without knobs")
        return [check]

    def _mixed_inputs(self, n: int, truncating: bool) -> tuple[dict[str, Any], torch.Tensor, list[tuple]]:
        """A batch of ``n`` requests on the same rows, request ``r`` with knob set ``r % 8`` of ``MIXED_KNOBS``
        (every knob off where ``truncating`` is False); drafts from each set's ``q'``. Returns the kwargs,
        each request's set and each set's laws (``_knob_laws``, ambiguous tokens allowed)."""
        target, draft_logits = self._rows(LAW_CONFIGS[0], 0)
        sets = MIXED_KNOBS if truncating else tuple((t, 0, 1.0, 0.0) for t, *_ in MIXED_KNOBS)
        which = torch.arange(n) % len(sets)
        laws = [_knob_laws(target, draft_logits, knobs, exact=False, tie=False) for knobs in sets]
        drafts = torch.zeros(n, NUM_SPEC, dtype=torch.int64)
        for index, (_, q_cut, _) in enumerate(laws):
            chosen = which == index
            drafts[chosen] = oracle.sample_drafts(q_cut, int(chosen.sum()), seed=self.seed * 31 + 600 + index)
        kwargs = self._kwargs("probabilistic", target, drafts, 1.0, n, draft_logits=draft_logits)
        kwargs["temperatures"], sampling = self._knob_params([sets[int(i)] for i in which])
        if truncating:
            kwargs["sampling"] = sampling
        return kwargs, which, laws

    def _mixed_batch(self) -> list[CheckResult]:
        n = max(self._few(1024), LARGE_BATCH)
        kwargs, which, laws = self._mixed_inputs(n, truncating=True)
        result = self._call(kwargs)
        allowed = torch.stack([mask for _, _, mask in laws])[which]
        name = "truncation: mixed per-request knobs, batch of more than 64 rows"
        check = _outside_check(name, result, allowed)
        check.detail += f" ({n} requests, {n * (NUM_SPEC + 1)} rows; knob sets (T, top_k, top_p, min_p) {MIXED_KNOBS})"
        return [check]

    def _logprobs(self, mode: str) -> list[CheckResult]:
        n = self._few(512)
        truncating = self.impl.truncates(self.method)
        kwargs, which, _ = self._mixed_inputs(n, truncating)
        target, _ = self._rows(LAW_CONFIGS[0], 0)
        sets = MIXED_KNOBS if truncating else tuple((t, 0, 1.0, 0.0) for t, *_ in MIXED_KNOBS)
        raw = torch.stack([torch.log_softmax(oracle.clean_logits(row, 0.0), dim=-1) for row in target])  # [K+1, V]
        processed = torch.stack([_processed_logprobs(target, knobs) for knobs in sets])  # [sets, 2, K + 1, V]
        checks = []
        for kind in ("processed", "raw"):
            result = self._call({**kwargs, "logprobs": kind}, keep_logprobs=True)
            tokens, got = result.output_token_ids, result.logprobs
            slots = torch.arange(NUM_SPEC + 1)[None, :]
            used = slots < result.num_emitted[:, None]
            ids = tokens.clamp(0, VOCAB - 1)
            if kind == "raw":
                options = raw[slots.expand(n, -1), ids][..., None]  # [n, K + 1, 1]
            else:
                table = processed[which]  # [n, 2, K + 1, V]
                options = table.gather(3, ids[:, None, :, None].expand(n, 2, -1, 1))[..., 0].permute(0, 2, 1)
            close = ((got[..., None] - options).abs() <= LOGPROB_TOLERANCE * options.abs().clamp_min(1.0)).any(-1)
            wrong = used & ~close
            past = ~used & ~torch.isnan(got)
            detail = (f"{int(wrong.sum())} of {int(used.sum())} emitted tokens' log-probabilities differ from the "
                      f"oracle's by more than {LOGPROB_TOLERANCE:g}; {int(past.sum())} slots past the last emitted "
                      f"token are not NaN")
            if bool(wrong.any()):
                r, i = (int(v) for v in wrong.nonzero()[0])
                detail += (f" (request {r}, slot {i}, token {int(tokens[r, i])}: {float(got[r, i]):.6g} where "
                           f"{float(options[r, i, 0]):.6g} was due)")
            verdict = "FAIL" if bool(wrong.any() or past.any()) else "pass"
            checks.append(CheckResult(f"log-probabilities ({kind})", mode, verdict, "exact", samples=n, detail=detail))
        return checks


def _knob_laws(target: torch.Tensor, draft_logits: torch.Tensor, knobs: tuple[float, int, float, float], *,
               exact: bool, tie: bool, cut_draft: bool = True,
               target_probs: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
    """``(p' [K + 1, V], q' [K, V], allowed [K + 1, V])`` in float64 for one knob set ``(T, top_k, top_p,
    min_p)``: the truncated target and draft laws (the exact kept sets, or the shortest where a token is
    ambiguous) and the tokens a sampler may emit (the longest kept set; the argmax alone for ``T = 0``).
    None where ``exact`` and a kept set is ambiguous, or ``tie`` and a target row has no tie across its
    boundary. ``cut_draft`` False: ``q'`` is the whole draft softmax (``truncate_draft_logits=False``);
    ``target_probs`` ``[K + 1, V]``: the target as given in probabilities (ranked and cut as probabilities)."""
    temperature, top_k, top_p, min_p = knobs
    cut_at = {"top_k": top_k, "top_p": top_p, "min_p": min_p}
    law_t = temperature if temperature > 0 else 1.0
    p_rows, allowed = [], []
    is_probs = target_probs is not None
    for row in target if target_probs is None else target_probs:
        values = oracle.truncation_values(row, law_t, is_probs)
        cut = oracle.truncation(values, **cut_at, is_probs=is_probs)
        if exact and not cut.exact:
            return None
        if tie and (cut.kept_min >= VOCAB or
                    float(values[cut.order[cut.kept_min - 1]]) != float(values[cut.order[cut.kept_min]])):
            return None
        if temperature > 0:
            p_rows.append(oracle.truncated(values, cut, is_probs))
            allowed.append(cut.mask(cut.kept_max))
        else:
            p_rows.append(oracle._point_mass(oracle.greedy_token(row), VOCAB))
            allowed.append(p_rows[-1] > 0)
    q_rows = []
    for row in draft_logits:
        values = oracle.truncation_values(row, law_t, False)
        cut = oracle.truncation(values, **(cut_at if cut_draft else {}))
        if exact and not cut.exact:
            return None
        q_rows.append(oracle.truncated(values, cut, False))
    return torch.stack(p_rows), torch.stack(q_rows), torch.stack(allowed)


def _target_probs(target: torch.Tensor, config: _TruncationConfig) -> torch.Tensor | None:
    """``softmax(target / T)`` in float32 where the config gives the target as probabilities (equal logits, equal
    probabilities: the ties survive), else None."""
    if not config.target_probs:
        return None
    return torch.stack([oracle.softmax(row, config.temperature) for row in target]).to(torch.float32)


def _tie_boundaries(target: torch.Tensor, knobs: tuple[float, int, float, float]) -> torch.Tensor:
    """The rows with the first token each cuts raised to the value of the last it keeps: a tie across the
    boundary (``_knob_laws`` checks that it still straddles it once the masses changed)."""
    temperature, top_k, top_p, min_p = knobs
    tied = target.clone()
    for row in tied:
        cut = oracle.truncation(oracle.truncation_values(row, temperature, False), top_k=top_k, top_p=top_p,
                                min_p=min_p)
        if cut.kept_min < VOCAB:
            row[cut.order[cut.kept_min]] = row[cut.order[cut.kept_min - 1]]
    return tied


def _truncated_testable(p_cut: torch.Tensor, q_cut: torch.Tensor, one_hot: bool) -> float:
    """``_testable`` for truncated laws: at least 1 when the bonus slot and every slot's spread can be tested."""
    p = p_cut[:NUM_SPEC]
    accept = (q_cut * p).sum(-1) if one_hot else torch.minimum(p, q_cut).sum(-1)
    reach = torch.cat([torch.ones(1, dtype=torch.float64), torch.cumprod(accept, 0)])
    spread = reach * (1.0 - p_cut.max(dim=-1).values)
    return min(float(reach[-1]) / MIN_BONUS_SHARE, float(spread.min()) / MIN_SLOT_SPREAD)


def _truncated_emitted_law(p_cut: torch.Tensor, q_cut: torch.Tensor, one_hot: bool) -> tuple[torch.Tensor,
                                                                                            torch.Tensor]:
    """Per slot the emitted token's law ``[K + 1, V]`` and the acceptance ``[K]`` when drafts are drawn from
    ``q'`` and the sampler is told ``q'`` (or the one-hot draft): ``p'`` and ``sum min(p', q')`` (``sum q' p'``)."""
    emit, accept = [], []
    for i in range(NUM_SPEC):
        row, rate = torch.zeros(VOCAB, dtype=torch.float64), 0.0
        for x in torch.nonzero(q_cut[i] > 0)[:, 0].tolist():
            told = oracle._point_mass(x, VOCAB) if one_hot else q_cut[i]
            row += q_cut[i, x] * oracle.emitted_distribution(p_cut[i], told, x)
            rate += float(q_cut[i, x]) * oracle.acceptance_probability(p_cut[i], told, x)
        emit.append(row)
        accept.append(rate)
    emit.append(p_cut[NUM_SPEC])
    return torch.stack(emit), torch.tensor(accept, dtype=torch.float64)


def _outside_check(name: str, result: VerifyResult, allowed: torch.Tensor) -> CheckResult:
    """Every emitted token (every slot before ``num_emitted``) must be one its row may keep: ``allowed``
    ``[B, K + 1, V]`` bool (the longest kept set: ambiguous tokens are allowed)."""
    tokens = result.output_token_ids
    n = tokens.shape[0]
    used = torch.arange(tokens.shape[1])[None, :] < result.num_emitted[:, None]
    valid = (tokens >= 0) & (tokens < VOCAB)
    inside = allowed.gather(2, tokens.clamp(0, VOCAB - 1)[..., None])[..., 0] & valid
    outside = used & ~inside
    count = int(outside.sum())
    detail = f"{count} of {int(used.sum())} emitted tokens lie outside their row's kept set"
    if count:
        r, i = (int(v) for v in outside.nonzero()[0])
        kept = torch.nonzero(allowed[r, i])[:, 0].tolist()
        detail += f" (request {r}, slot {i}: token {int(tokens[r, i])}, kept {kept})"
    return CheckResult(name, "", "FAIL" if count else "pass", "exact", samples=n, detail=detail)


def _processed_logprobs(target: torch.Tensor, knobs: tuple[float, int, float, float]) -> torch.Tensor:
    """``[2, K + 1, V]`` float64: ``log p'`` of every row under one knob set with the shortest and the longest
    kept set (equal where the kept set is exact); the log-softmax of the cleaned logits for ``T = 0``."""
    temperature, top_k, top_p, min_p = knobs
    tables = []
    for row in target:
        if temperature == 0:
            greedy = torch.log_softmax(oracle.clean_logits(row, 0.0), dim=-1)
            tables.append(torch.stack([greedy, greedy]))
            continue
        values = oracle.truncation_values(row, temperature, False)
        cut = oracle.truncation(values, top_k=top_k, top_p=top_p, min_p=min_p)
        tables.append(torch.stack([torch.log(oracle.truncated(values, cut, False, kept=kept))
                                   for kept in (cut.kept_min, cut.kept_max)]))
    return torch.stack(tables, dim=1)
