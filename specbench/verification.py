"""The one entry point for the verification step: ``verify(...)``, for all three modes.

Layout (padded, one row per draft slot plus the bonus row; ``B``, ``K``, ``V`` as in the README's "Notation" table):

- ``target_logits`` ``[B, K + 1, V]`` float32, bfloat16 or float16: row ``i < n_b`` is the target
  at draft slot ``i`` of request ``b``; row ``n_b`` (``n_b = num_draft_tokens[b]``) is its bonus
  row. Rows past ``n_b`` are never read. The last dimension must be contiguous.
- ``draft_token_ids`` ``[B, K]`` int32 or int64; ``-1`` (or any id outside ``[0, V)``) is a
  draft that is rejected without a test and without an out-of-bounds read.
- ``draft_logits`` or ``draft_probs`` ``[B, K, V]`` (at most one; neither means one-hot drafts).
  Draft logits mean one thing in every call: the drafter's logits before any temperature; ``q`` is
  their softmax after division by the request's temperature, whatever form the target takes
  (logits or probabilities). Draft probabilities are ``q`` itself, already tempered, read entry by
  entry as target probabilities are (below: NaN and negative entries count as 0, entries above 1 as
  1, nothing renormalised).
- ``target_probs`` ``[B, K + 1, V]`` (keyword) instead of ``target_logits``: exactly one of the two.
  Probabilities are read as given, entry by entry, and never renormalised: NaN and negative
  entries count as 0, entries above 1 (``+inf`` too) as 1. So the acceptance test reads two values
  per draft, ``p(x)`` and ``q(x)``, and a request reads a whole target row only at its terminal
  position (greedy rows excepted: their argmax needs every row). A row that sums to 1 (a float32
  softmax does, to about 1e-6) gives the exact law; a row that sums to ``c != 1`` is tested with
  its values as they are (acceptance ``min(1, p(x) / q(x))`` with the raw ``p(x)``), while a token
  drawn from it (residual or bonus) follows the row divided by its sum. A terminal row with no
  positive entry is *invalid*, as a row of ``-inf`` logits; a draft row with no mass rejects its
  draft (``p(x) = 0``) and is then the terminal row. They are taken as already tempered: the
  temperature is not applied to them again, but it still says greedy (0) or not, it still tempers
  the draft logits, and a negative or NaN one still makes the request invalid (below). Greedy is
  the argmax of the probabilities (ties to the lowest id). Every rule below then holds with the
  same random streams, so with ``target_probs = softmax(target_logits / T)`` the outputs equal the
  logits path's for every draft form, up to float rounding (a draw can differ only where two
  candidates tie to within a few ulp).

What each mode computes, exactly (every backend follows this to the bit, up to float rounding
of the probabilities):

- A request whose temperature is negative or NaN (possible only unchecked, ``check_values=False``)
  is *invalid*: it emits nothing (every slot ``-1``, ``num_emitted = num_accepted = 0``), in
  every mode and whatever form the target takes.
- Rows are cleaned first: logits are scaled by ``1 / temperature``, NaN becomes ``-inf`` and
  ``+inf`` the largest float32 (so several ``+inf`` tokens share the mass equally; the same holds
  for logits that overflow when a tiny temperature scales them: use 0 for greedy). A target row
  with no finite value left is *invalid*: when a request needs its values, the request stops
  there and emits nothing for that row (``num_emitted`` counts only the tokens before it). Rows
  whose values are not needed are never read: in the synthetic mode an accepted row is not
  looked at. An invalid draft-logit row makes that position's draft one-hot. NaN draft
  probabilities count as 0.
- Greedy row (``mode="greedy"``, or ``temperatures[b] == 0`` in the probabilistic mode): accept
  while the draft equals ``argmax p`` (ties to the lowest id, on the cleaned, unscaled logits);
  at the first mismatch emit the argmax. In the synthetic mode a ``temperatures[b] == 0`` row
  still accepts by the profile; only the token it emits is the argmax.
- Probabilistic row: ``u = U(seed, pos + i, ACCEPT)``; accept iff ``u * q(x) < p(x)`` with
  ``q(x) = 1`` for one-hot drafts. On rejection emit the residual sample
  ``argmax_y w(y) / E_y`` over ``w(y) > 0``, ``w = max(p - q, 0)`` (``p`` without ``x`` for
  one-hot drafts, ``p`` itself when ``x`` is not a valid id or ``w`` is all zero),
  ``E_y = -log U(seed, pos + i, RESIDUAL, y)``.
- Synthetic row: ``u = U(seed, pos + i, ACCEPT)``; accept iff ``u < c_i`` (``c`` the conditional
  rates of the profile) and ``x`` is a valid id; on rejection emit the target's own token at that
  row (argmax for a greedy row, otherwise the sample below with ``pos + i`` for ``pos + n_b``).
- Bonus (all ``n_b`` drafts accepted): argmax for a greedy row, otherwise
  ``argmax_y p(y) / E_y`` with ``E_y = -log U(seed, pos + n_b, SAMPLE, y)``.

``U`` is ``specbench.rng.uniform``; ``pos`` is ``positions[b]``. Results depend on nothing else:
not the batch size, nor a request's place in it, nor the backend's launch shape.

Truncation (``SamplingParams``: ``top_k``, ``top_p``, ``min_p`` per request) cuts the distribution a
non-greedy request samples from, at every position of the request (its draft rows and its bonus
row), exactly as the same request would be sampled without speculation:

- Knobs and their "off" values: ``top_k`` 0 (and any ``top_k >= V``), ``top_p`` 1, ``min_p`` 0. A
  request with every knob off is *untruncated*: every rule above holds unchanged, bit for bit.
  Checked values (``check_values``): ``top_k`` a whole number ``>= 0``, ``top_p`` in ``(0, 1]``,
  ``min_p`` in ``[0, 1]``. Unchecked: a negative ``top_k``, a NaN or ``>= 1`` ``top_p`` and a NaN or
  ``<= 0`` ``min_p`` are off; ``top_p <= 0`` and ``min_p > 1`` keep only the first token (below).
  Greedy rows (``temperatures[b] == 0``, or ``mode="greedy"``) ignore truncation: their argmax is
  always kept by every knob, so truncation could not change it.
- The order. A row's tokens are ranked by their value, largest first, ties to the lowest id: the
  value is the cleaned, tempered logit ``z = clean(logit / T)`` (float32, as above), or the cleaned
  target probability for ``target_probs``. Every knob keeps a prefix of this order, so what
  survives is always the first ``L`` tokens of the order for one ``L >= 1``: the first token (the
  argmax greedy would pick) always survives, and no two tokens of equal value are split except by
  ``top_k`` and ``top_p``, which cut between ties by id.
- The knobs, applied in this order (vLLM's), each to what the previous ones kept. Masses are the
  float32 ``w(y) = exp(z_y - m)`` with ``m`` the row's largest ``z`` (for probabilities, the
  cleaned ``p(y)`` itself): ``min_p`` keeps ``y`` iff ``w(y) >= min_p`` (for probabilities
  ``p(y) >= min_p * max p``); ``top_k`` keeps the first ``top_k`` tokens of the order (exactly
  ``top_k``: of tokens tied at the boundary, the lowest ids); ``top_p`` keeps the shortest prefix
  whose mass reaches ``top_p`` times the mass ``M`` of what ``min_p`` and ``top_k`` kept: token
  ``y`` survives iff the mass of the kept tokens before it in the order is ``< top_p * M``.
- Arithmetic. Masses are float32 sums in an order the backend chooses, so two backends can differ
  only on a token whose prefix mass lies within ``TOP_P_TOLERANCE`` (``1e-5``) times ``M`` of
  ``top_p * M``; everywhere else the kept set is this definition's exactly. The float64 oracle
  marks such tokens ambiguous (``specbench.oracle.truncation``), and ``specbench verify`` accepts
  either side for them.
- The truncated target ``p'`` is the kept tokens' masses over their sum ``S``: ``p'(y) = w(y) / S``
  for a kept ``y`` and 0 otherwise (for target probabilities: ``p(y) / S``, the kept probabilities
  renormalised, unlike an untruncated row, which is read as given).
- Drafts. The acceptance test must use the distribution the drafts were drawn from. Draft logits
  are truncated like the target by default (a drafter sampling with the request's parameters):
  ``q'`` is their softmax at ``T`` cut by the same knobs in the draft row's own order;
  ``truncate_draft_logits=False`` leaves them untruncated (``q`` as without truncation). Draft
  probabilities are taken as given (the drafter's own, already cut if it cut them); one-hot
  drafts need nothing.
- Every probabilistic and synthetic rule above then reads ``p'`` and ``q'`` for ``p`` and ``q``:
  accept iff ``u * q'(x) < p'(x)``; on rejection the residual race over ``max(p' - q', 0)``
  (``p'`` without ``x`` for a one-hot draft, ``p'`` when nothing is left); the bonus row and the
  synthetic mode's own token race over ``p'``. Same random streams, so ``top_k = 1`` emits the
  greedy tokens (``p'`` is the one-hot at the argmax) and every knob off emits today's tokens.
- NaN and infinite values are cleaned before the order (``NaN`` never survives: it has no mass);
  a row with no finite value is invalid before and after truncation.

Verification methods (``method=``; the registry is ``specbench/methods.py``). Every rule above is the
``token`` method, the default, unchanged bit for bit. A method changes only how a probabilistic
(sampled, temperature > 0) row decides its drafts and what a stopped request emits: greedy rows
(``mode="greedy"``, temperature 0) follow the greedy rule above whatever the method, and the synthetic
mode, whose profile decides acceptance, refuses any method but ``token``. Inputs, layout, cleaning,
invalid requests and rows, truncation (``p'``, ``q'`` read for ``p``, ``q``), ragged counts and
log-probabilities are as above. Below, for one request: ``n = n_b``; ``x_i`` the draft in slot ``i``;
``p_i`` its target row as the token rule reads it (softmax at ``T``; target probabilities as given;
``p'_i`` under truncation); ``q_i`` the draft row (``q'_i`` under truncation; the one-hot at ``x_i`` for
one-hot drafts and for an invalid draft-logit row; all zeros where ``x_i`` is not a valid id, and then
``p_i(x_i) = 0``); ``u_i = U(seed, pos + i, ACCEPT)``, the uniform the token rule tests draft ``i`` with.

- ``block`` (exact; Sun et al. 2024, "Block Verification Accelerates Speculative Decoding", arXiv
  2403.10444, algorithm 2). Weights along the block: ``w_0 = 1`` and, for ``i = 0..n-1``,
  ``w_{i+1} = min(1, w_i * p_i(x_i) / q_i(x_i))`` (0 when ``w_i * p_i(x_i) = 0``; 1 when
  ``q_i(x_i) = 0 < w_i * p_i(x_i)``). For ``0 < i < n`` the residual mass
  ``r_i = sum_y max(w_i * p_i(y) - q_i(y), 0)`` and the stopping probability
  ``h_i = min(r_i / (r_i + 1 - w_i), w_i)`` (0 when ``r_i = 0``); ``h_n = w_n``. The clamp leaves the
  paper's ratio as it is for rows that sum to at most 1 (there ``r_i <= w_i``, so the ratio is at most
  ``w_i``), and it lets an implementation fail test ``i`` without reading row ``i`` when ``u_{i-1} >= w_i``
  (SGLang 0.5.23's kernel skips those positions). Stop test ``i`` (``1 <= i <= n``) uses ``u_{i-1}``: it
  passes iff ``u_{i-1} < h_i`` for ``i < n``, and iff
  ``u_{n-1} * q_{n-1}(x_{n-1}) < w_{n-1} * p_{n-1}(x_{n-1})`` for ``i = n`` (``u < w_n``, written as the
  token rule's test). The accepted count ``A`` is the largest ``i`` whose test passes, 0 if none
  (the paper's backward pass: later positions override earlier ones). The request then emits at
  row ``A``: the bonus (the ``SAMPLE`` race over ``p_n``) when ``A = n``; otherwise the ``RESIDUAL``
  race at ``pos + A`` over ``max(w_A * p_A - q_A, 0)`` (``p_A`` when nothing is left). So ``n = 1`` and
  ``A = 0`` are the token rule bit for bit; the random streams are the token rule's, and a request's
  output depends on nothing but its own inputs, seed and position. With drafts drawn from ``q``
  the emitted tokens (continued by the target) follow the target's law, and ``E[A]`` is at least
  the token rule's (the paper's theorems 1 and 2; ``specbench.oracle`` computes both laws). Block
  reads every row ``p_i``, ``q_i`` up to ``n`` whole (the token rule reads two values there); ``r_i`` is
  not needed where ``u_{i-1} >= w_i``. An
  invalid target row ``j < n`` has ``p_j = 0``, so ``h_j = 0`` and no weight after it is positive: the
  request stops before it (or at row 0, emitting nothing, when ``j = 0``). Target probabilities
  are read as given here too (rows that sum to 1 give the exact law). One-hot drafts: the block law
  is then the token rule's (same accepted-count and token laws, other draws): a fixed draft can be
  accepted up to row ``i`` with probability at most ``prod_{j<i} p_j(x_j)``, which both reach.
  Greedy rows: the target is one-hot, so the weights are 1 along the prefix that matches the argmax
  and 0 after it, ``h_i`` is 1 on it: the same prefix and the same argmax as the greedy rule, which
  is what runs.
- ``typical`` (lossy; Medusa's typical acceptance, Cai et al. 2024, arXiv 2401.10774). With
  ``P_i = p_i / sum p_i`` the row as a law and ``H_i = -sum_y P_i(y) log P_i(y)`` its entropy in
  nats: accept draft ``i`` iff ``x_i`` is a valid id and ``P_i(x_i) > min(TYPICAL_EPSILON,
  TYPICAL_DELTA * exp(-H_i))`` (``methods.py``: Medusa's defaults 0.09 and 0.3); no random number,
  and ``q`` is never read. ``A`` is the accepted prefix; a rejected row emits its own token, the
  ``SAMPLE`` race at ``pos + A`` over ``p_A`` (as the synthetic mode does); the bonus as above.
- ``relaxed`` (lossy; in the spirit of FLy, Li et al. 2025, arXiv 2511.22972: its entropy gate and
  its log-probability margin, without the deferred window, which spans later steps): accept draft
  ``i`` iff the token test passes (``u_i * q_i(x_i) < p_i(x_i)``), or ``x_i`` is a valid id,
  ``H_i >= RELAXED_MIN_ENTROPY`` and ``log P_i(top) - log P_i(x_i) <= RELAXED_MARGIN`` (``top`` the
  argmax). Rejections emit the token rule's residual. It accepts every draft the token rule
  accepts, on the same seeds.

Lossy methods do not give the target's law: ``specbench verify --method`` checks an implementation
against the method's own law and reports the total-variation distance from the target's.

Log-probabilities (``logprobs=``): ``VerifyResult.logprobs`` ``[B, K + 1]`` float32 holds, for every
emitted token, its log-probability under the row it was emitted from, ``NaN`` past the last one:

- ``"processed"``: under the distribution the token follows, ``log p'(y)`` (tempered and
  truncated); for an untruncated request ``log p(y)`` (for target probabilities the row over its
  sum); for a greedy row the log-softmax of the cleaned logits (no temperature), or the row over
  its sum. vLLM calls this ``processed_logprobs``. A token that row gives no mass (a draft the
  synthetic mode accepts outside the kept set, say) has ``-inf``.
- ``"raw"``: under the target as given, ``log_softmax`` of the cleaned logits without temperature or
  truncation (for target probabilities: the row over its sum). vLLM's ``raw_logprobs``.

Trees (``tree=DraftTree(parents, candidates)``, ``specbench/trees.py``). A request's drafts form a tree:
``N`` nodes numbered ``0..N-1`` in topological order, ``parents[b, j]`` node ``j``'s parent or ``-1`` for
the root (the last accepted token). The *depth* of a node is 0 under the root and its parent's plus one
otherwise; the children of a node (or of the root) are the nodes ``j < n_b`` whose parent it is, tried
in increasing index order: child rank ``k = 0, 1, ...`` (absent children count in the ranks). A chain of
``K`` drafts is the tree ``[-1, 0, ..., K - 2]``. Layout:

- ``draft_token_ids`` ``[B, N]``: node tokens; ``-1`` (or any id outside ``[0, V)``) is an *absent* node,
  tried and rejected without a test as a chain's ``-1`` draft; nothing below it is ever reached.
- ``num_draft_tokens`` ``[B]``: request ``b``'s tree is its first ``n_b`` nodes; the rest is padding and
  never read, so trees of several sizes and shapes share one batch.
- ``target_logits`` / ``target_probs`` ``[B, N + 1, V]``: row 0 is the root's (the distribution of the
  token after the accepted prefix), row ``j + 1`` the distribution after node ``j`` (its children's
  test row, or its bonus row when it is a leaf). ``draft_logits`` / ``draft_probs`` ``[B, N, V]``: row
  ``j`` is the distribution node ``j``'s token was drawn from (siblings drawn from one distribution
  repeat it); neither means one-hot (deterministic) candidates.
- Checked on the CPU (``check_values``): a parent outside ``[-1, j)`` for a node ``j < n_b`` is a usage
  error. Unchecked, such a node belongs to no parent and is never reached.
- Result: ``output_token_ids`` ``[B, N + 1]`` holds the accepted path's tokens then the final token
  (``-1`` padded), ``num_accepted`` the path's length, ``num_emitted`` as for chains, and
  ``accepted_nodes`` ``[B, N]`` int32 the path's node indices in order, ``-1`` padded.

The walk. Start at the root. At the current node ``v`` of depth ``d`` (the root's depth is ``-1``) the
children ``c_0, c_1, ...`` are tested at position ``t = pos + d + 1``, against ``p = p_v``, the target
row of ``v`` (row 0 for the root, row ``v + 1`` otherwise) as the chain rules read it (cleaned, tempered;
probabilities as given). A row the walk needs that is invalid stops the request there, emitting
nothing for it, as for chains; an invalid request emits nothing at all.

- Greedy (``mode="greedy"``, or a request with temperature 0): ``g = argmax p`` (ties to the lowest id).
  Move to the lowest-rank child whose token is ``g``; when none is, emit ``g`` and stop. At a leaf emit
  ``g``, the bonus. (Siblings repeating a token are tried at the lowest rank only.)
- Probabilistic: SpecInfer's multi-candidate rule (Miao et al. 2024, arXiv 2305.09781; also Chen et al.'s
  multi-draft form). A residual ``r`` starts as ``p`` with mass ``R = 1``. For ``k = 0, 1, ...`` take child
  ``c_k``, its token ``x`` and its draft law ``q_k`` (``q_k(x)`` below; the one-hot at ``x`` for one-hot
  drafts); ``u_k = U(seed, t, ACCEPT, k)`` (index ``k``: rank 0 draws the chain's uniform). Accept iff
  ``x`` is a valid id and ``(u_k * q_k(x)) * R < r(x)``, in that order of products; then move to
  ``c_k`` and start over there with its own row. Otherwise, for a valid ``x``, ``r <- max(r - R * q_k, 0)``
  (a one-hot ``q_k`` takes ``x`` out of ``r``) and ``R <- sum r`` (float32); where the child's draft is
  one-hot (one-hot drafts, or a node whose draft-logit row is invalid) ``R <- R - r(x)`` instead (float32,
  ``r(x)`` the value its test read; no sum over the row). An absent child leaves ``r`` and ``R`` as they
  are. Next rank. A rejected one-hot child has ``R >= r(x)`` (``u_k < 1``), so it sets ``r(x)`` to 0 and
  ``R - r(x) >= 0``; on a row that sums to 1 the difference is the sum in exact arithmetic. On target
  probabilities given unnormalised it keeps ``R`` relative to 1, as the rank-0 test is (the sum would not:
  there a one-hot draft and a draft-probability row one-hot at ``x`` give different laws).
  At rank 0 ``r(x)`` is read as the chain reads ``p(x)``, and the test is the chain's ``u * q(x) < p(x)``.
  When every child is rejected, emit the ``RESIDUAL`` race at ``t``, ``argmax_y r(y) / E_y`` over
  ``r(y) > 0`` with ``E_y = -log U(seed, t, RESIDUAL, y)`` (over ``p`` when nothing is left). At a leaf
  emit the bonus, the ``SAMPLE`` race over ``p`` at ``t``. Dividing the residual by ``R`` is what
  renormalises the target after a rejected sibling (on rows that sum to 1): the test of ``c_k`` reads the
  residual law ``r / R``, and ``max(r / R - q_k, 0)`` is the next residual law up to its mass.
  - ``candidates="independent"`` (default): each child's token was drawn from its own row ``q_{c_k}``,
    independently of its siblings; ``q_k = q_{c_k}``. With one-hot drafts (deterministic candidates) a
    rejected child is removed from the target and the rest renormalised.
  - ``candidates="without_replacement"``: the children of a node were drawn one after another from one
    law without replacement (Gumbel-top-k, say, in draw order = rank order). ``q_k`` is node ``c_k``'s
    row with the tokens of its elder siblings ``c_0..c_{k-1}`` set to 0 and the rest divided by
    ``1 - (the row's mass on those tokens, each counted once; absent ones have none)`` (so ``q_0`` is the
    row as given, and ``q_k(x)`` is 0 when ``x`` repeats an elder sibling's token); when nothing is left,
    ``q_k`` is zero and the test reads ``0 < r(x)``. This is recursive rejection sampling without
    replacement (Jeon et al. 2024, "Recursive Speculative Decoding", arXiv 2402.14160).
  - Given drafts drawn as stated, every rule emits tokens that follow the target's law exactly
    (continued by the target after the step); ``specbench.oracle_tree`` computes the laws in float64.
- Synthetic: ``acceptance_rates`` is a table ``[D][W]`` of *conditional* rates (or one list of ``W``
  rates, the same at every depth): child rank ``k`` at depth ``d`` is accepted with probability
  ``a[d][k]`` given its parent was reached and its elder siblings rejected (Sequoia's positional
  model); ranks and depths past the table have rate 0. Accept iff ``x`` is valid and
  ``U(seed, t, ACCEPT, k) < a[d][k]``. When every child is rejected, and at a leaf, emit the target's
  own token at ``v``'s row: the argmax for a greedy request, else the ``SAMPLE`` race over ``p`` at ``t``.
  A chain's unconditional rates ``p_i`` are the table ``[[c_1], [c_2], ...]`` of its conditional rates.

A chain given as a tree emits the chain's tokens and counts bit for bit in every mode (rank 0 draws the
chain's uniforms; the races use the chain's streams at ``pos + depth``). Backends agree to the bit up to
float rounding (``R`` after a rejected sampled candidate is a float32 sum in an order each backend chooses;
after a one-hot one it is the difference above, the same bits wherever the ``R`` before it was).
Temperature, cleaning, draft rows (an invalid draft-logit row makes its node one-hot; NaN draft
probabilities count as 0) and invalid rows and requests are as for chains. Not for trees in this version
(refused, every backend): a truncation knob that is on for some request (knobs at their off values, ``top_k`` 0
or ``>= V``, ``top_p`` 1, ``min_p`` 0, are the untruncated call, as for chains; per-request knob tensors are read
on the host, so under CUDA-graph capture any given is refused), ``logprobs``, and a ``method`` other than
``token``.
"""

from __future__ import annotations

import functools
import importlib
import numbers
import os
from collections.abc import Callable, Sequence
from typing import Any, Literal, NamedTuple

import torch

from specbench import acceptance, methods, rng
from specbench.errors import SpecbenchError
from specbench.trees import DraftTree, check_tree

Mode = Literal["greedy", "probabilistic", "synthetic"]
Backend = Literal["auto", "triton", "torch"]
MODES: tuple[str, ...] = ("greedy", "probabilistic", "synthetic")
BACKENDS: tuple[str, ...] = ("auto", "triton", "torch")


class VerifyResult(NamedTuple):
    """What one verification step emits.

    - ``output_token_ids`` ``[B, K + 1]`` int64: the emitted tokens, ``-1`` in every slot past
      the last one emitted.
    - ``num_emitted`` ``[B]`` int32: tokens emitted (``num_accepted + 1`` unless an invalid row
      stopped the request).
    - ``num_accepted`` ``[B]`` int32: drafts accepted, ``0..num_draft_tokens[b]``.
    - ``logprobs`` ``[B, K + 1]`` float32 when ``verify(logprobs=...)`` asked for them (module
      docstring: each emitted token's log-probability, ``NaN`` past the last), else None.
    - ``accepted_nodes`` ``[B, N]`` int32 for a tree step: the accepted path's node indices in order,
      ``-1`` padded; None for a chain.
    """

    output_token_ids: torch.Tensor
    num_emitted: torch.Tensor
    num_accepted: torch.Tensor
    logprobs: torch.Tensor | None = None
    accepted_nodes: torch.Tensor | None = None

    def map(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> VerifyResult:
        """The same result with ``fn`` applied to every tensor it holds (a None field stays None)."""
        return self._make(None if tensor is None else fn(tensor) for tensor in self)


class SamplingParams(NamedTuple):
    """How each request samples: the per-request parameters of ``verify`` (module docstring).

    Each field is a ``[B]`` tensor on the target's device, a Python number for every request, or
    None for its default: ``temperatures`` float (default 1, or 0 in the greedy mode), ``top_k``
    integer (0 = off), ``top_p`` float (1 = off), ``min_p`` float (0 = off). With every knob None
    no truncation code runs at all.
    """

    temperatures: torch.Tensor | float | None = None
    top_k: torch.Tensor | int | None = None
    top_p: torch.Tensor | float | None = None
    min_p: torch.Tensor | float | None = None


LOGPROBS: tuple[str, ...] = ("processed", "raw")
# two backends' float32 masses may put a token whose top-p prefix mass lies this close (relative
# to the mass top_p is taken of) to the boundary on different sides (module docstring)
TOP_P_TOLERANCE = 1e-5


_FLOAT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def _check_tensor(name: str, tensor: torch.Tensor, shape: tuple[int, ...], dtypes: tuple, device) -> None:
    if not isinstance(tensor, torch.Tensor):
        raise SpecbenchError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
    if tuple(tensor.shape) != shape:
        raise SpecbenchError(f"{name} must have shape {list(shape)}, got {list(tensor.shape)}")
    if tensor.dtype not in dtypes:
        allowed = ", ".join(str(d).removeprefix("torch.") for d in dtypes)
        raise SpecbenchError(f"{name} must have dtype {allowed}, got {str(tensor.dtype).removeprefix('torch.')}")
    if tensor.device != device:
        raise SpecbenchError(f"{name} is on {tensor.device} but target_logits is on {device}")


@functools.lru_cache(maxsize=64)
def _conditional_rates_tensor(rates: tuple[float, ...], device: torch.device) -> torch.Tensor:
    # cached: a host-to-device copy per call would break CUDA-graph capture and cost a sync
    return torch.tensor(acceptance.conditional_rates(list(rates)), dtype=torch.float32, device=device)


def _rate_values(rates: Any) -> Any:
    # a tensor of rates is read as its list; anything else goes to acceptance.validate_rates as given
    return rates.tolist() if isinstance(rates, torch.Tensor) else rates


def _checked_rates(rates: Any, num_spec: int) -> list[float]:
    """``K`` unconditional rates for the synthetic mode; ``K = 0`` (only bonus rows) takes ``[]``."""
    rates = _rate_values(rates)
    if num_spec > 0:
        return acceptance.validate_rates(rates, num_spec)
    if isinstance(rates, Sequence) and not isinstance(rates, (str, bytes)) and len(rates) == 0:
        return []
    raise SpecbenchError(
        f"acceptance rates must have one entry per draft position (0: target_logits has only the bonus row), "
        f"got {rates!r}"
    )


def resolve_backend(backend: str, device: torch.device) -> str:
    """``auto`` is Triton on a GPU and torch on the CPU; ``triton`` on the CPU needs the interpreter."""
    if backend not in BACKENDS:
        raise SpecbenchError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if backend == "auto":
        return "triton" if device.type == "cuda" else "torch"
    if backend == "triton" and device.type != "cuda" and os.environ.get("TRITON_INTERPRET") != "1":
        raise SpecbenchError(
            f"the triton backend on {device.type} needs TRITON_INTERPRET=1 set before specbench is imported"
        )
    return backend


def backend_module(backend: str):
    """The module that implements a concrete backend: ``verify`` and ``simulate`` functions."""
    name = {"triton": "specbench.kernels.launch", "torch": "specbench.reference"}[backend]
    return importlib.import_module(name)


def verify(
    target_logits: torch.Tensor | None = None,
    draft_token_ids: torch.Tensor | None = None,
    *,
    target_probs: torch.Tensor | None = None,
    mode: Mode = "probabilistic",
    num_draft_tokens: torch.Tensor | None = None,
    draft_logits: torch.Tensor | None = None,
    draft_probs: torch.Tensor | None = None,
    sampling: SamplingParams | None = None,
    temperatures: torch.Tensor | None = None,
    seeds: torch.Tensor | None = None,
    positions: torch.Tensor | None = None,
    acceptance_rates: list[float] | None = None,
    truncate_draft_logits: bool = True,
    logprobs: str | None = None,
    method: str = "token",
    backend: Backend = "auto",
    check_values: bool | None = None,
    tree: DraftTree | None = None,
) -> VerifyResult:
    """Run one verification step of speculative decoding (see the module docstring for the rules).

    Args:
        target_logits: ``[B, K + 1, V]`` float32/bfloat16/float16, last dim contiguous.
        draft_token_ids: ``[B, K]`` int32/int64 (required; the second positional argument).
        target_probs: ``[B, K + 1, V]`` float32/bfloat16/float16, the target distribution itself
            (already tempered), instead of ``target_logits``: give exactly one of the two.
        draft_token_ids: ``[B, K]`` int32/int64; ``-1`` or out of range is a rejected draft.
        mode: ``"greedy"``, ``"probabilistic"`` (default) or ``"synthetic"``.
        num_draft_tokens: ``[B]`` integer in ``0..K``; default ``K`` for every request.
        draft_logits: ``[B, K, V]`` float, the draft model's logits before its temperature
            (probabilistic mode): ``q = softmax(draft_logits / T)`` whatever the target's form.
        draft_probs: ``[B, K, V]`` float, the draft distribution itself (probabilistic mode).
        sampling: ``SamplingParams``: each request's temperature and truncation (``top_k``,
            ``top_p``, ``min_p``; module docstring). Default: temperature 1 (0 in the greedy
            mode), no truncation.
        temperatures: ``[B]`` float, ``>= 0``, the same as ``sampling=SamplingParams(temperatures)``
            (give one of the two); 0 makes a greedy row; default 1. It tempers target and draft
            logits; target and draft probabilities are taken as already tempered.
        seeds: ``[B]`` int64 request seeds; required unless ``mode="greedy"``.
        positions: ``[B]`` integer, sequence position of each request's first draft slot; default 0.
        acceptance_rates: ``K`` unconditional rates, required for ``mode="synthetic"``.
        truncate_draft_logits: draft logits are cut by the request's truncation like the target
            (default), or, False, taken whole (a drafter that samples untruncated).
        logprobs: ``"processed"`` or ``"raw"`` to return each emitted token's log-probability
            (module docstring); default None, none computed.
        method: the verification method (``specbench.methods``): ``"token"`` (default), ``"block"``,
            or the lossy ``"typical"`` and ``"relaxed"`` (module docstring, "Verification methods").
            Greedy rows follow the greedy rule whatever the method; the synthetic mode takes ``"token"`` only.
        backend: ``"auto"`` (Triton on a GPU, torch on the CPU), ``"triton"`` or ``"torch"``.
        check_values: inspect the values of ``num_draft_tokens`` and ``temperatures`` (a host
            read). Default: on CPU tensors only, so a GPU call never waits on the device and can
            be captured in a CUDA graph; there every backend clamps counts into ``[0, K]``, and a
            request with a negative or NaN temperature is invalid (it emits nothing).
        tree: ``specbench.trees.DraftTree`` (``parents [B, N]``, ``candidates``): the drafts form a tree of
            ``N = K`` nodes per request (module docstring, "Trees"); ``acceptance_rates`` is then a table
            of conditional rates. Default None: a chain. Every backend runs trees (the Triton kernel
            ``specbench/kernels/tree.py``, every mode and draft form).

    Returns:
        ``VerifyResult(output_token_ids [B, K+1] int64 (-1 padded), num_emitted [B] int32,
        num_accepted [B] int32, logprobs [B, K+1] float32 or None, accepted_nodes [B, K] int32 for a
        tree (-1 padded) or None)`` on the device of ``target_logits``.
    """
    backend_verify, kwargs = prepare_verify(
        target_logits, draft_token_ids, target_probs=target_probs, mode=mode, num_draft_tokens=num_draft_tokens,
        draft_logits=draft_logits, draft_probs=draft_probs, sampling=sampling, temperatures=temperatures,
        seeds=seeds, positions=positions, acceptance_rates=acceptance_rates,
        truncate_draft_logits=truncate_draft_logits, logprobs=logprobs, method=method, backend=backend,
        check_values=check_values, tree=tree,
    )
    return backend_verify(**kwargs)


def prepare_verify(
    target_logits: torch.Tensor | None = None,
    draft_token_ids: torch.Tensor | None = None,
    *,
    target_probs: torch.Tensor | None = None,
    mode: Mode = "probabilistic",
    num_draft_tokens: torch.Tensor | None = None,
    draft_logits: torch.Tensor | None = None,
    draft_probs: torch.Tensor | None = None,
    sampling: SamplingParams | None = None,
    temperatures: torch.Tensor | None = None,
    seeds: torch.Tensor | None = None,
    positions: torch.Tensor | None = None,
    acceptance_rates: list[float] | None = None,
    truncate_draft_logits: bool = True,
    logprobs: str | None = None,
    method: str = "token",
    backend: Backend = "auto",
    check_values: bool | None = None,
    tree: DraftTree | None = None,
) -> tuple[Callable[..., VerifyResult], dict[str, Any]]:
    """Check and normalise ``verify``'s arguments once; return ``(backend_verify, kwargs)``.

    ``backend_verify(**kwargs)`` is then the same step as ``verify(...)`` without the Python-side
    checks: what a benchmark times or a serving loop calls again and again.
    """
    if mode not in MODES:
        raise SpecbenchError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    method = methods.check_method(method, mode)
    if (target_logits is None) == (target_probs is None):
        raise SpecbenchError("give target_logits or target_probs (exactly one of the two)")
    if draft_token_ids is None:
        raise SpecbenchError("draft_token_ids is required ([B, K] int32 or int64)")
    if target_probs is not None:
        if not isinstance(target_probs, torch.Tensor) or target_probs.dim() != 3:
            shape = list(target_probs.shape) if isinstance(target_probs, torch.Tensor) else type(target_probs).__name__
            raise SpecbenchError(f"target_probs must be a [B, K + 1, V] tensor, got {shape}")
        if target_probs.dtype not in _FLOAT_DTYPES:
            raise SpecbenchError(
                f"target_probs must have dtype float32, bfloat16 or float16, got "
                f"{str(target_probs.dtype).removeprefix('torch.')}"
            )
        target_logits = target_probs  # shape and device checks below; converted in each call
    if not isinstance(target_logits, torch.Tensor) or target_logits.dim() != 3:
        shape = list(target_logits.shape) if isinstance(target_logits, torch.Tensor) else type(target_logits).__name__
        raise SpecbenchError(f"target_logits must be a [B, K + 1, V] tensor, got {shape}")
    batch, num_rows, vocab = target_logits.shape
    num_spec = num_rows - 1
    device = target_logits.device
    if num_rows < 1 or vocab < 1:
        raise SpecbenchError(f"target_logits needs at least one row and one token, got {list(target_logits.shape)}")
    _check_tensor("target_logits", target_logits, (batch, num_rows, vocab), _FLOAT_DTYPES, device)
    if target_logits.stride(2) != 1:
        raise SpecbenchError("target_logits must be contiguous in its last (vocabulary) dimension")
    if isinstance(draft_token_ids, torch.Tensor) and draft_token_ids.dim() == 2 and draft_token_ids.shape[0] == batch \
            and draft_token_ids.shape[1] != num_spec:
        raise SpecbenchError(
            f"draft_token_ids has {draft_token_ids.shape[1]} draft slots but target_logits has {num_rows} rows per "
            f"request (K draft slots, or a tree's N nodes, + the bonus row, so K = {num_spec}); target_logits must be "
            f"[{batch}, {draft_token_ids.shape[1] + 1}, {vocab}] for these drafts"
        )
    _check_tensor("draft_token_ids", draft_token_ids, (batch, num_spec), (torch.int32, torch.int64), device)

    int_types = (torch.int32, torch.int64)
    if num_draft_tokens is None:
        num_draft_tokens = torch.full((batch,), num_spec, dtype=torch.int32, device=device)
    _check_tensor("num_draft_tokens", num_draft_tokens, (batch,), int_types, device)
    # Checking values reads them on the host: a sync on a GPU, and not allowed while a CUDA graph
    # is captured. There the kernels' own guards (counts clamped to [0, K]) stand in for it.
    if check_values is None:
        check_values = device.type == "cpu"
    if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
        check_values = False
    check_values = check_values and batch > 0
    if check_values and (int(num_draft_tokens.min()) < 0 or int(num_draft_tokens.max()) > num_spec):
        bad = num_draft_tokens[(num_draft_tokens < 0) | (num_draft_tokens > num_spec)][0].item()
        raise SpecbenchError(f"num_draft_tokens must lie in [0, {num_spec}], got {bad}")

    if draft_logits is not None and draft_probs is not None:
        raise SpecbenchError("give draft_logits or draft_probs, not both")
    for name, tensor in (("draft_logits", draft_logits), ("draft_probs", draft_probs)):
        if tensor is not None:
            if mode != "probabilistic":
                raise SpecbenchError(f"{name} is only used by the probabilistic mode, got mode {mode!r}")
            _check_tensor(name, tensor, (batch, num_spec, vocab), _FLOAT_DTYPES, device)
            if tensor.stride(2) != 1:
                raise SpecbenchError(f"{name} must be contiguous in its last (vocabulary) dimension")

    if sampling is None:
        sampling = SamplingParams()
    elif not isinstance(sampling, SamplingParams):
        raise SpecbenchError(f"sampling must be a specbench.SamplingParams, got {type(sampling).__name__}")
    if temperatures is not None:
        if sampling.temperatures is not None:
            raise SpecbenchError("give temperatures or sampling.temperatures, not both")
        sampling = sampling._replace(temperatures=temperatures)
    temperatures = _per_request("temperatures", sampling.temperatures, 0.0 if mode == "greedy" else 1.0, batch,
                                (torch.float32, torch.float64), torch.float32, device)
    if check_values and not bool(torch.all(temperatures >= 0)):
        bad = temperatures[~(temperatures >= 0)][0].item()
        raise SpecbenchError(f"temperatures must be non-negative numbers, got {bad}")
    if mode == "greedy":
        temperatures = torch.zeros_like(temperatures)
    truncation = _checked_truncation(sampling, mode, batch, device, check_values)
    if not isinstance(truncate_draft_logits, bool):
        raise SpecbenchError(f"truncate_draft_logits must be True or False, got {truncate_draft_logits!r}")
    if logprobs is not None and logprobs not in LOGPROBS:
        raise SpecbenchError(f"logprobs must be one of {', '.join(LOGPROBS)} (or None), got {logprobs!r}")

    if seeds is None:
        if mode != "greedy":
            raise SpecbenchError(f"seeds are required for the {mode} mode (one int64 per request)")
        seeds = torch.zeros(batch, dtype=torch.int64, device=device)
    _check_tensor("seeds", seeds, (batch,), int_types, device)
    if positions is None:
        positions = torch.zeros(batch, dtype=torch.int64, device=device)
    _check_tensor("positions", positions, (batch,), int_types, device)

    resolved = resolve_backend(backend, device)
    if tree is not None:  # the rates, the tree and its refusals ("Trees" in the module docstring)
        rates_and_tree = _checked_tree(tree, mode, batch, num_spec, device, num_draft_tokens, check_values,
                                       _truncating(truncation, vocab), logprobs, method, acceptance_rates)
        truncation = {name: None for name in truncation}  # every knob off (refused otherwise): untruncated
    else:
        conditional = _conditional_rates_tensor((0.0,) * max(num_spec, 1), device)
        if mode == "synthetic":
            if acceptance_rates is None:
                raise SpecbenchError("the synthetic mode needs acceptance_rates (K unconditional rates)")
            rates = _checked_rates(acceptance_rates, num_spec)
            if rates:
                conditional = _conditional_rates_tensor(tuple(rates), device)
        elif acceptance_rates is not None:
            raise SpecbenchError(f"acceptance_rates is only used by the synthetic mode, got mode {mode!r}")
        rates_and_tree = {"conditional_rates": conditional}

    impl = backend_module(resolved)
    return impl.verify, {
        "mode": mode,
        "target_logits": None if target_probs is not None else target_logits,
        "target_probs": target_probs,
        # the kernels index these densely: any strides (a transposed or expanded view) are copied out
        "draft_token_ids": draft_token_ids.to(torch.int64).contiguous(),
        "num_draft_tokens": num_draft_tokens.to(torch.int32).contiguous(),
        "draft_logits": draft_logits,
        "draft_probs": draft_probs,
        "temperatures": temperatures.contiguous(),
        **truncation,
        "truncate_draft_logits": truncate_draft_logits,
        "logprobs": logprobs,
        "method": method,
        "seeds": seeds.to(torch.int64).contiguous(),
        "positions": positions.to(torch.int64).contiguous(),
        **rates_and_tree,
    }


def _truncating(truncation: dict[str, torch.Tensor | None], vocab: int) -> bool:
    # whether some request's knob is on (top_k in (0, V), top_p < 1, min_p > 0): a tree call refuses truncation but
    # not knobs at their off values. Knob tensors are read on the host, so under CUDA-graph capture any is "on".
    given = {name: value for name, value in truncation.items() if value is not None}
    if not given:
        return False
    if any(value.is_cuda for value in given.values()) and torch.cuda.is_current_stream_capturing():
        return True
    on = {"top_k": lambda k: (k > 0) & (k < vocab), "top_p": lambda p: p < 1, "min_p": lambda p: p > 0}
    return any(bool(on[name](value).any()) for name, value in given.items())


def _checked_tree(tree: Any, mode: str, batch: int, num_nodes: int, device: torch.device,
                  num_draft_tokens: torch.Tensor, check_values: bool, truncating: bool,
                  logprobs: str | None, method: str, acceptance_rates: Any) -> dict[str, Any]:
    """The tree keywords of a backend call (``conditional_rates`` the ``[D, W]`` synthetic table, ``tree_parents``,
    ``tree_candidates``), after refusing what trees do not take in this version (module docstring, "Trees")."""
    check_tree(tree, batch, num_nodes, device, num_draft_tokens, check_values)
    if truncating:
        raise SpecbenchError("tree verification does not take truncation (top_k, top_p, min_p) in this version; "
                             "knobs at their off values (top_k 0 or >= V, top_p 1, min_p 0) are taken")
    if logprobs is not None:
        raise SpecbenchError("tree verification does not return log-probabilities in this version: pass logprobs=None")
    if method != "token":
        raise SpecbenchError(f"tree verification follows the token method only in this version, got method {method!r}")
    table = torch.zeros(1, 1, dtype=torch.float32, device=device)
    if mode == "synthetic":
        if acceptance_rates is None:
            raise SpecbenchError("the synthetic mode needs acceptance_rates (for a tree: a [D][W] table of "
                                 "conditional rates, or one list of W)")
        table = _tree_rates_tensor(_tree_rates(acceptance_rates, num_nodes), device)
    elif acceptance_rates is not None:
        raise SpecbenchError(f"acceptance_rates is only used by the synthetic mode, got mode {mode!r}")
    return {"conditional_rates": table, "tree_parents": tree.parents.to(torch.int64).contiguous(),
            "tree_candidates": tree.candidates}


def _tree_rates(rates: Any, num_nodes: int) -> tuple[tuple[float, ...], ...]:
    """A tree's synthetic rates as a table of conditional rates in ``[0, 1]``: ``[D][W]`` as given, or one list
    of ``W`` repeated for every depth a tree of ``num_nodes`` nodes can have."""
    rates = _rate_values(rates)
    if isinstance(rates, (str, bytes)) or not isinstance(rates, Sequence) or len(rates) == 0:
        raise SpecbenchError(f"tree acceptance rates must be a [D][W] table or a list of W rates, got {rates!r}")
    nested = [isinstance(r, Sequence) and not isinstance(r, (str, bytes)) for r in rates]
    rows = rates if all(nested) else [rates] * max(num_nodes, 1)
    table = []
    for row in rows:
        if len(row) == 0 or len(row) != len(rows[0]):
            raise SpecbenchError(f"tree acceptance rates must have rows of one length (W >= 1), got {rates!r}")
        for value in row:
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0.0 <= value <= 1.0:
                raise SpecbenchError(f"tree acceptance rates must be conditional rates in [0, 1], got {value!r}")
        table.append(tuple(float(value) for value in row))
    return tuple(table)


@functools.lru_cache(maxsize=64)
def _tree_rates_tensor(table: tuple[tuple[float, ...], ...], device: torch.device) -> torch.Tensor:
    # [D, W] float32, cached: a host-to-device copy per call would break CUDA-graph capture
    return torch.tensor(table, dtype=torch.float32, device=device)


def _per_request(name: str, value: Any, default: Any, batch: int, dtypes: tuple, dtype: torch.dtype,
                 device: torch.device) -> torch.Tensor:
    """A ``[B]`` tensor of ``dtype`` from a ``[B]`` tensor, a Python number for every request, or None."""
    if value is None:
        value = default
    if isinstance(value, torch.Tensor):
        _check_tensor(name, value, (batch,), dtypes, device)
        return value.to(dtype).contiguous()
    integral = dtype in (torch.int32, torch.int64)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral if integral else numbers.Real):
        kind = "a whole number" if integral else "a number"
        raise SpecbenchError(f"{name} must be a [B] tensor or {kind}, got {value!r}")
    return torch.full((batch,), value, dtype=dtype, device=device)


def _checked_truncation(sampling: SamplingParams, mode: str, batch: int, device: torch.device,
                        check_values: bool) -> dict[str, torch.Tensor | None]:
    """The truncation knobs as ``[B]`` tensors (``top_k`` int32, ``top_p`` and ``min_p`` float32), each
    None where not given; all None in the greedy mode, which truncation cannot change."""
    knobs = {"top_k": None, "top_p": None, "min_p": None}
    if all(getattr(sampling, name) is None for name in knobs):
        return knobs
    for name, off, dtypes, dtype in (("top_k", 0, (torch.int32, torch.int64), torch.int32),
                                     ("top_p", 1.0, (torch.float32, torch.float64), torch.float32),
                                     ("min_p", 0.0, (torch.float32, torch.float64), torch.float32)):
        given = getattr(sampling, name)
        if given is None:
            continue
        if name == "top_k" and isinstance(given, torch.Tensor) and given.dtype == torch.int64:
            given = given.clamp(-1, 2**31 - 1)  # every top_k >= V is off and every negative one too: int32 holds them
        elif name == "top_k" and isinstance(given, numbers.Integral) and not isinstance(given, bool):
            given = max(-1, min(int(given), 2**31 - 1))
        knobs[name] = _per_request(name, given, off, batch, dtypes, dtype, device)
    if check_values and batch > 0:
        top_k, top_p, min_p = knobs["top_k"], knobs["top_p"], knobs["min_p"]
        if top_k is not None and bool((top_k < 0).any()):
            raise SpecbenchError(f"top_k must be a whole number >= 0 (0 is off), got {top_k[top_k < 0][0].item()}")
        if top_p is not None and not bool(((top_p > 0) & (top_p <= 1)).all()):
            bad = top_p[~((top_p > 0) & (top_p <= 1))][0].item()
            raise SpecbenchError(f"top_p must lie in (0, 1] (1 is off), got {bad}")
        if min_p is not None and not bool(((min_p >= 0) & (min_p <= 1)).all()):
            bad = min_p[~((min_p >= 0) & (min_p <= 1))][0].item()
            raise SpecbenchError(f"min_p must lie in [0, 1] (0 is off), got {bad}")
    if mode == "greedy":
        return {name: None for name in knobs}
    return knobs


def simulate_acceptance(
    acceptance_rates: list[float],
    num_requests: int,
    *,
    seed: int = 0,
    first_request: int = 0,
    backend: Backend = "auto",
    device: str | torch.device = "cpu",
    request_rates: Sequence[float] | None = None,
) -> torch.Tensor:
    """Drafts accepted by ``num_requests`` synthetic steps, without logits (the sweep's engine).

    Request ``r`` uses the seed ``specbench.rng.request_seed(seed, first_request + r)`` (a hash of
    both, so runs under different seeds are independent) at position 0: its count equals the
    ``num_accepted`` that ``verify(mode="synthetic")`` gives for that seed, and a sweep split into
    chunks (``first_request``) gives the same counts as one call. ``seed`` and
    ``first_request + num_requests`` must lie in ``[0, 2**62)``.

    Per-request spread (``request_rates``, ``M`` numbers in ``[0, 1]``, ``M`` a power of two from 1
    to ``MAX_SPREAD_COMPONENTS``): request ``r`` first draws one of the ``M`` rates, equally
    likely, then accepts every position with it. Exactly, with ``s_r`` its seed: ``w`` is word 0
    of the ``(s_r, position 0, rng.SPREAD)`` stream (``fmix32(stream_key(seed_key(s_r), 0, SPREAD))``),
    ``m = floor(w * M / 2**32)`` (the top ``log2 M`` bits of ``w``), ``alpha = float32(request_rates[m])``,
    and position ``i`` (``0..K-1``) is accepted iff every earlier one was and
    ``U(s_r, i, ACCEPT) < alpha``: the same ``u_i`` as without spread, so ``M = 1`` with
    ``request_rates = [alpha]`` gives the counts of the i.i.d. profile ``alpha`` bit for bit. The
    law of ``A`` is then exactly the mixture ``P(A >= i) = (1/M) sum_m alpha_m^i`` (float32 rates,
    23-bit uniforms). A Beta law is simulated through its ``M`` quantiles
    ``alpha_m = F^-1((m + 1/2) / M)`` (``profile_models.beta_quantile_rates``), so the closed form
    a sweep checks is that mixture's, not the continuous law's. ``acceptance_rates`` then only sets
    ``K`` (pass the mixture's own rates, ``profile_models.mixture_rates(request_rates, K)``).
    No random stream of the spread-free simulation changes: every earlier count stays the same.

    Returns ``[num_requests]`` int32 in ``0..K`` on ``device``.
    """
    rates = acceptance.validate_rates(_rate_values(acceptance_rates), None)
    mixture = None if request_rates is None else _request_rates(request_rates)
    for name, value, low in (("num_requests", num_requests, 1), ("first_request", first_request, 0)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
            raise SpecbenchError(f"{name} must be a whole number of at least {low}, got {value!r}")
    rng.check_seed(seed)
    if first_request + num_requests > 2**62:
        raise SpecbenchError(f"first_request + num_requests must be at most 2**62, got {first_request + num_requests}")
    device = _simulation_device(device)
    conditional = torch.tensor(acceptance.conditional_rates(rates), dtype=torch.float32, device=device)
    impl = backend_module(resolve_backend(backend, device))
    if mixture is None:
        return impl.simulate(
            conditional_rates=conditional, num_requests=num_requests, seed=int(seed), first_request=int(first_request)
        )
    table = torch.tensor(mixture, dtype=torch.float32, device=device)[:, None].expand(len(mixture), len(rates))
    return impl.simulate(conditional_rates=conditional, num_requests=num_requests, seed=int(seed),
                         first_request=int(first_request), mixture_rates=table.contiguous())


MAX_SPREAD_COMPONENTS = 1 << 16


def _request_rates(values: Sequence[float]) -> list[float]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise SpecbenchError(f"request_rates must be a list of numbers, got {values!r}")
    count = len(values)
    if count < 1 or count > MAX_SPREAD_COMPONENTS or count & (count - 1):
        raise SpecbenchError(f"request_rates must hold a power of two of rates, from 1 to {MAX_SPREAD_COMPONENTS}, "
                             f"got {count}")
    result = []
    for value in values:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
            raise SpecbenchError(f"request_rates must be numbers in [0, 1], got {value!r}")
        result.append(float(value))
    return result


def _simulation_device(device: str | torch.device) -> torch.device:
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError):
        raise SpecbenchError(f"device must be cpu, cuda or cuda:N, got {device!r}") from None
    if device.type not in ("cpu", "cuda"):
        raise SpecbenchError(f"device must be cpu, cuda or cuda:N, got {str(device)!r}")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SpecbenchError(f"device {str(device)!r} needs a CUDA GPU, and torch sees none")
    return device
