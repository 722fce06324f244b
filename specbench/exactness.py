"""The exactness suite behind ``specbench verify``: is an implementation's output law the one the
contract fixes (``specbench/verification.py``), for any implementation.

Each check builds small inputs (``V = 16``, ``K = 3``, many requests with the same rows and their
own seeds), runs the implementation once, and tests what came out:

- Token law (probabilistic): with drafts drawn from ``q``, the token in output slot ``i`` of the
  requests that reach row ``i`` follows ``sum_x q(x) emit_i(x)`` (``p_i`` itself for a correct
  sampler; the oracle computes it in float64). One chi-square test per slot, at several
  temperatures, draft distances and draft kinds, and once with fixed drafts (the law of
  ``specbench/oracle.py``'s ``step_distribution``).
- Accepted-count law: the histogram of ``num_accepted`` against ``P(A = k)``; the detail names
  the acceptance measured at each position beside the acceptance due.
- Greedy identity: tokens and counts equal to the torch reference's, on rows with ties, NaN and
  ``+-inf`` logits, in the greedy mode and for temperature-0 rows of the probabilistic mode.
- ``-1`` and out-of-range draft ids: never accepted; the token there follows ``p``.
- ``num_draft_tokens < K``: nothing accepted past a request's count; the joint law of (count,
  accepted) and the first slot's token law.
- Poisoned buffers: the memory allocator is filled with garbage first, and the implementation
  runs after a call that emitted more tokens: every slot past the last emitted must be ``-1``.
- Seed reproducibility and batch invariance, where the implementation declares them; equality
  with the reference's tokens, where it declares specbench's random streams.
- Truncation (``top_k``, ``top_p``, ``min_p``) and log-probabilities, where the implementation declares
  them: the checks listed in ``specbench/exactness_truncation.py`` (each method's own truncated laws).

Methods (``method``, ``specbench/methods.py``): the suite checks one verification method, ``token`` by
default, of implementations that declare it. For another method every law is that method's own from
the oracle (``oracle.sampled_step_law``: block verification's by enumerating the draft blocks), so an
exact method is held to the target's law and a lossy one to its documented rule; for a lossy method
each law check adds a ``lossy`` row: the total-variation distance of every slot's law from the
target's, exact (oracle) and measured, and the expected accepted length against the token rule's.

Statistical checks share one Bonferroni budget: each fails below ``significance / m`` (``m`` tests). Suites
joined by ``shared_with`` (``verify``'s methods of one implementation) share it too: ``m`` counts all their tests.

Problem sizes: every check it lists runs at the default 20,000 requests. A law check's rows are
drawn again (from the same generator) until at least ``MIN_BONUS_SHARE`` of the requests accept
every draft, so the bonus slot, the rarest, has tokens to test, and until at every slot at least
``MIN_SLOT_SPREAD`` of the requests reach it and emit another token than its most likely one, so
the slot's chi-square test has two bins. ``--samples`` is bounded by memory: each request of a
check takes about ``BYTES_PER_REQUEST``.

An implementation that calls ``sys.exit`` or raises ``KeyboardInterrupt`` fails the check it ran
in; a real Ctrl-C (the SIGINT signal, recorded while the suite runs) still stops the suite, and
``finished()`` gives the checks done by then.

The check record (``CheckResult``), the problem sizes, the untruncated law configs and the tests that give a
check its verdict (chi-square, the accepted-count law, exact equality) live in ``specbench/exactness_base.py``,
below this module and ``specbench/exactness_truncation.py``.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import Any

import torch

from specbench import machine, methods, oracle, rng
from specbench.errors import SpecbenchError
from specbench.exactness_base import (
    _MAX_DRAWS,
    LAW_CONFIGS,
    MIN_BONUS_SHARE,
    MIN_SLOT_SPREAD,
    NUM_SPEC,
    VOCAB,
    CheckResult,
    _chi_square_check,
    _chi_square_counts,
    _Config,
    _count_check,
    _exact_equal,
    _reference,
    _token_and_count_checks,
)
from specbench.exactness_truncation import _TruncationChecks
from specbench.implementations.contract import Implementation
from specbench.verification import VerifyResult

DEFAULT_SAMPLES = 20000
DEFAULT_SIGNIFICANCE = 1e-3
# peak host memory of the torch reference's suite, measured: 1.9 KB a request at 100,000 requests (all modes)
BYTES_PER_REQUEST = 4096


def check_samples(samples: int, device: torch.device | str, per_request: int = BYTES_PER_REQUEST,
                  why: str = "") -> int:
    """Refuse a request count below 50 or beyond the memory of ``device``, ``per_request`` bytes each (default
    ``BYTES_PER_REQUEST``, a chain's; ``why`` says in the refusal what makes a request larger)."""
    if samples < 50:
        raise SpecbenchError(f"--samples must be at least 50, got {samples}")
    memory = machine.memory_bytes(str(device))
    if memory is not None and samples * per_request > memory:
        where = "the host's memory" if str(device) == "cpu" else f"{device}'s memory"
        size = f"{per_request / 2**20:,.1f} MiB" if per_request >= 2**20 else f"{per_request // 1024} KiB"
        raise SpecbenchError(f"--samples {samples:,} needs about {samples * per_request / 2**30:,.0f} GiB "
                             f"({size} a request{why}), more than {where} ({memory / 2**30:,.1f} GiB); give at "
                             f"most {memory // per_request:,}")
    return samples


def check_significance(significance: float) -> float:
    """Refuse a significance that is not a number in ``[1e-12, 1)`` (NaN included)."""
    if not 1e-12 <= significance < 1.0:  # False for NaN
        raise SpecbenchError(f"--significance must be in [1e-12, 1), got {significance:g}")
    return significance


class Suite(_TruncationChecks):
    """Runs every check on one implementation; ``run()`` returns the results with Bonferroni verdicts."""

    def __init__(self, impl: Implementation, device: torch.device, modes: list[str], samples: int = DEFAULT_SAMPLES,
                 significance: float = DEFAULT_SIGNIFICANCE, seed: int = 0,
                 on_check: Callable[[str], None] = lambda name: None, method: str = "token",
                 shared_with: Suite | None = None) -> None:
        self.impl, self.device, self.modes = impl, device, modes
        self.method = methods.check_method(method)
        self.samples, self.significance, self.seed = samples, check_significance(significance), seed
        # the suites whose tests share one Bonferroni budget: this one, and those of ``shared_with`` when given
        self.budget: list[Suite] = [self] if shared_with is None else shared_with.budget
        if shared_with is not None:
            if shared_with.significance != self.significance:
                raise ValueError(f"suites that share a budget share the significance, got {significance:g} and "
                                 f"{shared_with.significance:g}")
            self.budget.append(self)
        self.on_check = on_check
        self.results: list[CheckResult] = []
        self._own_verdicts: dict[int, str] = {}  # a tested result's verdict before any level (_bonferroni)
        self._watching_ctrl_c = False  # True while a SIGINT handler records real Ctrl-Cs
        self._ctrl_c = False

    # --- running ------------------------------------------------------------------------------------------------

    def run(self) -> list[CheckResult]:
        """Run every check; a real Ctrl-C stops the run (``finished()`` then gives the checks done)."""
        previous = signal.getsignal(signal.SIGINT)
        watch = threading.current_thread() is threading.main_thread() and previous is signal.default_int_handler
        if watch:
            signal.signal(signal.SIGINT, self._on_ctrl_c)
        self._watching_ctrl_c = watch
        try:
            self._run_checks()
        finally:
            if watch:
                signal.signal(signal.SIGINT, previous)
            self._watching_ctrl_c = False
        return self.finished()

    def finished(self) -> list[CheckResult]:
        """The checks done so far (every check after ``run``), with Bonferroni verdicts among them."""
        return self._bonferroni()

    def _on_ctrl_c(self, signum: int, frame: object) -> None:
        self._ctrl_c = True
        raise KeyboardInterrupt

    def _run_checks(self) -> None:
        for mode in self.modes:
            reason = self.impl.unsupported(mode, self.device)
            if self.method not in self.impl.methods:
                reason = f"{self.impl.name} declares the methods {', '.join(self.impl.methods)}, not {self.method}"
            elif mode == "synthetic" and self.method != "token":
                reason = f"the synthetic mode accepts by its profile: it has no {self.method} rule"
            if reason:
                self.results.append(CheckResult("all checks", mode, "skipped", "-", detail=reason))
                continue
            if mode == "probabilistic":
                for index, config in enumerate(LAW_CONFIGS):
                    self._guard(f"token and count law ({config.label})", mode, self._law, config, index)
                self._guard("greedy identity (temperature-0 rows)", mode, self._greedy_identity, "probabilistic")
                self._truncation_checks(mode)
            if mode == "greedy":
                self._guard("greedy identity (ties, NaN, +-inf)", mode, self._greedy_identity, "greedy")
            if mode == "synthetic":
                self._guard("accepted-count law (profile rates)", mode, self._synthetic_law)
            self._declared("-1 and out-of-range draft ids", mode, self.impl.invalid_drafts, self._invalid_drafts)
            self._declared("num_draft_tokens < K", mode, self.impl.ragged, self._ragged)
            self._guard("poisoned output buffers", mode, self._poisoned, mode)
            self._declared("seed reproducibility", mode, self.impl.seeded, self._seeded)
            self._declared("batch invariance", mode, self.impl.batch_invariant, self._batch_invariant)
            self._declared("same tokens as the reference (specbench streams)", mode, self.impl.same_rng,
                           self._same_streams)

    def _declared(self, name: str, mode: str, declared: bool, check: Callable) -> None:
        if declared:
            self._guard(name, mode, check, mode)
        else:
            self.results.append(CheckResult(name, mode, "skipped", "-", detail=f"{self.impl.name} does not declare it"))

    def _guard(self, name: str, mode: str, check: Callable, *args: Any) -> None:
        self.on_check(f"{mode}: {name}")
        try:
            found = check(*args)
        except _Broken as exc:
            found = [CheckResult(name, mode, "FAIL", "exact", detail=str(exc))]
        for result in found:
            result.name = result.name or name
            result.mode = mode
            self.results.append(result)

    def _bonferroni(self) -> list[CheckResult]:
        # judged again whenever asked: a suite that shares its budget sees the level fall as later suites add tests,
        # so a test judged at an earlier level may pass now; a FAIL the check gave itself (an exact part) stays
        level = self.level
        for result in self.results:
            if result.p_value is not None:
                own = self._own_verdicts.setdefault(id(result), result.verdict)
                result.verdict = own if own == "FAIL" else "pass" if result.p_value >= level else "FAIL"
        return self.results

    @property
    def tests(self) -> int:
        """The statistical tests done so far by this suite (checks with a p-value)."""
        return sum(r.p_value is not None for r in self.results)

    @property
    def level(self) -> float:
        """The per-test significance level after the run: ``significance / m``, ``m`` the tests of every suite in
        the budget (this one alone unless ``shared_with`` joined it to others)."""
        return self.significance / max(sum(suite.tests for suite in self.budget), 1)

    def _call(self, kwargs: dict[str, Any], keep_logprobs: bool = False) -> VerifyResult:
        if self.method != "token" and kwargs.get("mode") == "probabilistic":
            kwargs = {"method": self.method, **kwargs}  # every probabilistic call runs the method checked
        try:
            result = self.impl.bind(kwargs)()
        except KeyboardInterrupt as exc:
            if self._ctrl_c or not self._watching_ctrl_c:  # a real Ctrl-C (or one we cannot tell apart) stops us
                raise
            raise _Broken("raised KeyboardInterrupt while nobody pressed Ctrl-C") from exc
        except SystemExit as exc:  # the run is not the implementation's to end, least of all with status 0
            raise _Broken(f"called sys.exit({exc.code!r})") from exc
        except Exception as exc:  # the implementation under test crashed: that is its verdict, not ours
            raise _Broken(f"raised {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from exc
        if not isinstance(result, VerifyResult):
            raise _Broken(f"returned {type(result).__name__}, not a VerifyResult")
        batch, num_rows = kwargs["draft_token_ids"].shape[0], kwargs["draft_token_ids"].shape[1] + 1
        shapes = [list(result.output_token_ids.shape), list(result.num_emitted.shape), list(result.num_accepted.shape)]
        if shapes != [[batch, num_rows], [batch], [batch]]:
            raise _Broken(f"returned shapes {shapes}, expected [[{batch}, {num_rows}], [{batch}], [{batch}]]")
        logprobs = None
        if keep_logprobs:
            logprobs = result.logprobs
            if not isinstance(logprobs, torch.Tensor) or list(logprobs.shape) != [batch, num_rows]:
                shape = list(logprobs.shape) if isinstance(logprobs, torch.Tensor) else type(logprobs).__name__
                raise _Broken(f"returned logprobs {shape}, expected a [{batch}, {num_rows}] tensor")
            logprobs = logprobs.detach().to("cpu", torch.float64)
        return result._replace(logprobs=None).map(lambda t: t.detach().to("cpu", torch.int64))._replace(
            logprobs=logprobs)

    # --- inputs -------------------------------------------------------------------------------------------------

    def _rows(self, config: _Config, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Target logits ``[K + 1, V]`` and draft logits ``[K, V]`` (float32) for a config, drawn until every
        slot's token law can be tested (module docstring; the best of ``_MAX_DRAWS`` draws)."""
        gen = torch.Generator().manual_seed(self.seed * 1000 + index)
        best, best_score = None, -1.0
        for _ in range(_MAX_DRAWS):
            rows = _draw_rows(config, gen)
            # fixed drafts are chosen where they are accepted about half the time: every slot is reached
            score = 1.0 if config.fixed_drafts else _testable(*rows, config)
            if score >= 1.0:
                return rows
            if score > best_score:
                best, best_score = rows, score
        return best

    def _kwargs(self, mode: str, target: torch.Tensor, drafts: torch.Tensor, temperature: float, n: int, *,
                draft_logits: torch.Tensor | None = None, draft_probs: torch.Tensor | None = None,
                num_draft_tokens: torch.Tensor | None = None, seed_offset: int = 0) -> dict[str, Any]:
        device = self.device
        expand = lambda rows: None if rows is None else rows.expand(n, *rows.shape).contiguous().to(device)
        seeds = rng.request_seed(self.seed + seed_offset, torch.arange(n, dtype=torch.int64))
        kwargs = {"mode": mode, "target_logits": expand(target), "draft_token_ids": drafts.to(device),
                  "draft_logits": expand(draft_logits), "draft_probs": expand(draft_probs),
                  "temperatures": torch.full((n,), temperature, dtype=torch.float32, device=device),
                  "seeds": seeds.to(device), "positions": torch.zeros(n, dtype=torch.int64, device=device)}
        if num_draft_tokens is not None:
            kwargs["num_draft_tokens"] = num_draft_tokens.to(device)
        if self.method != "token":
            kwargs["method"] = self.method
        return kwargs

    # --- the checks ---------------------------------------------------------------------------------------------

    def _law(self, config: _Config, index: int) -> list[CheckResult]:
        target, draft_logits = self._rows(config, index)
        temperature, n = config.temperature, self.samples
        q = torch.stack([oracle.softmax(row, temperature) for row in draft_logits])  # [K, V] float64
        given = {"logits": {"draft_logits": draft_logits}, "probs": {"draft_probs": q.to(torch.float32)},
                 "none": {}}[config.draft_kind]
        if config.fixed_drafts:
            # per slot a draft with q(x) > p(x), accepted near half the time: both the draft and the residual show
            p = torch.stack([oracle.softmax(row, temperature) for row in target[:NUM_SPEC]])
            ratio = torch.where(q > p, p / q, 2.0)
            fixed = (ratio - 0.5).abs().argmin(dim=-1)
            drafts = fixed.expand(n, NUM_SPEC).contiguous()
        else:
            drafts = oracle.sample_drafts(q, n, seed=self.seed * 7919 + index)
        kwargs = self._kwargs("probabilistic", target, drafts, temperature, n, **given)
        result = self._call(kwargs)
        if config.fixed_drafts:
            law = oracle.step_distribution(mode="probabilistic", target_logits=target, draft_token_ids=fixed,
                                           num_draft_tokens=NUM_SPEC, draft_logits=draft_logits,
                                           temperature=temperature, method=self.method)
            emit, accept = law.emit_probs, law.accept_probs
        elif self.method == "token":
            emit, accept = _sampled_draft_law(target, q, given.get("draft_probs"), config.draft_kind, temperature)
        else:
            emit, accept = _method_law(self.method, target, q, given.get("draft_probs"), config.draft_kind,
                                       temperature)
        checks = _token_and_count_checks(result, emit, accept, config.label)
        if not methods.is_exact(self.method):
            # the exact rule's law on the same drafts: the target's for drafts drawn from q, the token rule's
            # for fixed drafts (which no exact rule turns into the target's law)
            if config.fixed_drafts:
                exact_law = oracle.step_distribution(
                    mode="probabilistic", target_logits=target, draft_token_ids=fixed, num_draft_tokens=NUM_SPEC,
                    draft_logits=draft_logits, temperature=temperature)
                exact_emit, token_accept = exact_law.emit_probs, exact_law.accept_probs
            else:
                exact_emit, token_accept = _sampled_draft_law(target, q, given.get("draft_probs"), config.draft_kind,
                                                              temperature)
                if config.draft_kind != "none":
                    exact_emit = torch.stack([oracle.softmax(row, temperature) for row in target])
            checks.append(_lossy_report(self.method, result, exact_emit, emit, accept, token_accept, config.label))
        return checks

    def _greedy_identity(self, mode: str) -> list[CheckResult]:
        gen = torch.Generator().manual_seed(self.seed + 11)
        n = self._few(64)
        target = torch.randn(n, NUM_SPEC + 1, VOCAB, generator=gen)
        target[0::4, :, 3] = target[0::4, :, 5] = 9.0  # a tie: the lowest id wins
        target[1::4, :, 2] = float("nan")  # NaN counts as -inf
        target[2::4, :, 7] = float("inf")
        target[2::4, :, 9] = float("inf")  # two +inf share the mass: a tie again
        target[3::4, :, 0] = float("-inf")
        top = target.nan_to_num(nan=float("-inf"), posinf=3e38).argmax(dim=-1)[:, :NUM_SPEC]
        other = torch.randint(0, VOCAB, (n, NUM_SPEC), generator=gen)
        drafts = torch.where(torch.rand(n, NUM_SPEC, generator=gen) < 0.7, top, other)
        kwargs = {"mode": mode, "target_logits": target.to(self.device), "draft_token_ids": drafts.to(self.device),
                  "temperatures": torch.zeros(n, dtype=torch.float32, device=self.device),
                  "seeds": torch.arange(n, dtype=torch.int64, device=self.device)}
        if mode == "probabilistic":
            kwargs["draft_probs"] = torch.softmax(torch.randn(n, NUM_SPEC, VOCAB, generator=gen), -1).to(self.device)
        if self.method != "token":
            kwargs["method"] = self.method
        got, want = self._call(kwargs), _reference(kwargs)
        return [_exact_equal(got, want, n)]

    def _synthetic_law(self) -> list[CheckResult]:
        rates = [0.8, 0.6, 0.3]
        target, _ = self._rows(LAW_CONFIGS[0], 0)
        drafts = torch.zeros(self.samples, NUM_SPEC, dtype=torch.int64)
        kwargs = self._kwargs("synthetic", target, drafts, 1.0, self.samples)
        kwargs["acceptance_rates"] = rates
        result = self._call(kwargs)
        conditional = torch.tensor([rates[0]] + [rates[i] / rates[i - 1] for i in range(1, NUM_SPEC)],
                                   dtype=torch.float64)
        return [_count_check(result.num_accepted, conditional, "accepted-count law (profile rates)")]

    def _invalid_drafts(self, mode: str) -> list[CheckResult]:
        target, draft_logits = self._rows(LAW_CONFIGS[1], 1)
        n = self.samples if mode == "probabilistic" else self._few(64)
        drafts = torch.randint(0, VOCAB, (n, NUM_SPEC), generator=torch.Generator().manual_seed(self.seed + 3))
        drafts[:, 0] = torch.tensor([-1, VOCAB, VOCAB + 1000])[torch.arange(n) % 3]
        given = {"draft_logits": draft_logits} if mode == "probabilistic" else {}
        kwargs = self._kwargs(mode, target, drafts, 0.0 if mode == "greedy" else 1.0, n, **given)
        if mode == "synthetic":
            kwargs["acceptance_rates"] = [0.8, 0.6, 0.3]
        result = self._call(kwargs)
        accepted = int((result.num_accepted > 0).sum())
        tokens = result.output_token_ids[:, 0]
        bad = int(((tokens < 0) | (tokens >= VOCAB)).sum())
        if accepted or bad:
            return [CheckResult("-1 and out-of-range draft ids", mode, "FAIL", "exact", samples=n,
                                detail=f"{accepted} requests accepted an invalid draft, {bad} emitted no valid token")]
        if mode == "greedy":
            want = oracle.greedy_token(target[0])
            wrong = int((tokens != want).sum())
            verdict = "FAIL" if wrong else "pass"
            return [CheckResult("-1 and out-of-range draft ids", mode, verdict, "exact", samples=n,
                                detail=f"{wrong} requests emitted another token than the argmax {want}")]
        p = oracle.softmax(target[0], 1.0)
        return [_chi_square_check("-1 and out-of-range draft ids: token law (p)", tokens, p)]

    def _ragged(self, mode: str) -> list[CheckResult]:
        target_row, draft_row = self._rows(LAW_CONFIGS[0], 0)
        target = target_row[0].expand(NUM_SPEC + 1, VOCAB).contiguous()  # every row the same p
        draft_logits = draft_row[0].expand(NUM_SPEC, VOCAB).contiguous()
        n = self.samples if mode == "probabilistic" else self._few(64)
        counts = torch.arange(n, dtype=torch.int32) % (NUM_SPEC + 1)
        q = oracle.softmax(draft_logits[0], 1.0)
        drafts = oracle.sample_drafts(q.expand(NUM_SPEC, VOCAB), n, seed=self.seed + 5)
        given = {"draft_logits": draft_logits} if mode == "probabilistic" else {}
        rates = [0.8, 0.6, 0.3]
        kwargs = self._kwargs(mode, target, drafts, 0.0 if mode == "greedy" else 1.0, n, num_draft_tokens=counts,
                              **given)
        if mode == "synthetic":
            kwargs["acceptance_rates"] = rates
        result = self._call(kwargs)
        problems = _structure_problems(result, counts.to(torch.int64))
        structural = CheckResult("num_draft_tokens < K: nothing past a request's count", mode,
                                 "FAIL" if problems else "pass", "exact", samples=n, detail=problems)
        if mode != "probabilistic" or problems:
            if mode == "greedy" and not problems:
                got_equal = _exact_equal(result, _reference(kwargs), n)
                got_equal.name = "num_draft_tokens < K: same as the reference"
                return [structural, got_equal]
            return [structural]
        p = oracle.softmax(target[0], 1.0)
        accept = float(sum(q[x] * oracle.acceptance_probability(p, q, x) for x in range(VOCAB)))
        joint, first_slot = [], torch.zeros(VOCAB, dtype=torch.float64)
        for count in range(NUM_SPEC + 1):
            if self.method == "token":
                law = [accept**k * (1 - accept) for k in range(count)] + [accept**count]
                first_slot += p * float((counts == count).sum()) / n
            else:  # the method's own law for a request of `count` drafts
                emit, rates = oracle.sampled_step_law(self.method, p.expand(count + 1, VOCAB), q.expand(count, VOCAB))
                reach = torch.cat([torch.ones(1, dtype=torch.float64), torch.cumprod(rates, 0)])
                law = (reach - torch.cat([reach[1:], torch.zeros(1, dtype=torch.float64)])).tolist()
                first_slot += emit[0] * float((counts == count).sum()) / n
            joint.extend(law)
        observed = torch.zeros(len(joint), dtype=torch.int64)
        start = torch.tensor([sum(range(1, c + 1)) for c in range(NUM_SPEC + 1)])  # offset of group c
        observed.index_add_(0, start[counts.to(torch.int64)] + result.num_accepted, torch.ones(n, dtype=torch.int64))
        group = torch.bincount(counts.to(torch.int64), minlength=NUM_SPEC + 1).to(torch.float64)
        weights = torch.tensor(joint, dtype=torch.float64) * torch.repeat_interleave(group, torch.arange(1, NUM_SPEC + 2))
        return [structural,
                _chi_square_counts("num_draft_tokens < K: joint law of (count, accepted)", observed, weights / n),
                _chi_square_check("num_draft_tokens < K: first slot's token law", result.output_token_ids[:, 0],
                                  first_slot)]

    def _poisoned(self, mode: str) -> list[CheckResult]:
        target, draft_logits = self._rows(LAW_CONFIGS[0], 0)
        n = self._few(256)
        given = {"draft_logits": draft_logits} if mode == "probabilistic" else {}
        temperature = 0.0 if mode == "greedy" else 1.0
        top = torch.stack([oracle.softmax(row, 1.0).argmax() for row in target[:NUM_SPEC]])
        accepted = top.expand(n, NUM_SPEC).contiguous()  # greedy and synthetic accept these; often the others
        rejected = (accepted + 1 + torch.arange(n)[:, None] % (VOCAB - 1)) % VOCAB
        rejected[::2] = accepted[::2]
        rates = {"acceptance_rates": [1.0, 1.0, 1.0]} if mode == "synthetic" else {}
        first = self._kwargs(mode, target, accepted, temperature, n, **given) | rates
        if mode == "synthetic":
            rates = {"acceptance_rates": [0.5, 0.25, 0.1]}
        second = self._kwargs(mode, target, rejected, temperature, n, seed_offset=1, **given) | rates
        self._call(first)  # long outputs first: a reused buffer must be overwritten
        _poison_allocator(self.device)
        result = self._call(second)
        problems = _structure_problems(result, torch.full((n,), NUM_SPEC, dtype=torch.int64))
        return [CheckResult("poisoned output buffers", mode, "FAIL" if problems else "pass", "exact", samples=n,
                            detail=problems or "every slot past the last emitted token is -1")]

    def _seeded(self, mode: str) -> list[CheckResult]:
        n = self._few(512)
        kwargs = self._small_batch(mode, n)
        first, again = self._call(kwargs), self._call(kwargs)
        other = self._call({**kwargs, "seeds": kwargs["seeds"] + 1})
        same = all(torch.equal(a, b) for a, b in zip(first[:3], again[:3], strict=True))
        differs = mode == "greedy" or not torch.equal(first.output_token_ids, other.output_token_ids)
        detail = "" if same else "the same seeds gave different outputs"
        detail += "" if differs else ("; " if detail else "") + "other seeds gave the very same outputs (seeds ignored?)"
        return [CheckResult("seed reproducibility", mode, "pass" if same and differs else "FAIL", "exact",
                            samples=n, detail=detail or "same seeds, same outputs; other seeds, other outputs")]

    def _batch_invariant(self, mode: str) -> list[CheckResult]:
        n = self._few(64)
        kwargs = self._small_batch(mode, n)
        whole = self._call(kwargs)
        order = torch.randperm(n, generator=torch.Generator().manual_seed(self.seed + 9)).to(self.device)
        permuted = {k: (v[order] if isinstance(v, torch.Tensor) and v.dim() > 0 else v) for k, v in kwargs.items()}
        again = self._call(permuted)
        alone = self._call({k: (v[:5] if isinstance(v, torch.Tensor) and v.dim() > 0 else v)
                            for k, v in kwargs.items()})
        order = order.cpu()
        moved = sum(int((whole[i][order] != again[i]).reshape(n, -1).any(dim=1).sum()) for i in range(3))
        apart = sum(int((whole[i][:5] != alone[i]).reshape(5, -1).any(dim=1).sum()) for i in range(3))
        verdict = "FAIL" if moved or apart else "pass"
        return [CheckResult("batch invariance", mode, verdict, "exact", samples=n,
                            detail=f"{moved} outputs changed when the batch was shuffled, {apart} when 5 ran alone")]

    def _same_streams(self, mode: str) -> list[CheckResult]:
        from specbench.bench import check_output

        n = self._few(2000)
        kwargs = self._small_batch(mode, n)
        got, want = self._call(kwargs), _reference(kwargs)
        check = check_output(mode, got, want, VOCAB, same_rng=True, draft_token_ids=kwargs["draft_token_ids"],
                             method=self.method)
        return [CheckResult("same tokens as the reference (specbench streams)", mode,
                            "pass" if check.ok else "FAIL", "exact", samples=n,
                            detail=check.reason or f"{check.token_agreement:.2%} of sampled tokens agree")]

    def _few(self, n: int) -> int:
        # the deterministic checks need no more requests than the statistical ones (the interpreter is slow)
        return max(min(n, self.samples), 8)

    def _small_batch(self, mode: str, n: int) -> dict[str, Any]:
        target, draft_logits = self._rows(LAW_CONFIGS[0], 0)
        q = torch.stack([oracle.softmax(row, 1.0) for row in draft_logits])
        drafts = oracle.sample_drafts(q, n, seed=self.seed + 21)
        given = {"draft_logits": draft_logits} if mode == "probabilistic" else {}
        kwargs = self._kwargs(mode, target, drafts, 0.0 if mode == "greedy" else 1.0, n, **given)
        if mode == "synthetic":
            kwargs["acceptance_rates"] = [0.8, 0.6, 0.3]
        return kwargs


def _draw_rows(config: _Config, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    scale = 6.0 if config.distance == "sharp" else 1.5
    target = torch.randn(NUM_SPEC + 1, VOCAB, generator=gen) * scale
    if config.distance == "far":
        draft = torch.randn(NUM_SPEC, VOCAB, generator=gen) * scale
    else:
        draft = target[:NUM_SPEC] + torch.randn(NUM_SPEC, VOCAB, generator=gen) * (0.3 * scale)
    if config.distance == "offset":
        # as large as a real model's top logits: bfloat16 steps there are 0.25, float32's 4e-6
        target, draft = target + 40.0, draft + 40.0
    return target, draft


def _testable(target: torch.Tensor, draft_logits: torch.Tensor, config: _Config) -> float:
    """At least 1 when drafts drawn from ``q`` reach the bonus slot ``MIN_BONUS_SHARE`` of the time and
    every slot emits another token than its mode ``MIN_SLOT_SPREAD`` of the time (a correct sampler's
    slot ``i`` emits from ``p_i``; it is reached when the drafts before it are accepted, each with
    probability ``sum min(p, q)``, or ``sum q p`` when the sampler sees one-hot drafts)."""
    p = torch.softmax(target.double() / config.temperature, dim=-1)  # [K + 1, V]
    q = torch.softmax(draft_logits.double() / config.temperature, dim=-1)  # [K, V]
    accept = (q * p[:NUM_SPEC]).sum(dim=-1) if config.draft_kind == "none" else torch.minimum(p[:NUM_SPEC], q).sum(-1)
    reach = torch.cat([torch.ones(1, dtype=torch.float64), torch.cumprod(accept, 0)])  # [K + 1]
    spread = reach * (1.0 - p.max(dim=-1).values)
    return min(float(reach[-1]) / MIN_BONUS_SHARE, float(spread.min()) / MIN_SLOT_SPREAD)


class _Broken(Exception):
    """The implementation under test crashed or returned something else than a VerifyResult."""


def _poison_allocator(device: torch.device) -> None:
    # freed memory full of a large id: an output slot the implementation forgets to write reads as garbage
    junk = torch.full((1 << 22,), 0x5A5A5A5A5A5A5A5A, dtype=torch.int64, device=device)
    del junk


def _structure_problems(result: VerifyResult, counts: torch.Tensor) -> str:
    tokens, emitted, accepted = result.output_token_ids, result.num_emitted, result.num_accepted
    slots = torch.arange(tokens.shape[1])[None, :]
    problems = []
    if bool((accepted > counts).any()):
        problems.append(f"{int((accepted > counts).sum())} requests accepted more drafts than they had")
    if bool(((emitted != accepted + 1) & (emitted != accepted)).any()):
        problems.append("num_emitted is not num_accepted + 1")
    past = tokens[slots >= emitted[:, None]]
    if bool((past != -1).any()):
        problems.append(f"{int((past != -1).sum())} slots past the last emitted token are not -1 "
                        f"(e.g. {int(past[past != -1][0])})")
    used = tokens[slots < emitted[:, None]]
    if bool(((used < 0) | (used >= VOCAB)).any()):
        problems.append("emitted ids outside [0, V)")
    return "; ".join(problems)


def _sampled_draft_law(target: torch.Tensor, q: torch.Tensor, draft_probs: torch.Tensor | None, kind: str,
                       temperature: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Per slot: the law of the emitted token when drafts are drawn from ``q`` ``[K + 1, V]``, and the
    acceptance probability ``[K]``, for the distribution the sampler is told (``kind``)."""
    emit, accept = [], []
    for i in range(NUM_SPEC):
        p = oracle.softmax(target[i], temperature)
        told = q[i] if draft_probs is None else draft_probs[i].to(torch.float64)
        row, rate = torch.zeros(VOCAB, dtype=torch.float64), 0.0
        for x in range(VOCAB):
            q_told = oracle._point_mass(x, VOCAB) if kind == "none" else told
            row += q[i, x] * oracle.emitted_distribution(p, q_told, x)
            rate += float(q[i, x]) * oracle.acceptance_probability(p, q_told, x)
        emit.append(row)
        accept.append(rate)
    emit.append(oracle.softmax(target[NUM_SPEC], temperature))
    return torch.stack(emit), torch.tensor(accept, dtype=torch.float64)


def _method_law(method: str, target: torch.Tensor, q: torch.Tensor, draft_probs: torch.Tensor | None, kind: str,
                temperature: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``_sampled_draft_law`` for another method than ``token``: the oracle's law of each slot (drafts drawn
    from ``q``, the sampler told ``draft_probs``, ``q`` or nothing) and the acceptance by position."""
    p = torch.stack([oracle.softmax(row, temperature) for row in target])  # [K + 1, V]
    if kind == "none":
        return oracle.sampled_step_law_one_hot(method, p, q)
    told = q if draft_probs is None else draft_probs.to(torch.float64)
    return oracle.sampled_step_law(method, p, q, told)


def _lossy_report(method: str, result: VerifyResult, p: torch.Tensor, emit: torch.Tensor, accept: torch.Tensor,
                  token_accept: torch.Tensor, label: str) -> CheckResult:
    """What a lossy method costs and gains on one config: each slot's total-variation distance from the
    exact law ``p`` ``[K + 1, V]`` (the target's; the token rule's for fixed or one-hot drafts, which no exact
    rule turns into the target's), exact from the oracle's ``emit`` and measured, and its expected accepted
    length beside the token rule's (oracle). Informative: a lossy method is not failed for it."""
    exact = [0.5 * float((emit[i] - p[i]).abs().sum()) for i in range(NUM_SPEC + 1)]
    measured = []
    for i in range(NUM_SPEC + 1):
        tokens = result.output_token_ids[result.num_accepted >= i, i]
        seen = torch.bincount(tokens.clamp(0, VOCAB - 1), minlength=VOCAB).to(torch.float64)
        measured.append(0.5 * float((seen / tokens.numel() - p[i]).abs().sum()) if tokens.numel() else float("nan"))
    gained, base = oracle.expected_accepted(accept), oracle.expected_accepted(token_accept)
    measured_length = float(result.num_accepted.to(torch.float64).mean())
    detail = (f"LOSSY ({method}): total variation from the exact law by slot, oracle "
              f"{'/'.join(f'{x:.3f}' for x in exact)}, measured {'/'.join(f'{x:.3f}' for x in measured)}; "
              f"expected accepted length {gained:.3f} (measured {measured_length:.3f}) vs {base:.3f} for token "
              f"({gained - base:+.3f})")
    return CheckResult(f"lossy: distance from the target ({label})", "", "lossy", "exact",
                       samples=int(result.num_accepted.numel()), detail=detail, total_variation=max(exact))
