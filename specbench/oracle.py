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
    """``q`` ``[V]`` float64 at one slot: softmax of the draft logits, the given probabilities (NaN -> 0),
    or the one-hot at the draft (no draft distribution, or an invalid draft-logit row)."""
    if draft_probs_row is not None:
        return torch.nan_to_num(draft_probs_row.to(torch.float64), nan=0.0)
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
    accept_probs = []
    emit_rows = []
    for i in range(num_draft_tokens + 1):
        # own: the law of the row's own token; p: what the acceptance test reads (the same, but for
        # target probabilities, which it reads as given)
        if target_probs is not None:
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
            accept = acceptance_probability(p, q, draft) if bool(p.any()) else 0.0
            emit = emitted_distribution(p, q, draft)
        accept_probs.append(accept)
        emit_rows.append(emit)

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
    weights = torch.nan_to_num(draft_probs.to(torch.float64).cpu(), nan=0.0)
    columns = [torch.multinomial(row, num_requests, replacement=True, generator=generator) for row in weights]
    if not columns:
        return torch.zeros(num_requests, 0, dtype=torch.int64)
    return torch.stack(columns, dim=1)
