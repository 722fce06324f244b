"""What a request is and how its drafts are decided, shared by every verification kernel.

``request_setup`` reads a request's scalars; ``accept_test`` is the acceptance test of one draft;
``sample_row`` draws the target's own token of a row. The ``decide_*`` helpers decide a whole
request at once, vectorised over its draft slots (``OUT_BLOCK`` lanes, slot ``i`` in lane ``i``):
from values gathered at the drafts alone (``decide_by_gathers``: the synthetic mode, and target
probabilities with one-hot drafts or draft probabilities), or from per-row partials that programs
of the same request wrote (``merge_rows``, then ``decide_from_rows``). Each returns the terminal
slot ``t`` (the first rejected slot, or ``n``, the bonus row): slots before it emit their drafts.

A decision made in several programs (every program of a request in the split kernels) is the same
arithmetic on the same values, so every program reaches the same decision.
"""

import triton
import triton.language as tl

from specbench import rng
from specbench.kernels.rng import seed_key, stream_key, uniform_at
from specbench.kernels.rows import (
    clean,
    clean_prob,
    load_probs,
    prob_of,
    race_logits_slice,
    race_weights_slice,
    rounded_product,
    target_weight,
)

MODE_GREEDY = tl.constexpr(0)
MODE_PROBABILISTIC = tl.constexpr(1)
MODE_SYNTHETIC = tl.constexpr(2)

DRAFT_NONE = tl.constexpr(0)
DRAFT_LOGITS = tl.constexpr(1)
DRAFT_PROBS = tl.constexpr(2)

ACCEPT = tl.constexpr(rng.ACCEPT)
RESIDUAL = tl.constexpr(rng.RESIDUAL)
SAMPLE = tl.constexpr(rng.SAMPLE)
INT32_MAX = tl.constexpr(2147483647)


@triton.jit
def request_setup(b, num_draft_ptr, temperature_ptr, seed_ptr, position_ptr, NUM_SLOTS, MODE: tl.constexpr):
    # What every kernel reads first about request b: its draft count (clamped so no row past the
    # bonus row is ever indexed), whether its rows are greedy, 1/T, its position and its seed key.
    # A negative or NaN temperature (possible only unchecked) gives 1/T = NaN: the request is
    # invalid (request_valid), and masked lanes (-inf) never turn into +inf.
    n = tl.minimum(tl.maximum(tl.load(num_draft_ptr + b), 0), NUM_SLOTS - 1)
    temperature = tl.load(temperature_ptr + b)
    greedy = (temperature == 0.0) | (MODE == MODE_GREEDY)
    inv_temperature = tl.where(temperature < 0.0, float("nan"), 1.0 / tl.where(greedy, 1.0, temperature))
    return n, greedy, inv_temperature, tl.load(position_ptr + b), seed_key(tl.load(seed_ptr + b))


@triton.jit
def request_valid(inv_temperature):
    # An invalid request (a negative or NaN temperature: request_setup's 1/T is NaN) emits nothing.
    # It is decided like any other and its outputs are replaced where they are written, so the
    # kernels' loops carry no test for it (a register more there cost a program per multiprocessor).
    return inv_temperature == inv_temperature  # noqa: PLR0124 (NaN test)


@triton.jit
def target_prob_of(value, inv_temperature, m, s, TARGET_PROBS: tl.constexpr):
    # p(x) from the target's value at x: the cleaned probability as given, or exp(z - m) / s from
    # the logit and its row's statistics
    value = value.to(tl.float32)
    if TARGET_PROBS:
        return clean_prob(value)
    return prob_of(clean(value * inv_temperature), m, s)


@triton.jit
def draft_prob_of(value, inv_temperature, md, sd, DRAFT: tl.constexpr):
    # q(x) from the draft's value at x: 1 for a one-hot draft (DRAFT_NONE, or draft logits with no
    # finite value: md = -inf), the softmax of the draft logits, or the given draft probability
    # (read as target probabilities are: NaN and negative -> 0, above 1 -> 1)
    q_x = 1.0
    if DRAFT == DRAFT_LOGITS:
        q_draft = prob_of(clean(value.to(tl.float32) * inv_temperature), md, sd)
        q_x = tl.where(md == float("-inf"), 1.0, q_draft)
    if DRAFT == DRAFT_PROBS:
        q_x = clean_prob(value.to(tl.float32))
    return q_x


@triton.jit
def target_chunk(t_row, offs, V, inv_temperature, m, s, TARGET_PROBS: tl.constexpr):
    # p over a chunk of a row: the cleaned probabilities, or exp(z - m) times 1 / s (rows.target_weight, the chain's
    # race's arithmetic: a product where a division takes about nine instructions a token; within float rounding of
    # the quotient), 0 past V either way
    m_safe = tl.where(m == float("-inf"), 0.0, m)
    return target_weight(t_row, offs, V, inv_temperature, m_safe, 1.0 / tl.where(s == 0.0, 1.0, s), TARGET_PROBS)


@triton.jit
def draft_chunk(d_row, offs, V, inv_temperature, md, sd, x, DRAFT: tl.constexpr):
    # q over a chunk of a row likewise: the softmax of the draft logits as exp(z - md) times 1 / sd, the given draft
    # probabilities (cleaned as target probabilities are), or the one-hot at x (one-hot drafts, and draft-logit rows
    # with no finite value: md = -inf, a row not read), x compared as int32 (a caller that may pass an id outside
    # [0, V) discards q there)
    if DRAFT == DRAFT_LOGITS:
        if md == float("-inf"):
            q = tl.where(offs == x.to(tl.int32), 1.0, 0.0)
        else:
            d = tl.load(d_row + offs, mask=offs < V, other=float("-inf")).to(tl.float32)
            q = tl.exp(clean(d * inv_temperature) - md) * (1.0 / tl.where(sd == 0.0, 1.0, sd))
    elif DRAFT == DRAFT_PROBS:
        q = load_probs(d_row, offs, V)
    else:
        q = tl.where(offs == x.to(tl.int32), 1.0, 0.0)
    return q


@triton.jit
def target_prob_at(t_ptr, mask, inv_temperature, m, s, TARGET_PROBS: tl.constexpr):
    # p(x) read at t_ptr (one pointer or one per slot; nothing is read where `mask` is off)
    return target_prob_of(tl.load(t_ptr, mask=mask, other=0.0), inv_temperature, m, s, TARGET_PROBS)


@triton.jit
def draft_prob_at(d_ptr, mask, inv_temperature, md, sd, DRAFT: tl.constexpr):
    # q(x) read at d_ptr (nothing is read for a one-hot draft)
    value = 0.0
    if DRAFT != DRAFT_NONE:
        value = tl.load(d_ptr, mask=mask, other=0.0)
    return draft_prob_of(value, inv_temperature, md, sd, DRAFT)


@triton.jit
def read_at_draft(t_row, d_row, x, x_valid, DRAFT: tl.constexpr):
    # the target's and the draft's values at draft x (0 where x is not a valid id; the draft's only
    # for a draft distribution), as stored: what accept_test reads
    # (volatile: the compiler would otherwise sink a load whose value is used only after the loop
    # that follows it, to just before that use)
    x_safe = tl.where(x_valid, x, 0)
    t_at_x = tl.load(t_row + x_safe, mask=x_valid, other=0.0, volatile=True)
    d_at_x = t_at_x * 0.0
    if DRAFT != DRAFT_NONE:
        d_at_x = tl.load(d_row + x_safe, mask=x_valid, other=0.0, volatile=True)
    return t_at_x, d_at_x


@triton.jit
def accept_test(u, x_valid, t_at_x, d_at_x, inv_temperature, m, s, md, sd, DRAFT: tl.constexpr,
                TARGET_PROBS: tl.constexpr):
    # accept iff u * q(x) < p(x)  (Leviathan et al. 2022, alg. 1); q(x) = 1 for one-hot drafts.
    # t_at_x, d_at_x are the values read at the draft (read_at_draft); m, s (and md, sd) the softmax
    # statistics of the target (and draft) row.
    p_x = target_prob_of(t_at_x, inv_temperature, m, s, TARGET_PROBS)
    q_x = draft_prob_of(d_at_x, inv_temperature, md, sd, DRAFT)
    return x_valid & (u * q_x < p_x)


@triton.jit
def sample_row(t_row, start, stop, inv_temperature, key, TARGET_PROBS: tl.constexpr, SCREEN: tl.constexpr,
               BLOCK: tl.constexpr):
    # The target's own sample on [start, stop) of a (non-greedy) row, as a race pair (z, g, index):
    # the race over p; index -1 when the slice has no mass
    if TARGET_PROBS:
        z, g, token = race_weights_slice(t_row, t_row, start, stop, 1.0, key, -1, 0.0, 1.0, 0.0, 1.0, True, 0, SCREEN,
                                         BLOCK)
    else:
        z, g, token = race_logits_slice(t_row, start, stop, inv_temperature, key, -1, SCREEN, BLOCK)
    return z, g, token


@triton.jit
def _request_drafts(b, n, draft_ids_ptr, draft_ids_stride, V, OUT_BLOCK: tl.constexpr):
    # request b's drafts, slot i in lane i: (slots, in the request, ids, valid ids, ids safe to index)
    slots = tl.arange(0, OUT_BLOCK)
    in_request = slots < n
    x = tl.load(draft_ids_ptr + b * draft_ids_stride + slots, mask=in_request, other=-1)
    x_valid = (x >= 0) & (x < V) & in_request
    return slots, in_request, x, x_valid, tl.where(x_valid, x, 0)


@triton.jit
def _draft_at(x, x_valid, slots, t):
    # the draft of slot t and whether it is a valid id, as scalars
    at_t = slots == t
    return tl.sum(tl.where(at_t, x, 0), axis=0), tl.max(tl.where(at_t, x_valid.to(tl.int32), 0), axis=0) > 0


@triton.jit
def _first_rejection(accept, in_request, slots, n):
    # the first slot before n whose draft is not accepted, or n when every one is
    return tl.min(tl.where(in_request & ~accept, slots, n), axis=0)


@triton.jit
def decide_by_gathers(b, n, greedy, inv_temperature, position, key_of_seed,
                      t_base, t_stride_k, d_base, d_stride_k, draft_ids_ptr, draft_ids_stride,
                      conditional_rates_ptr, V,
                      MODE: tl.constexpr, DRAFT: tl.constexpr, TARGET_PROBS: tl.constexpr,
                      OUT_BLOCK: tl.constexpr):
    # Decide request b from values at its drafts alone, every slot at once: the synthetic mode
    # (accept iff u < c_i, nothing read), or probabilistic rows with target probabilities and
    # one-hot drafts or draft probabilities (accept iff u * q(x) < p(x), two gathered values).
    # Not for greedy rows of the probabilistic mode (they need every row's argmax).
    # Returns (t, drafts [OUT_BLOCK], the draft at t, whether it is a valid id).
    slots, in_request, x, x_valid, x_safe = _request_drafts(b, n, draft_ids_ptr, draft_ids_stride, V, OUT_BLOCK)
    u = uniform_at(stream_key(key_of_seed, position + slots, ACCEPT), 0)
    if MODE == MODE_SYNTHETIC:
        # synthetic: accept iff u < c_i, whatever the distributions say
        rate = tl.load(conditional_rates_ptr + slots, mask=in_request, other=0.0)
        accept = x_valid & (u < rate)
    else:
        p_x = target_prob_at(t_base + slots * t_stride_k + x_safe, x_valid, 1.0, 0.0, 1.0, True)
        q_x = draft_prob_at(d_base + slots * d_stride_k + x_safe, x_valid, 1.0, 0.0, 1.0, DRAFT)
        # accept iff u * q(x) < p(x)  (Leviathan et al. 2022, alg. 1)
        accept = x_valid & (u * q_x < p_x)
    t = _first_rejection(accept, in_request, slots, n)
    x_t, x_t_valid = _draft_at(x, x_valid, slots, t)
    return t, x, x_t, x_t_valid


@triton.jit
def merge_rows(f_base, i_base, num_rows, NUM_SPLITS, FIELDS: tl.constexpr, OUT_BLOCK: tl.constexpr,
               S_BLOCK: tl.constexpr):
    # A request's per-(row, slice) partials [rows, S, FIELDS] merged per row, every row at once:
    # (argmax value, its lowest index) from field 0 and the int field, target (m, s) from fields
    # 0, 1 and draft (md, sd) from fields 2, 3. Rows >= num_rows come back as (-inf, -1, -inf, 0, ...).
    rows = tl.arange(0, OUT_BLOCK)[:, None]
    splits = tl.arange(0, S_BLOCK)[None, :]
    mask = (rows < num_rows) & (splits < NUM_SPLITS)
    cell = rows * NUM_SPLITS + splits
    v0 = tl.load(f_base + cell * FIELDS, mask=mask, other=float("-inf"))
    v1 = tl.load(f_base + cell * FIELDS + 1, mask=mask, other=0.0)
    v2 = tl.load(f_base + cell * FIELDS + 2, mask=mask, other=float("-inf"))
    v3 = tl.load(f_base + cell * FIELDS + 3, mask=mask, other=0.0)
    idx = tl.load(i_base + cell, mask=mask, other=-1)
    best = tl.max(v0, axis=1)
    candidates = tl.where((v0 == best[:, None]) & (idx >= 0), idx, INT32_MAX)
    best_idx = tl.min(candidates, axis=1)
    best_idx = tl.where(best_idx == INT32_MAX, -1, best_idx)
    m, s = _merge_softmax_rows(v0, v1)
    md, sd = _merge_softmax_rows(v2, v3)
    return best_idx, m, s, md, sd


@triton.jit
def _merge_softmax_rows(ms, ss):
    # per row: max over the slices, and the slices' sums rescaled to it
    m = tl.max(ms, axis=1)
    m_safe = tl.where(m == float("-inf"), 0.0, m)
    return m, tl.sum(rounded_product(ss, tl.exp(ms - m_safe[:, None])), axis=1)


@triton.jit
def decide_from_rows(b, n, greedy, inv_temperature, position, key_of_seed, best_idx, m, s, md, sd,
                     t_base, t_stride_k, d_base, d_stride_k, draft_ids_ptr, draft_ids_stride, V,
                     DRAFT: tl.constexpr, TARGET_PROBS: tl.constexpr, OUT_BLOCK: tl.constexpr):
    # Decide request b from its merged rows (merge_rows), every slot at once. A greedy request
    # accepts while the draft is the row's argmax; the others test u * q(x) < p(x) with p(x) from
    # the row's statistics (or gathered, TARGET_PROBS) and q(x) from the draft's. A target row
    # with no finite logit stops the request (for target logits; probabilities: p(x) = 0 rejects).
    # Returns (t, drafts, the draft at t, whether it is a valid id, the argmax at t (greedy),
    # whether row t is valid).
    slots, in_request, x, x_valid, x_safe = _request_drafts(b, n, draft_ids_ptr, draft_ids_stride, V, OUT_BLOCK)
    if greedy:
        accept = x_valid & (x == best_idx)
    else:
        u = uniform_at(stream_key(key_of_seed, position + slots, ACCEPT), 0)
        p_x = target_prob_at(t_base + slots * t_stride_k + x_safe, x_valid, inv_temperature, m, s, TARGET_PROBS)
        q_x = draft_prob_at(d_base + slots * d_stride_k + x_safe, x_valid, inv_temperature, md, sd, DRAFT)
        # accept iff u * q(x) < p(x)  (Leviathan et al. 2022, alg. 1)
        accept = x_valid & (u * q_x < p_x)
        if not TARGET_PROBS:
            accept = accept & (m != float("-inf"))
    t = _first_rejection(accept, in_request, slots, n)
    x_t, x_t_valid = _draft_at(x, x_valid, slots, t)
    at_t = slots == t
    best_at_t = tl.max(tl.where(at_t, best_idx, -1), axis=0)
    row_valid = tl.max(tl.where(at_t & (m != float("-inf")), 1, 0), axis=0) > 0
    return t, x, x_t, x_t_valid, best_at_t, row_valid


@triton.jit
def row_at(values, slots, t):
    # the lane of `values` at slot t, as a scalar (float lanes)
    return tl.sum(tl.where(slots == t, values, 0.0), axis=0)
