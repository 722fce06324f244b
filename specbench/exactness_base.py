"""The ground floor of the exactness suite, below ``specbench/exactness.py`` (the suite and its untruncated
checks) and ``specbench/exactness_truncation.py`` (truncation and log-probabilities), so that imports run one
way: the problem sizes (``V = 16``, ``K = 3``, what a law check's rows must reach), the untruncated law
configs, the check record (``CheckResult``) and the tests that give a check its verdict: chi-square goodness
of fit (bins pooled until each expects ``MIN_EXPECTED``), the accepted-count law, and exact equality with
the torch reference.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
from scipy import stats

from specbench.verification import VerifyResult, verify

VOCAB = 16
NUM_SPEC = 3
MIN_EXPECTED = 5.0  # chi-square bins are pooled until each expects at least this many
# 1% of 20,000 requests is 200 bonus tokens to test, 0.1% is 20 tokens off a slot's mode (two chi-square
# bins); rows are redrawn at most _MAX_DRAWS times to get there
MIN_BONUS_SHARE = 0.01
MIN_SLOT_SPREAD = 1e-3
_MAX_DRAWS = 1000


@dataclass
class CheckResult:
    """One check's outcome. ``verdict`` is ``pass``, ``FAIL``, ``skipped`` or ``lossy`` (a report on a lossy
    method's distance from the target, which nobody fails); ``test`` names the test
    (``chi-square``, ``exact``); ``p_value`` is None for exact checks; ``samples`` counts what was tested."""

    name: str
    mode: str
    verdict: str
    test: str
    statistic: float | None = None
    p_value: float | None = None
    samples: int | None = None
    detail: str = ""
    total_variation: float | None = None  # between the frequencies and the law, chi-square checks
    acceptance_measured: list[float] | None = None  # by position, accepted-count checks
    acceptance_due: list[float] | None = None

    def as_dict(self) -> dict[str, Any]:
        record = asdict(self)
        if record["statistic"] is not None and not math.isfinite(record["statistic"]):
            record["statistic"] = None  # JSON has no infinity; the detail says what happened
        if record["acceptance_measured"] is not None:
            record["acceptance_measured"] = [None if math.isnan(x) else x for x in record["acceptance_measured"]]
        return record


@dataclass(frozen=True)
class _Config:
    label: str
    temperature: float
    draft_kind: str  # logits, probs, none
    distance: str  # close (high acceptance), far (low), sharp (large spread, close), offset (close, near 40)
    fixed_drafts: bool = False


LAW_CONFIGS = (
    _Config("T=1, close draft logits", 1.0, "logits", "close"),
    _Config("T=1, far draft probs", 1.0, "probs", "far"),
    _Config("T=0.6, close draft probs", 0.6, "probs", "close"),
    _Config("T=0.6, far draft logits", 0.6, "logits", "far"),
    _Config("T=1, one-hot drafts", 1.0, "none", "close"),  # far rows accept ~5% a slot: hardly a bonus token
    _Config("T=1, sharp draft logits", 1.0, "logits", "sharp"),
    _Config("T=1, close draft logits near 40", 1.0, "logits", "offset"),
    _Config("T=1, fixed drafts, draft logits", 1.0, "logits", "far", fixed_drafts=True),
)


def _reference(kwargs: dict[str, Any]) -> VerifyResult:
    return verify(**kwargs, backend="torch").map(lambda t: t.cpu().to(torch.int64))


def _exact_equal(got: VerifyResult, want: VerifyResult, n: int) -> CheckResult:
    wrong = (got.output_token_ids != want.output_token_ids).any(dim=1) | (got.num_accepted != want.num_accepted) \
        | (got.num_emitted != want.num_emitted)
    count = int(wrong.sum())
    detail = f"{count} of {n} requests differ from the torch reference" if count else "tokens and counts equal"
    if count:
        first = int(wrong.nonzero()[0, 0])
        detail += (f" (request {first}: {got.output_token_ids[first].tolist()} where "
                   f"{want.output_token_ids[first].tolist()} was due)")
    return CheckResult("", "", "FAIL" if count else "pass", "exact", samples=n, detail=detail)


def _token_and_count_checks(result: VerifyResult, emit: torch.Tensor, accept: torch.Tensor,
                            label: str) -> list[CheckResult]:
    checks = []
    for i in range(NUM_SPEC + 1):
        reached = result.num_accepted >= i if i < NUM_SPEC else result.num_accepted == NUM_SPEC
        name = f"token law, slot {i}" if i < NUM_SPEC else "token law, bonus slot"
        checks.append(_chi_square_check(f"{name} ({label})", result.output_token_ids[reached, i], emit[i]))
    checks.append(_count_check(result.num_accepted, accept, f"accepted-count law ({label})"))
    return checks


def _count_check(num_accepted: torch.Tensor, accept: torch.Tensor, name: str) -> CheckResult:
    reach = torch.cat([torch.ones(1, dtype=torch.float64), torch.cumprod(accept, 0)])
    law = reach - torch.cat([reach[1:], torch.zeros(1, dtype=torch.float64)])  # P(A = k)
    observed = torch.bincount(num_accepted.clamp(0, len(accept)), minlength=len(accept) + 1)
    result = _chi_square_counts(name, observed, law)
    rates, measured_rates = [], []
    for i in range(len(accept)):
        at = int((num_accepted >= i).sum())
        measured = int((num_accepted > i).sum()) / at if at else float("nan")
        rates.append(f"{measured:.3f} (due {float(accept[i]):.3f})")
        measured_rates.append(measured)
    result.acceptance_measured, result.acceptance_due = measured_rates, accept.tolist()
    result.detail = "acceptance by position: " + ", ".join(rates) + (f"; {result.detail}" if result.detail else "")
    return result


def _chi_square_check(name: str, tokens: torch.Tensor, law: torch.Tensor) -> CheckResult:
    """Chi-square of emitted ``tokens`` against ``law`` ``[V]`` (ids outside ``[0, V)`` fail outright)."""
    outside = int(((tokens < 0) | (tokens >= VOCAB)).sum())
    if outside:
        return CheckResult(name, "", "FAIL", "chi-square", math.inf, 0.0, int(tokens.numel()),
                           f"{outside} emitted ids outside [0, {VOCAB})")
    return _chi_square_counts(name, torch.bincount(tokens, minlength=VOCAB), law)


def _chi_square_counts(name: str, observed: torch.Tensor, law: torch.Tensor) -> CheckResult:
    """Chi-square goodness of fit of counts against a law (bins pooled until each expects ``MIN_EXPECTED``);
    the detail gives the total-variation distance between the frequencies and the law."""
    counts = observed.to(torch.float64).numpy()
    law = law.to(torch.float64).numpy()
    n = int(counts.sum())
    if n == 0:
        return CheckResult(name, "", "skipped", "chi-square", samples=0, detail="no request reached this slot")
    law = law / law.sum()
    tv = 0.5 * float(np.abs(counts / n - law).sum())
    impossible = counts[law <= 0].sum()
    if impossible:
        return CheckResult(name, "", "FAIL", "chi-square", math.inf, 0.0, n,
                           f"{int(impossible)} outcomes the law gives probability 0; total variation {tv:.4f}",
                           total_variation=tv)
    expected = law * n
    order = np.argsort(expected)
    bins_obs, bins_exp, pool_obs, pool_exp = [], [], 0.0, 0.0
    for index in order:  # smallest first: pool until the pool expects enough
        pool_obs, pool_exp = pool_obs + counts[index], pool_exp + expected[index]
        if pool_exp >= MIN_EXPECTED:
            bins_obs.append(pool_obs)
            bins_exp.append(pool_exp)
            pool_obs = pool_exp = 0.0
    if pool_exp > 0 and bins_exp:
        bins_obs[-1] += pool_obs
        bins_exp[-1] += pool_exp
    if len(bins_exp) < 2:
        return CheckResult(name, "", "skipped", "chi-square", samples=n,
                           detail=f"too few samples for a test ({n})", total_variation=tv)
    statistic, p_value = stats.chisquare(np.array(bins_obs), np.array(bins_exp))
    return CheckResult(name, "", "pass", "chi-square", float(statistic), float(p_value), n,
                       f"total variation {tv:.4f} over {len(bins_exp)} bins", total_variation=tv)
