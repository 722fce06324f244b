"""The torch backend: the readable reference of every mode, and the baseline the kernels beat.

Same signatures as ``specbench/kernels/launch.py`` (a test checks it).
"""

from __future__ import annotations

import torch

from specbench import methods, rng, truncation
from specbench.verification import VerifyResult

_SIMULATE_CHUNK = 1 << 16


def simulate(
    *,
    conditional_rates: torch.Tensor,
    num_requests: int,
    seed: int,
    first_request: int,
    mixture_rates: torch.Tensor | None = None,
) -> torch.Tensor:
    """Drafts accepted per synthetic step; request ``r`` has seed ``request_seed(seed, first_request + r)``.

    The seed is used at position 0. ``conditional_rates`` ``[K]`` float32; returns ``[num_requests]`` int32.
    ``mixture_rates`` ``[M, K]`` float32 (``M`` a power of two): per-request spread, request ``r``'s
    conditional rates are row ``m = floor(w * M / 2**32)`` of it, ``w`` word 0 of its
    ``(seed, 0, SPREAD)`` stream; ``conditional_rates`` then only sets ``K``.
    """
    device = conditional_rates.device
    slots = torch.arange(conditional_rates.numel(), dtype=torch.int64, device=device)
    counts = torch.empty(num_requests, dtype=torch.int32, device=device)
    # Chunks that stay in cache: one pass over all requests at once is ~10x slower on a CPU.
    chunk = _SIMULATE_CHUNK if device.type == "cpu" else max(num_requests, 1)
    for start in range(0, num_requests, chunk):
        stop = min(start + chunk, num_requests)
        requests = torch.arange(first_request + start, first_request + stop, dtype=torch.int64, device=device)
        seeds = rng.request_seed(torch.tensor(seed, dtype=torch.int64, device=device), requests)
        seed_keys = rng.seed_key(seeds)
        keys = rng.stream_key(seed_keys[:, None], slots[None, :], rng.ACCEPT)  # [n, K]
        u = rng.to_uniform(rng.fmix32(keys))  # word 0 of each stream
        if mixture_rates is None:
            rates = conditional_rates[None, :]
        else:  # each request's row of the table, picked by word 0 of its (seed, 0, SPREAD) stream
            pick = rng.fmix32(rng.stream_key(seed_keys, torch.zeros_like(seed_keys), rng.SPREAD))
            rates = mixture_rates[(pick * mixture_rates.shape[0]) >> 32]
        # accept position i iff u_i < c_i; A is the length of the accepted prefix
        accepted = (u < rates).to(torch.int32)
        counts[start:stop] = accepted.cumprod(dim=1).sum(dim=1, dtype=torch.int32)
    return counts


# Layout and rules: the module docstring of specbench/verification.py. Here B, K, V are the batch, the
# draft slots per request and the vocabulary; p is the target distribution of a row, q the draft's.
_F32_MAX = torch.finfo(torch.float32).max
_NEG_INF = float("-inf")


def _clean(logits: torch.Tensor, inv_temperature: torch.Tensor) -> torch.Tensor:
    # [..., V] logits (any float dtype) times [...] 1/T, in float32; NaN -> -inf, +inf -> f32 max
    scaled = logits.to(torch.float32) * inv_temperature[..., None]
    return torch.nan_to_num(scaled, nan=_NEG_INF, posinf=_F32_MAX, neginf=_NEG_INF)


def _clean_probs(probs: torch.Tensor) -> torch.Tensor:
    # target probabilities as read: NaN and negative -> 0, above 1 (+inf too) -> 1, in float32
    probs = probs.to(torch.float32)
    return torch.where(probs > 0, probs.clamp(max=1.0), 0.0)


def _ranked(row: torch.Tensor, is_probs: bool) -> torch.Tensor:
    # what argmax and validity read: cleaned logits, or probabilities with no mass as -inf
    return torch.where(row > 0, row, _NEG_INF) if is_probs else row


def _softmax(cleaned: torch.Tensor, row_max: torch.Tensor) -> torch.Tensor:
    # exp(z - max) / sum; an invalid row (max = -inf) gives zeros, never NaN
    shifted = torch.exp(cleaned - torch.where(row_max > _NEG_INF, row_max, 0.0)[..., None])
    return shifted / shifted.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(torch.float32).tiny)


def _race(weights: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    # sample y with probability w(y) / sum(w): argmax_y w(y) / E_y over w(y) > 0, E_y = -log U(key, y)
    # (exponential race; ties go to the lowest id because argmax returns the first maximum)
    vocab = torch.arange(weights.shape[-1], dtype=torch.int64, device=weights.device)
    exponentials = -torch.log(rng.to_uniform(rng.words(keys[:, None], vocab[None, :])))  # [B, V]
    scores = torch.where(weights > 0, weights / exponentials, _NEG_INF)
    return scores.argmax(dim=-1)


class _Cut:
    """The truncation of one call: ``[B]`` knobs (None where not given) and ``on`` ``[B]``, the requests cut."""

    def __init__(self, top_k, top_p, min_p, on: torch.Tensor):
        self.knobs, self.on = (top_k, top_p, min_p), on

    def mask(self, values: torch.Tensor, is_probs: bool) -> torch.Tensor:
        # values [B, V] or [B, K, V]: each request's knobs on each of its rows
        shaped = [None if k is None else k.reshape(-1, *([1] * (values.dim() - 2))) for k in self.knobs]
        return truncation.kept_mask(values, *shaped, is_probs)

    def probs(self, values: torch.Tensor, is_probs: bool) -> torch.Tensor:
        # p' [.., V]: the kept masses over their sum
        return truncation.truncated_probs(values, self.mask(values, is_probs), is_probs)

    def probs_at(self, values: torch.Tensor, tokens: torch.Tensor, is_probs: bool) -> torch.Tensor:
        # p'(y) [..] at tokens [..] (in range)
        kept, total = truncation.truncated_masses(values, self.mask(values, is_probs), is_probs)
        return kept.gather(-1, tokens[..., None])[..., 0] / total.clamp_min(torch.finfo(torch.float32).tiny)


def _accept_uniforms(seed_keys: torch.Tensor, positions: torch.Tensor, slots: torch.Tensor) -> torch.Tensor:
    # u [B, K] = U(seed, pos + i, ACCEPT, 0)
    keys = rng.stream_key(seed_keys[:, None], positions[:, None] + slots[None, :], rng.ACCEPT)
    return rng.to_uniform(rng.words(keys, torch.zeros_like(keys)))


def verify(
    *,
    mode: str,
    target_logits: torch.Tensor | None,
    target_probs: torch.Tensor | None,
    draft_token_ids: torch.Tensor,
    num_draft_tokens: torch.Tensor,
    draft_logits: torch.Tensor | None,
    draft_probs: torch.Tensor | None,
    temperatures: torch.Tensor,
    seeds: torch.Tensor,
    positions: torch.Tensor,
    conditional_rates: torch.Tensor,
    top_k: torch.Tensor | None = None,
    top_p: torch.Tensor | None = None,
    min_p: torch.Tensor | None = None,
    truncate_draft_logits: bool = True,
    logprobs: str | None = None,
    method: str = "token",
    tree_parents: torch.Tensor | None = None,
    tree_candidates: str = "independent",
) -> VerifyResult:
    """One verification step, vectorized over the batch (inputs already checked by ``specbench.verify``).

    Args:
        mode: ``"greedy"``, ``"probabilistic"`` or ``"synthetic"``.
        target_logits: ``[B, K + 1, V]`` float32/bfloat16/float16 (upcast to float32), or None.
        target_probs: ``[B, K + 1, V]`` float, the target distribution as given (exactly one of the
            two): entries cleaned one by one, never renormalised (``specbench/verification.py``).
        draft_token_ids: ``[B, K]`` int64; ids outside ``[0, V)`` are rejected without a test.
        num_draft_tokens: ``[B]`` int32 in ``0..K``.
        draft_logits: ``[B, K, V]`` float or None (probabilistic mode only).
        draft_probs: ``[B, K, V]`` float or None (probabilistic mode only); NaN and negative entries count as 0,
            entries above 1 as 1.
        temperatures: ``[B]`` float32, 0 for a greedy row; it tempers target and draft logits (never
            probabilities); negative or NaN makes the request invalid (it emits nothing).
        seeds: ``[B]`` int64.
        positions: ``[B]`` int64, the sequence position of draft slot 0.
        conditional_rates: ``[max(K, 1)]`` float32, the synthetic profile ``c_i``.
        top_k, top_p, min_p: ``[B]`` int32 / float32 / float32 truncation knobs, each None when not
            given (``specbench/truncation.py``); greedy rows ignore them.
        truncate_draft_logits: cut draft logits like the target (True) or take them whole.
        logprobs: ``"processed"``, ``"raw"`` or None.
        method: ``"token"``, ``"block"``, ``"typical"`` or ``"relaxed"`` (``specbench/methods.py``); it
            changes the probabilistic mode's sampled rows only.
        tree_parents: ``[B, K]`` int64, the drafts' tree (``specbench/reference_tree.py``), or None for a chain.
        tree_candidates: ``"independent"`` or ``"without_replacement"`` (trees only).

    Returns:
        ``VerifyResult``: ``output_token_ids [B, K + 1]`` int64 (``-1`` past the last emitted
        token), ``num_emitted [B]`` int32, ``num_accepted [B]`` int32, ``logprobs [B, K + 1]``
        float32 (NaN past the last emitted token) or None; ``accepted_nodes [B, K]`` int32 for a tree.
    """
    if tree_parents is not None:
        from specbench import reference_tree  # it imports this module's helpers

        return reference_tree.verify_tree(
            mode=mode, target_logits=target_logits, target_probs=target_probs, draft_token_ids=draft_token_ids,
            num_draft_tokens=num_draft_tokens, draft_logits=draft_logits, draft_probs=draft_probs,
            temperatures=temperatures, seeds=seeds, positions=positions, conditional_rates=conditional_rates,
            tree_parents=tree_parents, tree_candidates=tree_candidates)
    is_probs = target_probs is not None
    target_rows = target_probs if is_probs else target_logits
    batch, num_rows, vocab = target_rows.shape
    num_spec = num_rows - 1
    device = target_rows.device
    # a negative or NaN temperature (possible only unchecked) makes the request invalid: it emits nothing
    invalid_request = ~(temperatures >= 0)  # [B]
    # unchecked counts are clamped, as the kernels clamp them; an invalid request decides no draft
    num_draft_tokens = torch.where(invalid_request, 0, num_draft_tokens.clamp(0, num_spec))
    greedy_row = temperatures == 0  # [B]
    inv_temperature = torch.where(greedy_row, 1.0, 1.0 / torch.where(greedy_row, 1.0, temperatures))  # [B]
    # Truncation runs only when a knob is given, and its results replace the untruncated ones only for
    # the requests it cuts (a knob on, not greedy): every other request keeps today's arithmetic bit for bit.
    cut = None
    if top_k is not None or top_p is not None or min_p is not None:
        cut = _Cut(top_k, top_p, min_p, truncation.active(top_k, top_p, min_p, vocab) & ~greedy_row)

    slots = torch.arange(num_spec, dtype=torch.int64, device=device)  # [K]
    drafts = draft_token_ids  # [B, K]
    draft_valid = (drafts >= 0) & (drafts < vocab)
    drafts_in_range = drafts.clamp(0, vocab - 1)
    seed_keys = rng.seed_key(seeds)  # [B]
    in_request = slots[None, :] < num_draft_tokens[:, None]  # [B, K]

    if mode == "synthetic":
        # forced profile: accept iff u < c_i and the draft is a real token; accepted rows are never read
        accept = draft_valid & (_accept_uniforms(seed_keys, positions, slots) < conditional_rates[None, :num_spec])
        alive = accept & in_request
    else:
        # per-row stats for every row at once: max (validity), argmax (greedy rows), p(x) (the others)
        if is_probs:
            target = _clean_probs(target_probs[:, :num_spec])  # [B, K, V]
        else:
            target = _clean(target_logits[:, :num_spec], inv_temperature[:, None])  # [B, K, V]
        row_max, row_argmax = _ranked(target, is_probs).max(dim=-1)  # [B, K]; argmax ties go to the lowest id
        row_valid = row_max > _NEG_INF  # a row with no finite value (no mass) stops its request
        accept = drafts == row_argmax
        if mode == "probabilistic":
            if is_probs:
                p_draft = target.gather(2, drafts_in_range[..., None])[..., 0]  # [B, K]: p(x) as given
            else:
                target_max = torch.where(row_valid, row_max, 0.0)[..., None]
                target_sum = torch.exp(target - target_max).sum(dim=-1)  # [B, K]
                p_draft = torch.exp(target.gather(2, drafts_in_range[..., None]) - target_max)
                p_draft = p_draft[..., 0] / target_sum  # [B, K]: p(x)
            if cut is not None:  # p'(x) = w(x) / S for a kept x, 0 otherwise
                p_draft = torch.where(cut.on[:, None], cut.probs_at(target, drafts_in_range, is_probs), p_draft)
            q_draft, draft_one_hot = _draft_prob_at_draft(
                draft_logits, draft_probs, inv_temperature, drafts_in_range, cut if truncate_draft_logits else None
            )
            q_draft = torch.where(draft_one_hot, 1.0, q_draft)  # q(x) = 1 for one-hot drafts
            # accept iff u * q(x) < p(x)  (Leviathan et al. 2022, alg. 1)
            u = _accept_uniforms(seed_keys, positions, slots)  # [B, K]
            sampled_accept = draft_valid & (u * q_draft < p_draft)
            if method != "token":
                # every other method reads whole rows: p_i [B, K, V] as the token rule reads it, and q_i
                rows = _MethodRows(target, is_probs, row_max, cut, draft_logits, draft_probs, inv_temperature,
                                   drafts, draft_valid, truncate_draft_logits)
            if method in ("typical", "relaxed"):
                sampled_accept = _lossy_accept(method, rows.p, drafts_in_range, draft_valid, sampled_accept)
            accept = torch.where(greedy_row[:, None], accept, sampled_accept)
        alive = accept & row_valid & in_request

    # A = length of the accepted prefix; the terminal row A emits (the rejected slot, or the bonus row)
    num_accepted = alive.to(torch.int32).cumprod(dim=1).sum(dim=1, dtype=torch.int32)  # [B]
    block_weights = None
    if mode == "probabilistic" and method == "block" and num_spec > 0:
        # block verification (Sun et al. 2024, alg. 2): A is chosen over the whole block
        block_count, block_weights = _block_count(rows, p_draft, q_draft, draft_valid, u, num_draft_tokens)
        num_accepted = torch.where(greedy_row, num_accepted, block_count)
    terminal = num_accepted.to(torch.int64)  # [B]
    batch_index = torch.arange(batch, device=device)
    if is_probs:
        terminal_row = _clean_probs(target_probs[batch_index, terminal])  # [B, V]
    else:
        terminal_row = _clean(target_logits[batch_index, terminal], inv_temperature)  # [B, V]
    terminal_max, token = _ranked(terminal_row, is_probs).max(dim=-1)  # greedy rows: the argmax, ties to the lowest id
    terminal_valid = (terminal_max > _NEG_INF) & ~invalid_request

    if mode != "greedy":
        # p: the probabilities as given (a race needs no normaliser), or the softmax of the logits
        weights = terminal_row if is_probs else _softmax(terminal_row, terminal_max)
        if cut is not None:  # p': the kept masses over their sum
            weights = torch.where(cut.on[:, None], cut.probs(terminal_row, is_probs), weights)
        rejected = terminal < num_draft_tokens.to(torch.int64)
        # typical acceptance samples a rejected row's own token (the SAMPLE race over p), as the synthetic mode
        residual = rejected if mode == "probabilistic" and method != "typical" else torch.zeros_like(rejected)
        if mode == "probabilistic" and num_spec > 0:
            if block_weights is None:
                left = _residual(weights, draft_logits, draft_probs, inv_temperature, drafts, terminal, vocab,
                                 cut if truncate_draft_logits else None)
            else:
                left = _block_residual(weights, rows.q, block_weights, terminal)
            weights = torch.where(residual[:, None], left, weights)
        # residual race at pos + t after a probabilistic rejection; the SAMPLE race otherwise
        terminal_positions = positions + terminal
        keys = torch.where(
            residual,
            rng.stream_key(seed_keys, terminal_positions, rng.RESIDUAL),
            rng.stream_key(seed_keys, terminal_positions, rng.SAMPLE),
        )
        token = torch.where(greedy_row, token, _race(weights, keys))

    output = torch.where(slots[None, :] < terminal[:, None], drafts, -1)  # [B, K]
    output = torch.cat([output, torch.full((batch, 1), -1, dtype=torch.int64, device=device)], dim=1)
    output.scatter_(1, terminal[:, None], torch.where(terminal_valid, token, -1)[:, None])
    num_emitted = num_accepted + terminal_valid.to(torch.int32)
    log_probs = None
    if logprobs is not None:
        log_probs = _logprobs(logprobs, target_rows, is_probs, inv_temperature, cut, output, num_emitted)
    return VerifyResult(output_token_ids=output, num_emitted=num_emitted, num_accepted=num_accepted,
                        logprobs=log_probs)


class _MethodRows:
    """Whole rows for the methods beyond ``token``: ``p`` ``[B, K, V]`` the draft rows' target as the token
    rule reads it (softmax; probabilities as given; ``p'`` for the requests cut) and ``q`` ``[B, K, V]``
    the draft distribution (``q'`` where cut; one-hot at the draft for one-hot drafts and invalid
    draft-logit rows; zeros where the draft id is not valid)."""

    def __init__(self, target, is_probs, row_max, cut, draft_logits, draft_probs, inv_temperature, drafts,
                 draft_valid, truncate_draft_logits):
        vocab = target.shape[-1]
        self.p = target if is_probs else _softmax(target, row_max)
        if cut is not None:
            self.p = torch.where(cut.on[:, None, None], cut.probs(target, is_probs), self.p)
        one_hot = torch.nn.functional.one_hot(drafts.clamp(0, vocab - 1), vocab).to(torch.float32)
        if draft_probs is not None:
            q = _clean_probs(draft_probs)
        elif draft_logits is not None:
            cleaned = _clean(draft_logits, inv_temperature[:, None])  # [B, K, V]
            q_max = cleaned.amax(dim=-1)
            q = _softmax(cleaned, q_max)
            if cut is not None and truncate_draft_logits:
                q = torch.where(cut.on[:, None, None], cut.probs(cleaned, False), q)
            q = torch.where((q_max > _NEG_INF)[..., None], q, one_hot)
        else:
            q = one_hot
        self.q = torch.where(draft_valid[..., None], q, 0.0)


def _row_entropy(p: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    # P = p / sum p (the row as a law) [.., V] and its entropy H [..] in nats (0 log 0 = 0)
    law = p / p.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(torch.float32).tiny)
    entropy = -torch.where(law > 0, law * torch.log(law), 0.0).sum(dim=-1)
    return law, entropy


def _lossy_accept(method: str, p: torch.Tensor, drafts_in_range: torch.Tensor, draft_valid: torch.Tensor,
                  token_accept: torch.Tensor) -> torch.Tensor:
    # [B, K]: typical: P(x) > min(eps, delta * exp(-H)) (Medusa); relaxed: the token test, or H >= gate
    # and log P(top) - log P(x) <= margin (FLy's entropy gate and margin)
    law, entropy = _row_entropy(p)
    law_draft = law.gather(2, drafts_in_range[..., None])[..., 0]
    if method == "typical":
        threshold = torch.clamp(methods.TYPICAL_DELTA * torch.exp(-entropy), max=methods.TYPICAL_EPSILON)
        return draft_valid & (law_draft > threshold)
    margin = torch.log(law.amax(dim=-1)) - torch.log(law_draft)
    loose = draft_valid & (law_draft > 0) & (entropy >= methods.RELAXED_MIN_ENTROPY) & \
        (margin <= methods.RELAXED_MARGIN)
    return token_accept | loose


def _block_count(rows: _MethodRows, p_draft: torch.Tensor, q_draft: torch.Tensor, draft_valid: torch.Tensor,
                 u: torch.Tensor, num_draft_tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    # A [B] int32 and the weights w [B, K + 1] (verification.py, "block"): w_{i+1} = min(1, w_i p_i(x_i) / q_i(x_i));
    # stop test i < n: u_{i-1} < h_i = min(r_i / (r_i + 1 - w_i), w_i), r_i = sum max(w_i p_i - q_i, 0) (the clamp
    # lets a kernel fail test i unread when u_{i-1} >= w_i); test n: u q < w p
    batch, num_spec = p_draft.shape
    p_x = torch.where(draft_valid & (p_draft > 0), p_draft, 0.0)  # NaN (an invalid row) and invalid ids: 0
    q_x = torch.where(draft_valid, q_draft, 0.0)
    weights = [torch.ones(batch, dtype=torch.float32, device=p_draft.device)]
    for i in range(num_spec):
        mass = weights[-1] * p_x[:, i]
        weights.append(torch.where(mass > 0, torch.where(mass >= q_x[:, i], 1.0, mass / q_x[:, i]), 0.0))
    w = torch.stack(weights, dim=1)  # [B, K + 1]
    residual_mass = (w[:, :num_spec, None] * rows.p - rows.q).clamp_min(0.0).sum(dim=-1)  # r_i [B, K]
    ratio = residual_mass / (residual_mass + 1.0 - w[:, :num_spec])
    stop = torch.where(residual_mass > 0, torch.minimum(ratio, w[:, :num_spec]), 0.0)  # h_i
    n = num_draft_tokens.to(torch.int64)[:, None]
    length = torch.arange(1, num_spec + 1, device=p_draft.device)[None, :]  # i = 1..K, tested with u_{i-1}
    # test i < n reads h_i (row i, column i of `stop`); test n is the token rule's test on w_{n-1} p(x)
    inner = u < torch.cat([stop[:, 1:], torch.zeros_like(stop[:, :1])], dim=1)
    last = u * q_x < w[:, :num_spec] * p_x
    passed = torch.where(length < n, inner, (length == n) & last)
    count = torch.where(passed, length, 0).amax(dim=1).to(torch.int32)
    return count, w


def _block_residual(p: torch.Tensor, q: torch.Tensor, weights: torch.Tensor, terminal: torch.Tensor) -> torch.Tensor:
    # max(w_A p_A - q_A, 0) [B, V] at each request's terminal row A (p itself when nothing is left)
    batch_index = torch.arange(p.shape[0], device=p.device)
    slot = terminal.clamp(max=q.shape[1] - 1)
    left = (weights[batch_index, terminal][:, None] * p - q[batch_index, slot]).clamp_min(0.0)
    return torch.where((left > 0).any(dim=-1, keepdim=True), left, p)


def _draft_prob_at_draft(
    draft_logits: torch.Tensor | None,
    draft_probs: torch.Tensor | None,
    inv_temperature: torch.Tensor,
    drafts_in_range: torch.Tensor,
    cut: _Cut | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    # q(x) [B, K] float32 and whether each slot's draft is one-hot [B, K] bool; q'(x) for the requests
    # `cut` truncates when it is given (draft logits only: draft probabilities are taken as given)
    batch, num_spec = drafts_in_range.shape
    if draft_probs is not None:
        q_draft = draft_probs.gather(2, drafts_in_range[..., None])[..., 0].to(torch.float32)
        return _clean_probs(q_draft), torch.zeros_like(drafts_in_range, dtype=torch.bool)
    if draft_logits is None:
        ones = torch.ones(batch, num_spec, dtype=torch.float32, device=drafts_in_range.device)
        return ones, torch.ones_like(drafts_in_range, dtype=torch.bool)
    draft = _clean(draft_logits, inv_temperature[:, None])  # [B, K, V]
    draft_max = draft.amax(dim=-1)  # [B, K]
    draft_invalid = ~(draft_max > _NEG_INF)  # no finite draft logit: the draft counts as one-hot
    shift = torch.where(draft_invalid, 0.0, draft_max)[..., None]
    draft_sum = torch.exp(draft - shift).sum(dim=-1)
    q_draft = torch.exp(draft.gather(2, drafts_in_range[..., None]) - shift)[..., 0] / draft_sum.clamp_min(
        torch.finfo(torch.float32).tiny
    )
    if cut is not None:
        q_draft = torch.where(cut.on[:, None], cut.probs_at(draft, drafts_in_range, False), q_draft)
    return q_draft, draft_invalid


def _residual(
    p: torch.Tensor,
    draft_logits: torch.Tensor | None,
    draft_probs: torch.Tensor | None,
    inv_temperature: torch.Tensor,
    drafts: torch.Tensor,
    terminal: torch.Tensor,
    vocab: int,
    cut: _Cut | None,
) -> torch.Tensor:
    # w = max(p - q, 0) at each request's terminal slot [B, V]; q one-hot at x for one-hot drafts,
    # q = 0 (so w = p) for an id outside [0, V), and w = p when nothing is left; q' for draft logits
    # of the requests `cut` truncates
    batch = p.shape[0]
    batch_index = torch.arange(batch, device=p.device)
    slot = terminal.clamp(max=drafts.shape[1] - 1)  # rows past the drafts are never residual rows
    draft = drafts[batch_index, slot]  # [B]
    draft_valid = (draft >= 0) & (draft < vocab)
    one_hot = torch.nn.functional.one_hot(draft.clamp(0, vocab - 1), vocab).to(torch.float32)
    if draft_probs is not None:
        q = _clean_probs(draft_probs[batch_index, slot])
    elif draft_logits is not None:
        cleaned = _clean(draft_logits[batch_index, slot], inv_temperature)  # [B, V]
        row_max = cleaned.amax(dim=-1)
        q = _softmax(cleaned, row_max)
        if cut is not None:
            q = torch.where(cut.on[:, None], cut.probs(cleaned, False), q)
        q = torch.where((row_max > _NEG_INF)[:, None], q, one_hot)
    else:
        q = one_hot
    q = torch.where(draft_valid[:, None], q, 0.0)
    w = (p - q).clamp_min(0.0)
    return torch.where((w > 0).any(dim=-1, keepdim=True), w, p)


def _logprobs(
    kind: str,
    target_rows: torch.Tensor,
    is_probs: bool,
    inv_temperature: torch.Tensor,
    cut: _Cut | None,
    output: torch.Tensor,
    num_emitted: torch.Tensor,
) -> torch.Tensor:
    # [B, K + 1] float32: log p(y) of each emitted token y under its row, NaN past the last one.
    # "processed": the distribution sampled (tempered, p' for the requests cut; greedy rows have
    # 1/T = 1 and are never cut); "raw": the row untempered and uncut. Probabilities: the row over its sum.
    num_rows, vocab = target_rows.shape[1:]
    tokens = output.clamp(0, vocab - 1)[..., None]  # [B, K + 1, 1]
    if is_probs:
        values = _clean_probs(target_rows)
        log_mass = torch.log(values.gather(2, tokens)[..., 0])
        log_total = torch.log(values.sum(dim=-1))
    else:
        scale = inv_temperature if kind == "processed" else torch.ones_like(inv_temperature)
        values = _clean(target_rows, scale[:, None])
        row_max = values.amax(dim=-1, keepdim=True)
        shifted = values - torch.where(row_max > _NEG_INF, row_max, 0.0)
        log_mass = shifted.gather(2, tokens)[..., 0]  # z_y - m
        log_total = torch.log(torch.exp(shifted).sum(dim=-1))
    result = log_mass - log_total
    if kind == "processed" and cut is not None:
        mask = cut.mask(values, is_probs)
        _, kept_total = truncation.truncated_masses(values, mask, is_probs)
        cut_result = torch.where(mask.gather(2, tokens)[..., 0], log_mass - torch.log(kept_total), _NEG_INF)
        result = torch.where(cut.on[:, None], cut_result, result)
    slots = torch.arange(num_rows, device=output.device)
    return torch.where(slots[None, :] < num_emitted[:, None], result, float("nan"))
