"""Exact float64 distributions of one verification step, the yardstick of the statistical tests.

For one request with fixed inputs, ``step_distribution`` gives, at every row ``i`` the request
can reach: the probability that draft ``i`` is accepted given that every earlier draft was, and
the law of the token emitted in slot ``i`` given that row ``i`` is reached (the draft with
probability ``a_i``, the residual or the target's own token otherwise; the bonus row emits from
``p``). The rules are those of ``specbench/verification.py``'s docstring, computed in float64 with no
randomness, so any backend's empirical frequencies can be tested against them.

Notation (the README's "Notation" table): ``p`` the target distribution of a row, ``q`` the draft's, ``x`` the
draft token, ``K`` draft slots, ``V`` the vocabulary, ``n`` the request's own draft count.
Meant for small ``V``: nothing here is vectorized for speed.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

_F32_MAX = float(torch.finfo(torch.float32).max)


class StepDistribution(NamedTuple):
    """The exact law of one request's verification step (float64 tensors).

    - ``accept_probs`` ``[n]``: ``a_i``, the probability that draft ``i`` is accepted given that
      drafts ``0..i-1`` were.
    - ``reach_probs`` ``[n + 1]``: ``P(A >= i)``, the probability that row ``i`` is reached.
    - ``emit_probs`` ``[n + 1, V]``: the law of the token in output slot ``i`` given that row ``i``
      is reached; a row sums to less than 1 by the probability that the request stops there
      emitting nothing (an invalid target row).
    - ``num_accepted_probs`` ``[n + 1]``: ``P(A = k)`` for ``k = 0..n``.
    """

    accept_probs: torch.Tensor
    reach_probs: torch.Tensor
    emit_probs: torch.Tensor
    num_accepted_probs: torch.Tensor


def clean_logits(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """``[..., V]`` logits scaled by ``1 / temperature`` (none for 0) in float64; NaN -> -inf, +inf -> f32 max."""
    scaled = logits.to(torch.float64) * (1.0 / temperature if temperature > 0 else 1.0)
    return torch.nan_to_num(scaled, nan=float("-inf"), posinf=_F32_MAX, neginf=float("-inf"))


def softmax(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """``p`` of one row ``[V]`` in float64, all zeros when no cleaned logit is finite (an invalid row)."""
    cleaned = clean_logits(logits, temperature)
    if not bool(torch.isfinite(cleaned).any()):
        return torch.zeros_like(cleaned)
    return torch.softmax(cleaned, dim=-1)


def greedy_token(logits: torch.Tensor) -> int:
    """Argmax of one cleaned row (ties to the lowest id), or ``-1`` for an invalid row."""
    cleaned = clean_logits(logits, 0.0)
    if not bool(torch.isfinite(cleaned).any()):
        return -1
    return int(torch.nonzero(cleaned == cleaned.max())[0, 0])


def clean_probs(probs: torch.Tensor) -> torch.Tensor:
    """One target-probability row ``[V]`` in float64 as the contract reads it: NaN and negative
    entries 0, entries above 1 (``+inf`` too) 1, and nothing renormalised (the acceptance test
    reads ``p(x)`` as given; ``normalised`` gives the law a token drawn from the row follows)."""
    row = probs.to(torch.float64)
    return torch.where(row > 0, row.clamp(max=1.0), torch.zeros_like(row))


def normalised(row: torch.Tensor) -> torch.Tensor:
    """``row / row.sum()``, all zeros for a row with no mass (an invalid row)."""
    total = float(row.sum())
    return row / total if total > 0 else torch.zeros_like(row)


def greedy_token_of_probs(probs: torch.Tensor) -> int:
    """Argmax of one cleaned probability row (ties to the lowest id), or ``-1`` for an invalid row."""
    row = clean_probs(probs)
    if not bool((row > 0).any()):
        return -1
    return int(torch.nonzero(row == row.max())[0, 0])


class Truncation(NamedTuple):
    """Which tokens of one row survive truncation (``specbench/verification.py``'s rules).

    - ``order`` ``[V]`` int64: the row's tokens by value, largest first, ties to the lowest id.
    - ``kept_min``, ``kept_max``: the number ``L`` of tokens kept (the first ``L`` of ``order``)
      lies in ``[kept_min, kept_max]``; they differ only where a float32 implementation may
      put a boundary token either side (``TOP_P_TOLERANCE``, or ``min_p`` within rounding of a
      token's mass). ``kept_min == kept_max`` means the kept set is exact.
    """

    order: torch.Tensor
    kept_min: int
    kept_max: int

    @property
    def exact(self) -> bool:
        return self.kept_min == self.kept_max

    def mask(self, kept: int | None = None) -> torch.Tensor:
        """``[V]`` bool: the first ``kept`` (default ``kept_min``) tokens of the order."""
        mask = torch.zeros(self.order.numel(), dtype=torch.bool)
        mask[self.order[: self.kept_min if kept is None else kept]] = True
        return mask


def truncation_values(row: torch.Tensor, temperature: float, is_probs: bool) -> torch.Tensor:
    """The values a row's tokens are ranked by, float32 as the kernels compute them, in float64:
    ``clean(logit * (1 / T))`` with ``1 / T`` rounded to float32 (``T`` 0 or probabilities: no
    scaling), or the cleaned probabilities (no mass as ``-inf``: never ahead of a token with mass)."""
    if is_probs:
        cleaned = clean_probs(row)
        return torch.where(cleaned > 0, cleaned, float("-inf"))
    inv = torch.tensor(1.0, dtype=torch.float32) / torch.tensor(temperature if temperature > 0 else 1.0,
                                                                dtype=torch.float32)
    scaled = row.to(torch.float32) * inv
    return torch.nan_to_num(scaled, nan=float("-inf"), posinf=_F32_MAX, neginf=float("-inf")).to(torch.float64)


_MIN_P_TOLERANCE = 1e-6  # relative: a float32 exp is within a few ulp of the true mass


def truncation(values: torch.Tensor, *, top_k: int = 0, top_p: float = 1.0, min_p: float = 0.0,
               is_probs: bool = False) -> Truncation:
    """The tokens one row keeps under ``top_k``, ``top_p``, ``min_p`` (values from ``truncation_values``).

    The knobs are read as float32 (``top_p``, ``min_p``) as ``verify`` reads them, off values and
    out-of-range values as the contract says. A row with no finite value keeps nothing.
    """
    from specbench.verification import TOP_P_TOLERANCE

    vocab = values.numel()
    values = values.to(torch.float64)
    order = torch.sort(-values, stable=True).indices  # largest first, ties to the lowest id
    ranked = values[order]
    finite = int((ranked > float("-inf")).sum())
    if finite == 0:
        return Truncation(order, 0, 0)
    top_p = float(torch.tensor(top_p, dtype=torch.float32))
    min_p = float(torch.tensor(min_p, dtype=torch.float32))
    # masses relative to the largest: exp(z - m), or the probabilities themselves
    mass = ranked.clamp_min(0.0) if is_probs else torch.exp(ranked - ranked[0])
    mass = torch.where(ranked > float("-inf"), mass, 0.0)
    low = high = finite  # with a knob on, tokens with no mass never survive
    truncated_row = False
    if min_p > 0:  # NaN is off
        truncated_row = True
        threshold = min_p * (float(ranked[0]) if is_probs else 1.0)
        sure = int((mass >= threshold * (1 + _MIN_P_TOLERANCE)).sum())
        if min_p <= 1:  # tokens tied with the first have mass exactly 1 (max p) in float32 too: always kept
            sure = max(sure, int((ranked == ranked[0]).sum()))
        low = min(low, sure)
        high = min(high, max(sure, int((mass >= threshold * (1 - _MIN_P_TOLERANCE)).sum())))
        low, high = max(1, low), max(1, high)  # the first token always survives
    if 0 < top_k < vocab:
        truncated_row = True
        low, high = min(low, top_k), min(high, top_k)
    if top_p < 1:  # NaN is off
        truncated_row = True
        low, high = _top_p_range(mass, low, high, top_p, TOP_P_TOLERANCE)
    if not truncated_row:
        return Truncation(order, finite, finite)
    return Truncation(order, low, high)


def _top_p_range(mass: torch.Tensor, low: int, high: int, top_p: float, tolerance: float) -> tuple[int, int]:
    # For each possible length L of what min_p and top_k kept (low..high), the shortest prefix whose
    # mass reaches top_p * M(L); the range of lengths over every L and every rounding within tolerance.
    prefix = torch.cumsum(mass, dim=0) - mass  # mass before each token
    shortest, longest = len(mass), 0
    for kept in {low, high}:
        total = float(mass[:kept].sum())
        before = prefix[:kept]
        sure = int((before < top_p * total - tolerance * total).sum())
        maybe = int((before < top_p * total + tolerance * total).sum())
        shortest, longest = min(shortest, max(1, sure)), max(longest, max(1, maybe))
    return shortest, longest


def truncated(values: torch.Tensor, truncation_: Truncation, is_probs: bool, kept: int | None = None) -> torch.Tensor:
    """``p'`` ``[V]`` float64: the kept tokens' masses over their sum (the first ``kept`` of the order,
    default the exact ``kept_min``); all zeros for a row that keeps nothing."""
    values = values.to(torch.float64)
    finite = values > float("-inf")
    if not bool(finite.any()):
        return torch.zeros_like(values)
    mass = values.clamp_min(0.0) if is_probs else torch.exp(values - values.max())
    mass = torch.where(finite & truncation_.mask(kept), mass, 0.0)
    return normalised(mass)


def truncation_on(vocab: int, *, top_k: int = 0, top_p: float = 1.0, min_p: float = 0.0) -> bool:
    """Whether any knob is on (read as ``verify`` reads them: ``top_p``, ``min_p`` in float32; ``top_k``
    in ``(0, V)``, ``top_p < 1``, ``min_p > 0``, NaN off). A request with every knob off is untruncated."""
    top_p32 = float(torch.tensor(top_p, dtype=torch.float32))
    min_p32 = float(torch.tensor(min_p, dtype=torch.float32))
    return 0 < top_k < vocab or top_p32 < 1 or min_p32 > 0


def truncated_row(row: torch.Tensor, temperature: float, is_probs: bool, *, top_k: int = 0, top_p: float = 1.0,
                  min_p: float = 0.0) -> tuple[torch.Tensor, Truncation]:
    """``(p', truncation)`` of one row ``[V]`` (logits at ``temperature``, or probabilities): the law a
    truncated request samples from (the ambiguous range's ``kept_min``), and the kept set itself."""
    values = truncation_values(row, temperature, is_probs)
    cut = truncation(values, top_k=top_k, top_p=top_p, min_p=min_p, is_probs=is_probs)
    return truncated(values, cut, is_probs), cut


def truncation_is_exact(
    *,
    mode: str = "probabilistic",
    target_logits: torch.Tensor | None = None,
    target_probs: torch.Tensor | None = None,
    num_draft_tokens: int,
    draft_logits: torch.Tensor | None = None,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    min_p: float = 0.0,
    truncate_draft_logits: bool = True,
) -> bool:
    """Whether every kept set ``step_distribution`` uses for this request is exact (``kept_min ==
    kept_max``). Where one is not, a float32 backend may keep a boundary token ``step_distribution``
    drops (it uses ``kept_min``): statistical tests should pick inputs for which this is True."""
    target = target_logits if target_probs is None else target_probs
    vocab = target.shape[-1]
    greedy = mode == "greedy" or temperature == 0 or not temperature >= 0
    if greedy or not truncation_on(vocab, top_k=top_k, top_p=top_p, min_p=min_p):
        return True
    knobs = {"top_k": top_k, "top_p": top_p, "min_p": min_p}
    rows = [(target[i], target_probs is not None) for i in range(num_draft_tokens + 1)]
    if draft_logits is not None and truncate_draft_logits and mode == "probabilistic":
        rows += [(draft_logits[i], False) for i in range(num_draft_tokens)]
    return all(truncated_row(row, temperature, is_probs, **knobs)[1].exact for row, is_probs in rows)


def logprob(row: torch.Tensor, token: int, temperature: float, *, is_probs: bool = False,
            kind: str = "processed", top_k: int = 0, top_p: float = 1.0, min_p: float = 0.0) -> float:
    """The float64 log-probability of ``token`` under one target row ``[V]`` (``verify(logprobs=kind)``).

    ``"processed"``: the distribution the row samples from: ``log p'(y)`` for a truncated request,
    ``log p(y)`` (tempered softmax; probabilities over their sum) otherwise; a greedy row
    (``temperature == 0``) the log-softmax of the cleaned logits, or the probabilities over their sum.
    ``"raw"``: the log-softmax of the cleaned logits without temperature or truncation (probabilities
    over their sum). ``-inf`` for a token without mass (or outside the kept set); NaN for an invalid row.
    """
    if kind not in ("processed", "raw"):
        raise ValueError(f"kind must be processed or raw, got {kind!r}")
    vocab = row.numel()
    processed = kind == "processed" and temperature > 0
    if processed and truncation_on(vocab, top_k=top_k, top_p=top_p, min_p=min_p):
        values = truncation_values(row, temperature, is_probs)
        kept = truncation(values, top_k=top_k, top_p=top_p, min_p=min_p, is_probs=is_probs).mask()
        values = torch.where(kept, values, float("-inf"))
    elif is_probs:
        values = clean_probs(row)
        values = torch.where(values > 0, values, float("-inf"))
    else:
        values = clean_logits(row, temperature if processed else 0.0)
    if not bool((values > float("-inf")).any()):
        return float("nan")
    if is_probs:  # log p(y) - log S, S the sum of what is kept
        total = float(torch.where(values > float("-inf"), values, 0.0).sum())
        return float(torch.log(values[token].clamp_min(0.0))) - float(torch.log(torch.tensor(total)))
    return float(torch.log_softmax(values, dim=-1)[token])


def _point_mass(token: int, vocab: int) -> torch.Tensor:
    mass = torch.zeros(vocab, dtype=torch.float64)
    if 0 <= token < vocab:
        mass[token] = 1.0
    return mass


def draft_distribution(
    draft_logits_row: torch.Tensor | None,
    draft_probs_row: torch.Tensor | None,
    draft: int,
    temperature: float,
    vocab: int,
) -> torch.Tensor:
    """``q`` ``[V]`` float64 at one slot: softmax of the draft logits, the given probabilities (cleaned as
    target probabilities are: NaN and negative -> 0, above 1 -> 1),
    or the one-hot at the draft (no draft distribution, or an invalid draft-logit row)."""
    if draft_probs_row is not None:
        return clean_probs(draft_probs_row)
    if draft_logits_row is not None:
        q = softmax(draft_logits_row, temperature)
        if bool(q.any()):
            return q
    return _point_mass(draft, vocab)


def acceptance_probability(p: torch.Tensor, q: torch.Tensor, draft: int) -> float:
    """``P(u * q(x) < p(x))`` for ``u ~ U(0, 1)``: ``min(1, p(x) / q(x))``; 0 for an id outside ``[0, V)``."""
    if not 0 <= draft < p.numel():
        return 0.0
    p_x, q_x = float(p[draft]), float(q[draft])
    if q_x <= 0.0:
        return 1.0 if p_x > 0.0 else 0.0
    return min(1.0, p_x / q_x)


def residual_distribution(p: torch.Tensor, q: torch.Tensor, draft: int) -> torch.Tensor:
    """``norm(max(p - q, 0))`` ``[V]``; ``p`` itself for an id outside ``[0, V)`` or when nothing is left."""
    if not 0 <= draft < p.numel():
        return p / p.sum()
    w = (p - q).clamp_min(0.0)
    if not bool((w > 0).any()):
        w = p
    return w / w.sum()


def emitted_distribution(p: torch.Tensor, q: torch.Tensor, draft: int) -> torch.Tensor:
    """Law ``[V]`` of the token a probabilistic row emits for draft ``x``: ``a δ_x + (1 - a) residual``."""
    if not bool(p.any()):
        return torch.zeros_like(p)  # invalid row: nothing is emitted
    accept = acceptance_probability(p, q, draft)
    return accept * _point_mass(draft, p.numel()) + (1.0 - accept) * residual_distribution(p, q, draft)


def sampled_draft_emitted_distribution(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Law ``[V]`` of the emitted token when the draft itself is drawn from ``q``: ``sum_x q(x) emit(x)``.

    Leviathan et al. (2022), theorem 1: this is ``p`` exactly (``q`` a distribution).
    """
    total = torch.zeros_like(p)
    for draft in torch.nonzero(q > 0)[:, 0].tolist():
        total += q[draft] * emitted_distribution(p, q, draft)
    return total


def _row_law(p: torch.Tensor) -> tuple[torch.Tensor, float]:
    """``P = p / sum p`` and its entropy in nats (``specbench/verification.py``, "typical" and "relaxed")."""
    law = normalised(p)
    entropy = float(-(torch.where(law > 0, law * torch.log(law), 0.0)).sum())
    return law, entropy


def method_acceptance(method: str, p: torch.Tensor, q: torch.Tensor, draft: int) -> float:
    """The probability that one row accepts draft ``x`` under a per-row method (``token``, ``typical``,
    ``relaxed``; ``block`` judges the whole block: ``block_step_distribution``, and reads ``token`` here)."""
    from specbench import methods

    if not 0 <= draft < p.numel():
        return 0.0
    if method in ("typical", "relaxed"):
        law, entropy = _row_law(p)
        if method == "typical":
            threshold = min(methods.TYPICAL_EPSILON, methods.TYPICAL_DELTA * float(torch.exp(torch.tensor(-entropy))))
            return 1.0 if float(law[draft]) > threshold else 0.0
        if float(law[draft]) > 0 and entropy >= methods.RELAXED_MIN_ENTROPY and \
                float(torch.log(law.max()) - torch.log(law[draft])) <= methods.RELAXED_MARGIN:
            return 1.0
    return acceptance_probability(p, q, draft)


def method_emitted_distribution(method: str, p: torch.Tensor, q: torch.Tensor, draft: int) -> torch.Tensor:
    """Law ``[V]`` of the token a row emits for draft ``x`` under a per-row method: ``a δ_x + (1 - a) r``
    with ``r`` the token rule's residual, or ``p`` itself for ``typical`` (a rejected row samples ``p``)."""
    if method == "token" or method == "block":
        return emitted_distribution(p, q, draft)
    if not bool(p.any()):
        return torch.zeros_like(p)
    accept = method_acceptance(method, p, q, draft)
    rejected = normalised(p) if method == "typical" else residual_distribution(p, q, draft)
    return accept * _point_mass(draft, p.numel()) + (1.0 - accept) * rejected


def block_weights(p_draft: list[float], q_draft: list[float]) -> list[float]:
    """``w_0 .. w_n`` of block verification: ``w_{i+1} = min(1, w_i p_i(x_i) / q_i(x_i))`` (0 when
    ``w_i p_i(x_i) = 0``, 1 when ``q_i(x_i) = 0`` below it) from each row's ``p_i(x_i)`` and ``q_i(x_i)``."""
    weights = [1.0]
    for p_x, q_x in zip(p_draft, q_draft, strict=True):
        mass = weights[-1] * p_x
        weights.append(0.0 if mass <= 0 else (1.0 if mass >= q_x else mass / q_x))
    return weights


def block_step_distribution(rows: list[tuple[torch.Tensor, torch.Tensor, int]],
                            bonus: torch.Tensor) -> StepDistribution:
    """The exact law of block verification (Sun et al. 2024, alg. 2) for one fixed draft block.

    ``rows``: ``(p_i, q_i, x_i)`` for each draft row ``i < n`` (``p_i`` as the acceptance test reads it,
    ``q_i`` the draft's law, one-hot for one-hot drafts); ``bonus``: the law of row ``n``'s token.
    ``P(A = k) = h_k prod_{j > k} (1 - h_j)`` (``h`` as ``specbench/verification.py`` defines it); slot
    ``i`` emits the draft when ``A > i`` and the residual ``norm(max(w_i p_i - q_i, 0))`` when ``A = i``.
    """
    n = len(rows)
    vocab = bonus.numel()
    p_draft = [float(p[x]) if 0 <= x < vocab else 0.0 for p, _, x in rows]
    q_draft = [float(q[x]) if 0 <= x < vocab else 0.0 for _, q, x in rows]
    weights = block_weights(p_draft, q_draft)
    qs = [q if 0 <= x < vocab else torch.zeros_like(q) for _, q, x in rows]  # an invalid id has no q
    stop = [0.0] * (n + 1)
    residuals = []
    for i, (p, _, _) in enumerate(rows):
        left = (weights[i] * p - qs[i]).clamp_min(0.0)
        mass = float(left.sum())
        if 0 < i:
            stop[i] = min(mass / (mass + 1.0 - weights[i]), weights[i]) if mass > 0 else 0.0
        residuals.append(normalised(left) if mass > 0 else normalised(p))
    stop[n] = weights[n]
    count = torch.zeros(n + 1, dtype=torch.float64)
    survive = 1.0  # P(every test above k fails)
    for k in range(n, 0, -1):
        count[k] = stop[k] * survive
        survive *= 1.0 - stop[k]
    count[0] = survive
    reach = torch.flip(torch.cumsum(torch.flip(count, [0]), 0), [0])  # P(A >= i)
    accept = torch.where(reach[:n] > 0, reach[1:] / reach[:n].clamp_min(1e-300), 0.0)
    emit = []
    for i, (p, _, x) in enumerate(rows):
        if float(reach[i]) > 0:
            emit.append((float(reach[i + 1]) * _point_mass(x, vocab) + float(count[i]) * residuals[i]) / float(reach[i]))
        else:
            emit.append(residuals[i])
    emit.append(bonus)
    return StepDistribution(accept_probs=accept, reach_probs=reach, emit_probs=torch.stack(emit),
                            num_accepted_probs=count)


def sampled_step_law(method: str, p: torch.Tensor, q: torch.Tensor,
                     told: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The laws of one request's step when its drafts are drawn from ``q``: ``(emit [n + 1, V], accept [n])``,
    the law of slot ``i``'s token given that the request reaches it and ``P(A > i | A >= i)``.

    ``p`` ``[n + 1, V]`` float64 target rows (laws, the same whatever the drafts), ``q`` ``[n, V]`` the laws
    the drafts are drawn from, ``told`` ``[n, V]`` the ``q`` the sampler is given (default ``q``;
    ``sampled_step_law_one_hot`` for a sampler given no draft distribution). Per-row methods mix the
    emitted law over ``x ~ q``; ``block`` enumerates every draft block (``V ** n`` of them: small ``V``
    and ``n`` only).
    """
    return _sampled_law(method, p, q, q if told is None else told, one_hot=False)


def sampled_step_law_one_hot(method: str, p: torch.Tensor, q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``sampled_step_law`` for a sampler given one-hot drafts (no draft distribution) drawn from ``q``."""
    return _sampled_law(method, p, q, q, one_hot=True)


def _sampled_law(method: str, p: torch.Tensor, q: torch.Tensor, told: torch.Tensor,
                 one_hot: bool) -> tuple[torch.Tensor, torch.Tensor]:
    n, vocab = q.shape
    if method != "block" or n == 0:
        emit, accept = [], []
        for i in range(n):
            row, rate = torch.zeros(vocab, dtype=torch.float64), 0.0
            for x in range(vocab):
                if float(q[i, x]) <= 0:
                    continue
                given = _point_mass(x, vocab) if one_hot else told[i]
                row += q[i, x] * method_emitted_distribution(method, p[i], given, x)
                rate += float(q[i, x]) * method_acceptance(method, p[i], given, x)
            emit.append(row)
            accept.append(rate)
        emit.append(normalised(p[n]))
        return torch.stack(emit), torch.tensor(accept, dtype=torch.float64)
    blocks = torch.cartesian_prod(*[torch.arange(vocab)] * n).reshape(-1, n)  # [M, n]
    columns = torch.arange(n)
    chance = q[columns, blocks].prod(dim=1)  # P(block) [M]
    p_x = p[columns, blocks]  # [M, n]
    q_x = torch.ones_like(p_x) if one_hot else told[columns, blocks]
    weights = [torch.ones_like(chance)]
    for i in range(n):
        mass = weights[-1] * p_x[:, i]
        ratio = mass / q_x[:, i].clamp_min(1e-300)
        weights.append(torch.where(mass > 0, torch.where(mass >= q_x[:, i], 1.0, ratio), 0.0))
    stop, residuals = [torch.zeros_like(chance)], []
    for i in range(n):
        given = torch.nn.functional.one_hot(blocks[:, i], vocab).to(torch.float64) if one_hot else told[i][None, :]
        left = (weights[i][:, None] * p[i][None, :] - given).clamp_min(0.0)  # [M, V]
        mass = left.sum(dim=1)
        if i > 0:
            ratio = mass / (mass + 1.0 - weights[i]).clamp_min(1e-300)
            stop.append(torch.where(mass > 0, torch.minimum(ratio, weights[i]), 0.0))  # h_i = min(ratio, w_i)
        law = normalised(p[i])[None, :].expand_as(left)
        residuals.append(torch.where(mass[:, None] > 0, left / mass.clamp_min(1e-300)[:, None], law))
    stop.append(weights[n])
    count = torch.zeros(blocks.shape[0], n + 1, dtype=torch.float64)  # P(A = k | block)
    survive = torch.ones_like(chance)
    for k in range(n, 0, -1):
        count[:, k] = stop[k] * survive
        survive = survive * (1.0 - stop[k])
    count[:, 0] = survive
    reach_block = torch.flip(torch.cumsum(torch.flip(count, [1]), 1), [1])  # P(A >= i | block)
    reach = chance @ reach_block  # [n + 1]
    emit = []
    for i in range(n):
        drafted = torch.zeros(vocab, dtype=torch.float64).index_add_(0, blocks[:, i], chance * reach_block[:, i + 1])
        stopped = (chance * count[:, i]) @ residuals[i]
        emit.append((drafted + stopped) / float(reach[i]) if float(reach[i]) > 0 else normalised(p[i]))
    emit.append(normalised(p[n]))
    accept = torch.where(reach[:n] > 0, reach[1:] / reach[:n].clamp_min(1e-300), 0.0)
    return torch.stack(emit), accept


def expected_accepted(accept: torch.Tensor) -> float:
    """``E[A] = sum_i P(A >= i)`` from the conditional acceptance ``[n]`` (``accept_probs``)."""
    return float(torch.cumprod(accept, dim=0).sum()) if accept.numel() else 0.0


def step_distribution(
    *,
    mode: str,
    target_logits: torch.Tensor | None = None,
    target_probs: torch.Tensor | None = None,
    draft_token_ids: torch.Tensor,
    num_draft_tokens: int,
    draft_logits: torch.Tensor | None = None,
    draft_probs: torch.Tensor | None = None,
    temperature: float = 1.0,
    conditional_rates: list[float] | None = None,
    top_k: int = 0,
    top_p: float = 1.0,
    min_p: float = 0.0,
    truncate_draft_logits: bool = True,
    method: str = "token",
) -> StepDistribution:
    """The exact law of one request's step (``specbench/verification.py``'s rules, in float64).

    Args:
        mode: ``"greedy"``, ``"probabilistic"`` or ``"synthetic"``.
        target_logits: ``[K + 1, V]`` float (any dtype; read as float64).
        target_probs: ``[K + 1, V]`` float instead of ``target_logits``: taken as already tempered
            (``temperature`` is not applied to them; it says greedy or not and tempers the draft
            logits), cleaned by ``clean_probs``: the acceptance test reads them as given, a drawn
            token follows them normalised.
        draft_token_ids: ``[K]`` integer; ids outside ``[0, V)`` are rejected drafts.
        num_draft_tokens: ``n`` in ``0..K``.
        draft_logits / draft_probs: ``[K, V]`` or None (probabilistic mode); draft logits are
            divided by ``temperature`` whatever the target's form.
        temperature: ``T >= 0``; 0 (or ``mode="greedy"``) makes a greedy row; a negative or NaN
            one makes the request invalid: nothing is emitted (``A = 0``, every emit row zero).
        conditional_rates: ``K`` conditional rates ``c_i`` (synthetic mode).
        top_k, top_p, min_p: the request's truncation (``truncation``): a non-greedy request with a
            knob on reads ``p'`` for every target row (acceptance test, residual, bonus and synthetic
            own token) and, with ``truncate_draft_logits``, ``q'`` for draft logits. An ambiguous kept
            set (``Truncation.exact`` False) is taken at ``kept_min``: pick inputs for which
            ``truncation_is_exact`` holds when comparing with a float32 backend.
        truncate_draft_logits: cut draft logits like the target (default) or take them whole.
        method: ``"token"`` (default), ``"block"``, ``"typical"`` or ``"relaxed"``: the rule of a
            sampled row (``specbench/methods.py``); greedy rows and the synthetic mode have one rule.

    Returns:
        ``StepDistribution`` with ``accept_probs [n]``, ``reach_probs [n + 1]``,
        ``emit_probs [n + 1, V]``, ``num_accepted_probs [n + 1]``.
    """
    if draft_token_ids is None or (target_logits is None) == (target_probs is None):
        raise ValueError("step_distribution needs draft_token_ids and one of target_logits or target_probs")
    vocab = (target_logits if target_probs is None else target_probs).shape[-1]
    if mode != "greedy" and not temperature >= 0:  # negative or NaN (greedy mode ignores temperatures)
        reach = torch.zeros(num_draft_tokens + 1, dtype=torch.float64)
        reach[0] = 1.0
        return StepDistribution(accept_probs=torch.zeros(num_draft_tokens, dtype=torch.float64), reach_probs=reach,
                                emit_probs=torch.zeros(num_draft_tokens + 1, vocab, dtype=torch.float64),
                                num_accepted_probs=reach.clone())
    greedy = mode == "greedy" or temperature == 0
    knobs = {"top_k": top_k, "top_p": top_p, "min_p": min_p}
    cut = not greedy and truncation_on(vocab, **knobs)  # greedy rows ignore truncation
    accept_probs = []
    emit_rows = []
    block_rows = []  # (p_i, q_i, x_i) of each draft row, for block verification's law
    for i in range(num_draft_tokens + 1):
        # own: the law of the row's own token; p: what the acceptance test reads (the same, but for
        # target probabilities, which it reads as given)
        if cut:  # p': the acceptance test and every draw read the truncated, renormalised row
            own_token = -1
            is_probs = target_probs is not None
            own = p = truncated_row((target_probs if is_probs else target_logits)[i], temperature, is_probs,
                                    **knobs)[0]
        elif target_probs is not None:
            own_token = greedy_token_of_probs(target_probs[i]) if greedy else -1
            p = clean_probs(target_probs[i])
            own = _point_mass(own_token, vocab) if greedy else normalised(p)
        elif greedy:
            own_token = greedy_token(target_logits[i])
            own = p = _point_mass(own_token, vocab)  # zeros for an invalid row
        else:
            own = p = softmax(target_logits[i], temperature)
        if i == num_draft_tokens:
            emit_rows.append(own)  # the bonus row
            break
        draft = int(draft_token_ids[i])
        draft_valid = 0 <= draft < vocab
        if mode == "synthetic":
            # accepted rows are never read: an invalid row only matters when its own token is needed
            accept = float(conditional_rates[i]) if draft_valid else 0.0
            emit = accept * _point_mass(draft, vocab) + (1.0 - accept) * own
        elif greedy:
            accept = 1.0 if own_token >= 0 and draft == own_token else 0.0
            emit = own
        else:
            q = draft_distribution(
                None if draft_logits is None else draft_logits[i],
                None if draft_probs is None else draft_probs[i],
                draft,
                temperature,
                vocab,
            )
            if cut and truncate_draft_logits and draft_logits is not None and bool(q.any()):
                q_cut = truncated_row(draft_logits[i], temperature, False, **knobs)[0]
                q = q_cut if bool(q_cut.any()) else q  # an invalid draft-logit row stays one-hot
            accept = method_acceptance(method, p, q, draft) if bool(p.any()) else 0.0
            emit = method_emitted_distribution(method, p, q, draft)
            block_rows.append((p, q, draft))
        accept_probs.append(accept)
        emit_rows.append(emit)

    if method == "block" and not greedy and mode == "probabilistic" and num_draft_tokens > 0:
        return block_step_distribution(block_rows, emit_rows[-1])
    accept_tensor = torch.tensor(accept_probs, dtype=torch.float64)
    reach = torch.cat([torch.ones(1, dtype=torch.float64), torch.cumprod(accept_tensor, dim=0)])  # P(A >= i)
    num_accepted = reach - torch.cat([reach[1:], torch.zeros(1, dtype=torch.float64)])  # P(A = k)
    return StepDistribution(
        accept_probs=accept_tensor,
        reach_probs=reach,
        emit_probs=torch.stack(emit_rows),
        num_accepted_probs=num_accepted,
    )


def sample_drafts(draft_probs: torch.Tensor, num_requests: int, seed: int) -> torch.Tensor:
    """Drafts drawn from ``q``: ``[num_requests, K]`` int64, slot ``i`` from ``draft_probs[i]`` ``[K, V]``.

    A test helper (torch's own generator, independent of specbench's RNG): with drafts drawn
    from ``q``, the tokens a correct verifier emits are distributed as ``p`` at every slot.
    """
    generator = torch.Generator().manual_seed(seed)
    weights = clean_probs(draft_probs.cpu())  # (entry by entry: the draft probabilities as the contract reads them)
    columns = [torch.multinomial(row, num_requests, replacement=True, generator=generator) for row in weights]
    if not columns:
        return torch.zeros(num_requests, 0, dtype=torch.int64)
    return torch.stack(columns, dim=1)
