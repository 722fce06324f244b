"""Negative controls: samplers with known bugs, shipped so ``specbench verify`` is seen to catch them.

Each is the textbook chain sampler (vectorized torch, its own ``torch.Generator`` seeded from the
batch's seeds) with one rule changed, after a bug found in a serving engine:

- ``control-onehot-acceptance`` accepts as if the draft were one-hot, ``u < p(x)``, while the
  drafts come from ``q`` (vLLM PR #40269). On rejection it samples ``p`` without the draft (the
  one-hot residual), so every emitted token still follows ``p``: only the accepted-count law shows
  the bug, as acceptance ``sum_x q(x) p(x)`` where ``sum_x min(p(x), q(x))`` is due.
- ``control-bf16-draft`` rounds the draft logits to bfloat16 before its softmax (vLLM PR #37639):
  the ``q`` it tests against is not the ``q`` the drafts came from, which shifts acceptance and the
  emitted law by an amount that grows with the logits' magnitude.
- ``control-residual-from-p`` samples the rejection's replacement from ``p`` instead of
  ``norm(max(p - q, 0))``: the emitted tokens lean towards the drafts.
- ``control-untempered-draft`` takes target probabilities (already tempered) and draft logits, and
  forgets that the draft logits still need the request's temperature: it tests against
  ``softmax(draft_logits)`` while the drafts came from ``softmax(draft_logits / T)``. Exact at
  ``T = 1`` only.

Truncation controls (they declare ``truncation=True``; each cuts the target with
``specbench.truncation.kept_mask`` and breaks one rule of the truncation contract):

- ``control-untruncated-draft`` takes draft logits and tests against their untruncated softmax
  ``q`` while the drafter sampled them cut by the request's knobs (``q'``): the mismatched-draft bug.
- ``control-boundary-ties`` keeps every token tied with the last kept one, where the contract keeps
  exactly ``top_k`` tokens and cuts a ``top_p`` prefix between ties by id.
- ``control-untruncated-acceptance`` renormalises the target for the residual and the bonus token
  but tests acceptance against the untruncated ``p``.
- ``control-large-batch-tail`` drops ``top_p`` when the batch has more than 64 rows, leaving every
  row its whole tail (vLLM's top-p at 0.95 did this to batches of more than 64 rows).

Block verification (``--method block``; both declare ``methods=("token", "block")``):

- ``control-block-token-residual`` runs block verification (``block_sample``) but samples the
  stopping row's replacement from the token rule's residual ``max(p - q, 0)`` where
  ``max(w_A p - q, 0)`` is due (the vllm-ascend port's bug, #7807 and #7839): the accepted counts
  are right, the emitted tokens are not.

Trees (``specbench verify --tree``; both declare ``trees=True`` and, on a chain, are the textbook sampler):

- ``control-tree-target-only`` tests every candidate as if it were one-hot, ``u R < r(x)``, and takes a
  rejected candidate's token out of the residual, while the candidates came from ``q``: SGLang's
  "target-only" tree rule used on sampled candidates.
- ``control-tree-no-renormalise`` forgets the residual's mass ``R`` after a rejected sibling: it tests
  the next one by ``u q(x) < r(x)`` and subtracts ``q`` itself, where ``u q(x) R < r(x)`` and ``r - R q`` are due.

``textbook`` is the same code with no rule changed: the positive control, which passes; it follows
the truncation contract too, block verification under ``--method block``, and the tree rules
(``tree_sample``) under ``--tree``.
"""

from __future__ import annotations

import torch

from specbench.implementations.contract import Implementation, sampler
from specbench.verification import VerifyResult


def _generator(seeds: torch.Tensor) -> torch.Generator:
    # one stream per call, from the whole batch's seeds (a host read: these are test samplers)
    mixed = int((seeds.to(torch.int64).cpu() * 0x9E3779B1).sum()) & ((1 << 63) - 1)
    return torch.Generator(device=seeds.device).manual_seed(mixed)


def chain_sample(target_probs: torch.Tensor, draft_probs: torch.Tensor, draft_token_ids: torch.Tensor,
                 num_draft_tokens: torch.Tensor, seeds: torch.Tensor, *, accept: str = "ratio",
                 residual: str = "difference", accept_probs: torch.Tensor | None = None) -> VerifyResult:
    """The chain sampler, vectorized: ``accept`` is ``"ratio"`` (``u * q(x) < p(x)``) or ``"one-hot"``
    (``u < p(x)``); ``residual`` is ``"difference"`` (``max(p - q, 0)``), ``"without-draft"`` (``p``
    with ``x`` removed) or ``"target"`` (``p``). ``accept_probs``: the ``p`` the acceptance test reads,
    when another than ``target_probs`` (a bug). Shapes as ``specbench.verify``; probabilities float."""
    batch, num_rows, vocab = target_probs.shape
    num_spec = num_rows - 1
    device = target_probs.device
    generator = _generator(seeds)
    p, q = target_probs.to(torch.float32), draft_probs.to(torch.float32)
    tested = p if accept_probs is None else accept_probs.to(torch.float32)
    drafts = draft_token_ids.to(torch.int64)
    valid = (drafts >= 0) & (drafts < vocab)
    x = drafts.clamp(0, vocab - 1)[..., None]
    p_x, q_x = tested[:, :num_spec].gather(2, x)[..., 0], q.gather(2, x)[..., 0]  # [B, K]
    u = torch.rand(batch, num_spec, generator=generator, device=device)
    passed = u * q_x < p_x if accept == "ratio" else u < p_x
    slots = torch.arange(num_spec, device=device)
    alive = passed & valid & (slots[None, :] < num_draft_tokens[:, None])
    num_accepted = alive.to(torch.int32).cumprod(dim=1).sum(dim=1, dtype=torch.int32)
    terminal = num_accepted.to(torch.int64)
    rows = torch.arange(batch, device=device)
    weights = p[rows, terminal]  # [B, V]: the bonus row's p, or the rejected row's
    rejected = terminal < num_draft_tokens.to(torch.int64)
    if num_spec > 0:
        slot = terminal.clamp(max=num_spec - 1)
        draft = drafts[rows, slot]
        if residual == "difference":
            left = (weights - q[rows, slot]).clamp_min(0.0)
        elif residual == "without-draft":
            left = weights.scatter(1, x[rows, slot], 0.0)
        else:
            left = weights
        left = torch.where(left.sum(dim=1, keepdim=True) > 0, left, weights)
        use = (rejected & (draft >= 0) & (draft < vocab))[:, None]
        weights = torch.where(use, left, weights)
    token = torch.multinomial(weights, 1, generator=generator)[:, 0]
    output = torch.where(slots[None, :] < terminal[:, None], drafts, -1)
    output = torch.cat([output, torch.full((batch, 1), -1, dtype=torch.int64, device=device)], dim=1)
    output.scatter_(1, terminal[:, None], token[:, None])
    return VerifyResult(output, num_accepted + 1, num_accepted)


def tree_sample(target_probs: torch.Tensor, draft_probs: torch.Tensor, draft_token_ids: torch.Tensor,
                num_draft_tokens: torch.Tensor, tree_parents: torch.Tensor, tree_candidates: str, seeds: torch.Tensor,
                *, rule: str = "exact") -> VerifyResult:
    """The tree rule (``specbench/verification.py``, "Trees"), vectorized, with its own generator: nodes are
    visited in index order, and a node is tested when its parent is where the walk stands (children come
    after their parent and siblings in rank order, so one pass suffices). ``rule``: ``"exact"``,
    ``"target-only"`` (candidates tested as one-hot: a bug when they came from ``q``) or
    ``"no-renormalise"`` (``R`` forgotten after a rejected sibling: a bug)."""
    batch, num_rows, vocab = target_probs.shape
    num_nodes = num_rows - 1
    device = target_probs.device
    generator = _generator(seeds)
    p, q = target_probs.to(torch.float32), draft_probs.to(torch.float32)
    drafts, parents = draft_token_ids.to(torch.int64), tree_parents.to(torch.int64)
    in_tree = torch.arange(num_nodes, device=device)[None, :] < num_draft_tokens[:, None]
    valid = (drafts >= 0) & (drafts < vocab) & in_tree
    x_all = drafts.clamp(0, vocab - 1)
    u = torch.rand(batch, num_nodes, generator=generator, device=device)
    rows = torch.arange(batch, device=device)
    place = torch.zeros(batch, dtype=torch.int64, device=device)  # 0 the root, j + 1 node j
    r, mass = p[:, 0].clone(), torch.ones(batch, device=device)
    taken = torch.zeros(batch, vocab, dtype=torch.bool, device=device)
    path = torch.full((batch, num_nodes), -1, dtype=torch.int64, device=device)
    length = torch.zeros(batch, dtype=torch.int64, device=device)
    for j in range(num_nodes):
        tested = in_tree[:, j] & (parents[:, j] + 1 == place)
        x = x_all[:, j]
        law = q[:, j]
        if tree_candidates == "without_replacement":  # q without the elder siblings' tokens, renormalised
            left = 1.0 - torch.where(taken, law, 0.0).sum(dim=1, keepdim=True)
            law = torch.where(taken | (left <= 0), 0.0, law / left.clamp_min(1e-30))
        if rule == "target-only":
            law = torch.nn.functional.one_hot(x, vocab).to(torch.float32)
        scale = torch.ones_like(mass) if rule == "no-renormalise" else mass
        q_x, r_x = law[rows, x], r[rows, x]
        accept = tested & valid[:, j] & (u[:, j] * q_x * scale < r_x)
        reject = (tested & valid[:, j] & ~accept)[:, None]
        r = torch.where(reject, (r - scale[:, None] * law).clamp_min(0.0), r)
        mass = torch.where(reject[:, 0], r.sum(dim=1), mass)
        taken = taken | (reject & torch.nn.functional.one_hot(x, vocab).bool())
        path[rows, length.clamp(max=num_nodes - 1)] = torch.where(accept, j, path[rows, length.clamp(max=num_nodes - 1)])
        length = length + accept.to(torch.int64)
        place = torch.where(accept, j + 1, place)
        r = torch.where(accept[:, None], p[:, j + 1], r)
        mass = torch.where(accept, 1.0, mass)
        taken = taken & ~accept[:, None]
    has_children = (in_tree & (parents + 1 == place[:, None])).any(dim=1, keepdim=True)
    here = p[rows, place]
    weights = torch.where(has_children & (r.sum(dim=1, keepdim=True) > 0), r, here)
    token = torch.multinomial(weights, 1, generator=generator)[:, 0]
    output = torch.full((batch, num_rows), -1, dtype=torch.int64, device=device)
    output[:, :num_nodes] = torch.where(path >= 0, drafts.gather(1, path.clamp(min=0)), -1)
    output.scatter_(1, length[:, None], token[:, None])
    accepted = length.to(torch.int32)
    return VerifyResult(output, accepted + 1, accepted, accepted_nodes=path.to(torch.int32))


def block_sample(target_probs: torch.Tensor, draft_probs: torch.Tensor, draft_token_ids: torch.Tensor,
                 num_draft_tokens: torch.Tensor, seeds: torch.Tensor, *, residual: str = "block") -> VerifyResult:
    """Block verification (Sun et al. 2024, alg. 2), vectorized, with its own generator: weights
    ``w_{i+1} = min(1, w_i p_i(x_i) / q_i(x_i))``, stopping probabilities
    ``h_i = min(r_i / (r_i + 1 - w_i), w_i)`` (``h_n = w_n``), ``A`` the last position whose test passes.
    ``residual``: ``"block"`` samples the stopping row from ``max(w_A p_A - q_A, 0)``, ``"token"`` from
    ``max(p_A - q_A, 0)`` (a bug)."""
    batch, num_rows, vocab = target_probs.shape
    num_spec = num_rows - 1
    device = target_probs.device
    generator = _generator(seeds)
    p, q = target_probs.to(torch.float32), draft_probs.to(torch.float32)
    drafts = draft_token_ids.to(torch.int64)
    valid = (drafts >= 0) & (drafts < vocab)
    x = drafts.clamp(0, vocab - 1)[..., None]
    q = torch.where(valid[..., None], q, 0.0)  # an invalid id was drawn from nothing
    p_x = torch.where(valid, p[:, :num_spec].gather(2, x)[..., 0], 0.0)
    q_x = q.gather(2, x)[..., 0]
    weights = [torch.ones(batch, device=device)]
    for i in range(num_spec):
        mass = weights[-1] * p_x[:, i]
        weights.append(torch.where(mass > 0, torch.where(mass >= q_x[:, i], 1.0, mass / q_x[:, i]), 0.0))
    w = torch.stack(weights, dim=1)  # [B, K + 1]
    left = (w[:, :num_spec, None] * p[:, :num_spec] - q).clamp_min(0.0).sum(-1)
    ratio = left / (left + 1.0 - w[:, :num_spec])
    stop = torch.where(left > 0, torch.minimum(ratio, w[:, :num_spec]), 0.0)  # h_i [B, K]
    stop = torch.cat([stop, torch.zeros(batch, 1, device=device)], dim=1)
    n = num_draft_tokens.to(torch.int64)
    stop[torch.arange(batch, device=device), n] = w[torch.arange(batch, device=device), n]  # h_n = w_n
    u = torch.rand(batch, num_spec, generator=generator, device=device)
    length = torch.arange(1, num_spec + 1, device=device)[None, :]
    passed = (length <= n[:, None]) & (u < stop[:, 1:])
    num_accepted = torch.where(passed, length, 0).amax(dim=1).to(torch.int32) if num_spec else \
        torch.zeros(batch, dtype=torch.int32, device=device)
    terminal = num_accepted.to(torch.int64)
    rows = torch.arange(batch, device=device)
    target = p[rows, terminal]
    weights_here = w[rows, terminal][:, None] if residual == "block" else 1.0
    slot = terminal.clamp(max=max(num_spec - 1, 0))
    draft_row = q[rows, slot] if num_spec else torch.zeros_like(target)
    left = (weights_here * target - draft_row).clamp_min(0.0)
    left = torch.where(left.sum(dim=1, keepdim=True) > 0, left, target)
    weights_out = torch.where((terminal < n)[:, None], left, target)
    token = torch.multinomial(weights_out, 1, generator=generator)[:, 0]
    slots = torch.arange(num_spec, device=device)
    output = torch.where(slots[None, :] < terminal[:, None], drafts, -1)
    output = torch.cat([output, torch.full((batch, 1), -1, dtype=torch.int64, device=device)], dim=1)
    output.scatter_(1, terminal[:, None], token[:, None])
    return VerifyResult(output, num_accepted + 1, num_accepted)


def truncate(probs: torch.Tensor, temperatures: torch.Tensor, top_k: torch.Tensor | None,
             top_p: torch.Tensor | None, min_p: torch.Tensor | None, *, keep_ties: bool = False) -> torch.Tensor:
    """``p'`` ``[B, R, V]`` of probabilities ``[B, R, V]``: each request's knobs (``[B]`` or None) cut its
    rows by ``specbench.truncation.kept_mask`` and the kept entries are renormalised. Requests with every
    knob off and greedy requests (temperature 0) keep their rows as given. ``keep_ties``: also keep
    every token whose value equals the last kept one (a bug: the contract splits ties by id)."""
    if top_k is None and top_p is None and min_p is None:
        return probs
    from specbench import truncation  # imported when a knob is given: the untruncated controls never need it

    batch, num_rows, vocab = probs.shape
    device = probs.device
    knobs = [torch.full((batch,), off, dtype=dtype, device=device) if knob is None else knob.to(dtype)
             for knob, off, dtype in ((top_k, 0, torch.int32), (top_p, 1.0, torch.float32),
                                      (min_p, 0.0, torch.float32))]
    off = (((knobs[0] <= 0) | (knobs[0] >= vocab)) & ~(knobs[1] < 1) & ~(knobs[2] > 0)) | (temperatures == 0)
    values = torch.where(probs > 0, probs.to(torch.float32).clamp(max=1.0), 0.0)
    rows = values.reshape(batch * num_rows, vocab)
    kept = truncation.kept_mask(rows, *(knob.repeat_interleave(num_rows) for knob in knobs), is_probs=True)
    if keep_ties:
        last = torch.where(kept, rows, float("inf")).amin(dim=-1, keepdim=True)
        kept = kept | ((rows == last) & (rows > 0))
    cut = torch.where(kept, rows, 0.0).reshape(batch, num_rows, vocab)
    cut = cut / cut.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(torch.float32).tiny)
    return torch.where(off[:, None, None], probs, cut.to(probs.dtype))


def untruncated_draft_probs(draft_logits: torch.Tensor, temperatures: torch.Tensor) -> torch.Tensor:
    """``q = softmax(draft_logits / T)`` ``[B, K, V]`` (T 0 read as 1), NaN as ``-inf``, never cut."""
    scale = torch.where(temperatures > 0, temperatures, 1.0)[:, None, None]
    return torch.softmax(torch.nan_to_num(draft_logits.to(torch.float32), nan=float("-inf")) / scale, dim=-1)


_FACTS = {"modes": ["probabilistic"], "target": "probs", "rng": "own", "seeded": True}
_TRUNCATING = {**_FACTS, "truncation": True}


_BLOCK = ("token", "block")


@sampler(name="textbook", description="the chain and tree samplers in plain torch, no rule changed (positive "
         "control)", draft="probs", methods=_BLOCK, trees=True, **_TRUNCATING)
def textbook(*, target_probs, draft_probs, draft_token_ids, num_draft_tokens, seeds, temperatures, top_k=None,
             top_p=None, min_p=None, method="token", tree_parents=None, tree_candidates="independent",
             **_) -> VerifyResult:
    if tree_parents is not None:
        return tree_sample(target_probs, draft_probs, draft_token_ids, num_draft_tokens, tree_parents,
                           tree_candidates, seeds)
    cut = truncate(target_probs, temperatures, top_k, top_p, min_p)
    if method == "block":
        return block_sample(cut, draft_probs, draft_token_ids, num_draft_tokens, seeds)
    return chain_sample(cut, draft_probs, draft_token_ids, num_draft_tokens, seeds)


@sampler(name="control-block-token-residual", description="block verification sampling the stopping row from "
         "max(p - q, 0), not max(w p - q, 0) (vllm-ascend #7807)", draft="probs", methods=_BLOCK, **_FACTS)
def block_token_residual(*, target_probs, draft_probs, draft_token_ids, num_draft_tokens, seeds, method="token",
                         **_) -> VerifyResult:
    if method == "block":
        return block_sample(target_probs, draft_probs, draft_token_ids, num_draft_tokens, seeds, residual="token")
    return chain_sample(target_probs, draft_probs, draft_token_ids, num_draft_tokens, seeds)


@sampler(name="control-onehot-acceptance", description="accepts by u < p(x) as if drafts were one-hot "
         "(vLLM PR #40269)", draft="probs", **_FACTS)
def onehot_acceptance(*, target_probs, draft_probs, draft_token_ids, num_draft_tokens, seeds, **_) -> VerifyResult:
    return chain_sample(target_probs, draft_probs, draft_token_ids, num_draft_tokens, seeds, accept="one-hot",
                        residual="without-draft")


@sampler(name="control-bf16-draft", description="rounds draft logits to bfloat16 before the softmax "
         "(vLLM PR #37639)", draft="logits", **_FACTS)
def bf16_draft(*, target_probs, draft_logits, draft_token_ids, num_draft_tokens, temperatures, seeds,
               **_) -> VerifyResult:
    scale = torch.where(temperatures > 0, temperatures, 1.0)[:, None, None]
    rounded = draft_logits.to(torch.bfloat16).to(torch.float32)
    draft_probs = torch.softmax(torch.nan_to_num(rounded, nan=float("-inf")) / scale, dim=-1)
    return chain_sample(target_probs, draft_probs, draft_token_ids, num_draft_tokens, seeds)


@sampler(name="control-residual-from-p", description="samples a rejection's replacement from p, not "
         "max(p - q, 0)", draft="probs", **_FACTS)
def residual_from_p(*, target_probs, draft_probs, draft_token_ids, num_draft_tokens, seeds, **_) -> VerifyResult:
    return chain_sample(target_probs, draft_probs, draft_token_ids, num_draft_tokens, seeds, residual="target")


@sampler(name="control-untempered-draft", description="with target probabilities, takes q = softmax(draft "
         "logits) without the temperature", draft="logits", **_FACTS)
def untempered_draft(*, target_probs, draft_logits, draft_token_ids, num_draft_tokens, seeds, **_) -> VerifyResult:
    draft_probs = torch.softmax(torch.nan_to_num(draft_logits.to(torch.float32), nan=float("-inf")), dim=-1)
    return chain_sample(target_probs, draft_probs, draft_token_ids, num_draft_tokens, seeds)


@sampler(name="control-untruncated-draft", description="tests against the untruncated draft softmax q while "
         "the drafts came from the truncated q'", draft="logits", **_TRUNCATING)
def untruncated_draft(*, target_probs, draft_logits, draft_token_ids, num_draft_tokens, seeds, temperatures,
                      top_k=None, top_p=None, min_p=None, **_) -> VerifyResult:
    cut = truncate(target_probs, temperatures, top_k, top_p, min_p)
    q = untruncated_draft_probs(draft_logits, temperatures)  # truncate_draft_logits ignored: the bug
    return chain_sample(cut, q, draft_token_ids, num_draft_tokens, seeds)


@sampler(name="control-boundary-ties", description="keeps every token tied at the top_k / top_p boundary",
         draft="probs", **_TRUNCATING)
def boundary_ties(*, target_probs, draft_probs, draft_token_ids, num_draft_tokens, seeds, temperatures,
                  top_k=None, top_p=None, min_p=None, **_) -> VerifyResult:
    cut = truncate(target_probs, temperatures, top_k, top_p, min_p, keep_ties=True)
    return chain_sample(cut, draft_probs, draft_token_ids, num_draft_tokens, seeds)


@sampler(name="control-untruncated-acceptance", description="renormalises the truncated target for the "
         "residual and the bonus, but tests acceptance against the untruncated p", draft="probs", **_TRUNCATING)
def untruncated_acceptance(*, target_probs, draft_probs, draft_token_ids, num_draft_tokens, seeds, temperatures,
                           top_k=None, top_p=None, min_p=None, **_) -> VerifyResult:
    cut = truncate(target_probs, temperatures, top_k, top_p, min_p)
    return chain_sample(cut, draft_probs, draft_token_ids, num_draft_tokens, seeds, accept_probs=target_probs)


LARGE_BATCH_ROWS = 64


@sampler(name="control-large-batch-tail", description="drops top_p when the batch has more than 64 rows "
         "(each row keeps its whole tail, as vLLM's top-p did)", draft="probs", **_TRUNCATING)
def large_batch_tail(*, target_probs, draft_probs, draft_token_ids, num_draft_tokens, seeds, temperatures,
                     top_k=None, top_p=None, min_p=None, **_) -> VerifyResult:
    if target_probs.shape[0] * target_probs.shape[1] > LARGE_BATCH_ROWS:
        top_p = None
    cut = truncate(target_probs, temperatures, top_k, top_p, min_p)
    return chain_sample(cut, draft_probs, draft_token_ids, num_draft_tokens, seeds)


def _tree_or_chain(rule: str, *, target_probs, draft_probs, draft_token_ids, num_draft_tokens, seeds,
                   tree_parents=None, tree_candidates="independent", **_) -> VerifyResult:
    # a tree control's call: its broken tree rule on a tree, the textbook chain sampler on a chain
    if tree_parents is None:
        return chain_sample(target_probs, draft_probs, draft_token_ids, num_draft_tokens, seeds)
    return tree_sample(target_probs, draft_probs, draft_token_ids, num_draft_tokens, tree_parents, tree_candidates,
                       seeds, rule=rule)


@sampler(name="control-tree-target-only", description="tests sampled tree candidates as if one-hot, u R < r(x) "
         "(SGLang's target-only rule on candidates drawn from q)", draft="probs", trees=True, **_FACTS)
def tree_target_only(**inputs) -> VerifyResult:
    return _tree_or_chain("target-only", **inputs)


@sampler(name="control-tree-no-renormalise", description="forgets the residual's mass R after a rejected sibling "
         "(tests u q(x) < r(x), subtracts q)", draft="probs", trees=True, **_FACTS)
def tree_no_renormalise(**inputs) -> VerifyResult:
    return _tree_or_chain("no-renormalise", **inputs)


CONTROLS: dict[str, Implementation] = {impl.name: impl for impl in
                                       (textbook, onehot_acceptance, bf16_draft, residual_from_p, untempered_draft,
                                        untruncated_draft, boundary_ties, untruncated_acceptance,
                                        large_batch_tail, block_token_residual, tree_target_only,
                                        tree_no_renormalise)}
