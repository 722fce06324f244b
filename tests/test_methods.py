"""Verification methods (``specbench/methods.py``): block verification exact and never behind token
verification, the lossy rules following their own documented laws, and the torch reference against
the float64 oracle (Pearson's chi-square at ``ALPHA = 1e-3`` per check).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from specbench import SpecbenchError, oracle, verify
from specbench.methods import METHODS, check_method, parse_methods

ALPHA = 1e-3


def _rows(seed: int, num_spec: int, vocab: int, scale: float = 1.5, noise: float = 1.0):
    gen = torch.Generator().manual_seed(seed)
    target = torch.randn(num_spec + 1, vocab, generator=gen) * scale
    draft = target[:num_spec] + torch.randn(num_spec, vocab, generator=gen) * noise
    return target, draft


def _same(a, b) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a[:3], b[:3], strict=True))


def test_registry_names_and_refusals():
    assert list(METHODS) == ["token", "block", "typical", "relaxed"]
    assert [name for name, info in METHODS.items() if not info.exact] == ["typical", "relaxed"]
    assert parse_methods("token, block,token") == ["token", "block"]
    with pytest.raises(SpecbenchError, match="unknown method 'blok'"):
        parse_methods("token,blok")
    for holed in ("token,", "token,,block", ",block"):  # a list with a hole is refused, as every list option does
        with pytest.raises(SpecbenchError, match="--method takes comma-separated values"):
            parse_methods(holed)
    with pytest.raises(SpecbenchError, match="--method needs at least one of"):
        parse_methods(" ")
    with pytest.raises(SpecbenchError, match="synthetic mode accepts by its profile"):
        check_method("block", "synthetic")
    target, _ = _rows(0, 2, 5)
    with pytest.raises(SpecbenchError, match="method must be one of"):
        verify(target[None], torch.zeros(1, 2, dtype=torch.int64), seeds=torch.zeros(1, dtype=torch.int64),
               method="Block")


@pytest.mark.parametrize("form", ["logits", "probs", "one-hot", "target-probs"])
def test_block_with_one_draft_is_the_token_rule_bit_for_bit(form):
    # n = 1: h_1 = w_1 = min(1, p / q), the same test on the same uniform, the same residual stream
    gen = torch.Generator().manual_seed(1)
    batch, vocab = 300, 12
    target = torch.randn(batch, 4, vocab, generator=gen) * 2
    draft_logits = target[:, :3] + torch.randn(batch, 3, vocab, generator=gen)
    q = torch.softmax(draft_logits, -1)
    drafts = torch.multinomial(q.reshape(-1, vocab), 1, generator=gen).reshape(batch, 3)
    kwargs = {"seeds": torch.arange(batch), "num_draft_tokens": torch.randint(0, 2, (batch,), generator=gen)}
    if form == "logits":
        kwargs["draft_logits"] = draft_logits
    elif form in ("probs", "target-probs"):
        kwargs["draft_probs"] = q
    if form == "target-probs":
        kwargs["target_probs"] = torch.softmax(target, -1)
        target = None
    token, block = (verify(target, drafts, method=m, **kwargs) for m in ("token", "block"))
    assert _same(token, block)
    assert int(block.num_accepted.sum()) > 0 and int((block.num_accepted == 0).sum()) > 0


def test_greedy_rows_follow_the_greedy_rule_under_every_method():
    target, draft = _rows(2, 3, 9)
    batch = 64
    logits = target.expand(batch, 4, 9) + torch.randn(batch, 4, 9, generator=torch.Generator().manual_seed(3))
    top = logits.argmax(-1)[:, :3]
    drafts = torch.where(torch.rand(batch, 3, generator=torch.Generator().manual_seed(4)) < 0.7, top, 0)
    temperatures = torch.tensor([0.0, 1.0]).repeat(batch // 2)
    common = {"draft_logits": draft.expand(batch, 3, 9).contiguous(), "seeds": torch.arange(batch),
              "temperatures": temperatures}
    token = verify(logits, drafts, **common)
    for method in ("block", "typical", "relaxed"):
        other = verify(logits, drafts, method=method, **common)
        greedy = temperatures == 0
        assert torch.equal(other.output_token_ids[greedy], token.output_token_ids[greedy]), method
        greedy_mode = verify(logits, drafts, mode="greedy", method=method)
        assert _same(greedy_mode, verify(logits, drafts, mode="greedy")), method


def _joint_two_slots(p: torch.Tensor, q: torch.Tensor, residual_weight_one: bool = False) -> torch.Tensor:
    # the joint law of the first two tokens of the sequence (slots the step does not emit are continued
    # by fresh draws from the target), for block verification with n = 2 and drafts drawn from q
    vocab = p.shape[1]
    joint = torch.zeros(vocab, vocab, dtype=torch.float64)
    for x0, x1 in itertools.product(range(vocab), range(vocab)):
        chance = q[0, x0] * q[1, x1]
        law = oracle.block_step_distribution([(p[0], q[0], x0), (p[1], q[1], x1)], p[2])
        count = law.num_accepted_probs
        w1 = 1.0 if residual_weight_one else oracle.block_weights([float(p[0, x0])], [float(q[0, x0])])[1]
        first = oracle.normalised((p[0] - q[0]).clamp_min(0.0))
        second = oracle.normalised((w1 * p[1] - q[1]).clamp_min(0.0))
        joint += chance * count[0] * torch.outer(first, p[1])
        joint[x0] += chance * count[1] * second
        joint[x0, x1] += chance * count[2]
    return joint


def test_block_law_is_the_target_law_jointly_and_the_port_bug_is_not():
    gen = torch.Generator().manual_seed(6)
    p = torch.softmax(torch.randn(3, 5, generator=gen, dtype=torch.float64) * 2, -1)
    q = torch.softmax(torch.randn(2, 5, generator=gen, dtype=torch.float64) * 2, -1)
    want = torch.outer(p[0], p[1])
    assert torch.allclose(_joint_two_slots(p, q), want, atol=1e-12)
    # the residual max(p - q, 0) at the stopping row (vllm-ascend #7807): not the target's law
    assert float((_joint_two_slots(p, q, residual_weight_one=True) - want).abs().sum()) > 1e-3


def test_block_accepts_at_least_as_much_as_token_and_more_past_one_draft():
    # Sun et al. 2024, theorem 2: block verification is optimal among valid verifications, so E[A] is at
    # least the token rule's; equal for one draft (the same rule) and for q = p (both accept everything)
    gen = torch.Generator().manual_seed(7)
    for _ in range(60):
        n = int(torch.randint(1, 4, (1,), generator=gen))
        vocab = int(torch.randint(2, 7, (1,), generator=gen))
        scale = float(torch.rand(1, generator=gen)) * 3 + 0.1
        p = torch.softmax(torch.randn(n + 1, vocab, generator=gen, dtype=torch.float64) * scale, -1)
        q = torch.softmax(torch.randn(n, vocab, generator=gen, dtype=torch.float64) * scale, -1)
        token = oracle.expected_accepted(oracle.sampled_step_law("token", p, q)[1])
        block_emit, block_accept = oracle.sampled_step_law("block", p, q)
        block = oracle.expected_accepted(block_accept)
        assert torch.allclose(block_emit, p, atol=1e-12)  # exact: every slot follows p
        if n == 1:
            assert block == pytest.approx(token, abs=1e-12)
        else:
            assert block > token + 1e-9, (n, vocab, block, token)
        same = oracle.expected_accepted(oracle.sampled_step_law("block", p, p[:n].clone())[1])
        assert same == pytest.approx(n, abs=1e-9)


def test_block_with_one_hot_drafts_has_the_token_rules_law():
    # a fixed draft reaches row i with probability at most prod p_j(x_j), which both rules reach
    gen = torch.Generator().manual_seed(16)
    for _ in range(10):
        target = torch.randn(4, 6, generator=gen) * 1.5
        drafts = torch.randint(0, 6, (3,), generator=gen)
        token, block = (oracle.step_distribution(mode="probabilistic", target_logits=target, draft_token_ids=drafts,
                                                 num_draft_tokens=3, method=m) for m in ("token", "block"))
        assert torch.allclose(token.num_accepted_probs, block.num_accepted_probs, atol=1e-12)
        assert torch.allclose(token.emit_probs, block.emit_probs, atol=1e-12)


def test_lossy_methods_leave_the_target_law():
    p = torch.tensor([[0.4, 0.35, 0.25], [0.5, 0.3, 0.2]], dtype=torch.float64)
    q = torch.tensor([[0.1, 0.7, 0.2]], dtype=torch.float64)  # x = 1: q > p, within the margin of the top
    for method in ("typical", "relaxed"):
        emit, accept = oracle.sampled_step_law(method, p, q)
        assert float(0.5 * (emit[0] - p[0]).abs().sum()) > 0.05, method
        assert float(accept[0]) > oracle.sampled_step_law("token", p, q)[1][0]
    # typical accepts x iff P(x) > min(0.09, 0.3 exp(-H)): here H = 1.08 nats, threshold 0.102 -> 0.09
    law = oracle.step_distribution(mode="probabilistic", target_probs=p, draft_token_ids=torch.tensor([2]),
                                   num_draft_tokens=1, draft_probs=q, method="typical")
    assert float(law.accept_probs[0]) == 1.0


def _count_pvalue(result, law) -> float:
    import scipy.stats

    observed = torch.bincount(result.num_accepted.to(torch.int64), minlength=law.num_accepted_probs.numel())
    expected = law.num_accepted_probs * result.num_accepted.numel()
    keep = expected > 0
    assert int(observed[~keep].sum()) == 0, "an accepted count the law rules out"
    if int(keep.sum()) < 2:
        return 1.0  # one count possible (typical acceptance has no randomness): nothing more to test
    return float(scipy.stats.chisquare(observed[keep].double(), expected[keep]).pvalue)


@pytest.mark.parametrize("method", ["block", "typical", "relaxed"])
@pytest.mark.parametrize("form", ["logits", "probs", "one-hot", "target-probs"])
def test_reference_follows_the_oracle_with_fixed_drafts(method, form, chi_square):
    num_spec, vocab, n = 3, 8, 20000
    target, draft_logits = _rows(8, num_spec, vocab, scale=1.2, noise=0.8)
    q = torch.softmax(draft_logits, -1)
    p = torch.softmax(target[:num_spec], -1)
    drafts = torch.where(q > p, p / q, 2.0).sub(0.5).abs().argmin(-1)  # accepted about half the time
    given = {"logits": {"draft_logits": draft_logits}, "probs": {"draft_probs": q}, "one-hot": {},
             "target-probs": {"draft_logits": draft_logits}}[form]
    law_target = {"target_probs": torch.softmax(target, -1)} if form == "target-probs" else {"target_logits": target}
    law = oracle.step_distribution(mode="probabilistic", draft_token_ids=drafts, num_draft_tokens=num_spec,
                                   method=method, **law_target, **given)
    expand = {k: v.expand(n, *v.shape).contiguous() for k, v in {**law_target, **given}.items()}
    result = verify(expand.pop("target_logits", None), drafts.expand(n, num_spec).contiguous(), method=method,
                    seeds=torch.arange(n), **expand)
    assert _count_pvalue(result, law) > ALPHA
    for slot in range(num_spec + 1):
        reached = result.num_accepted >= slot
        tokens = result.output_token_ids[reached, slot]
        if tokens.numel() >= 50:
            assert chi_square(torch.bincount(tokens, minlength=vocab), law.emit_probs[slot]) > ALPHA, slot


def test_block_reference_with_drafts_from_q_ragged_and_invalid(chi_square):
    num_spec, vocab, n = 3, 6, 30000
    target, draft_logits = _rows(9, num_spec, vocab, scale=1.0, noise=1.2)
    p = torch.softmax(target.double(), -1)
    q = torch.softmax(draft_logits.double(), -1)
    drafts = oracle.sample_drafts(q, n, seed=10)
    counts = torch.arange(n, dtype=torch.int32) % (num_spec + 1)
    drafts[counts == 3, 1] = -1  # an invalid id: the block ends at row 1 for these requests
    result = verify(target.expand(n, 4, vocab).contiguous(), drafts, draft_logits=draft_logits.expand(n, 3, vocab)
                    .contiguous(), num_draft_tokens=counts, seeds=torch.arange(n), method="block")
    assert int((result.num_accepted > counts).sum()) == 0
    invalid = counts == 3
    assert int((result.num_accepted[invalid] > 1).sum()) == 0
    for count in range(num_spec):  # a block of `count` drafts: the law of a request with n = count
        mine = counts == count
        emit, accept = oracle.sampled_step_law("block", p[:count + 1], q[:count])
        sub = result.map(lambda t, mine=mine: t[mine])
        want = torch.cat([torch.ones(1, dtype=torch.float64), torch.cumprod(accept, 0)])
        want = want - torch.cat([want[1:], torch.zeros(1, dtype=torch.float64)])
        observed = torch.bincount(sub.num_accepted.to(torch.int64), minlength=count + 1)
        assert chi_square(observed, want) > ALPHA, count
        for slot in range(count + 1):
            tokens = sub.output_token_ids[sub.num_accepted >= slot, slot]
            assert chi_square(torch.bincount(tokens, minlength=vocab), emit[slot]) > ALPHA, (count, slot)


def test_block_under_truncation_reads_the_cut_rows(chi_square):
    num_spec, vocab, n = 2, 10, 20000
    target, draft_logits = _rows(11, num_spec, vocab, scale=1.0, noise=0.7)
    drafts = torch.softmax(draft_logits, -1).argmax(-1)
    knobs = {"top_k": 6, "top_p": 0.9}
    assert oracle.truncation_is_exact(target_logits=target, num_draft_tokens=num_spec, draft_logits=draft_logits,
                                      **knobs)
    law = oracle.step_distribution(mode="probabilistic", target_logits=target, draft_token_ids=drafts,
                                   num_draft_tokens=num_spec, draft_logits=draft_logits, method="block", **knobs)
    from specbench import SamplingParams

    result = verify(target.expand(n, 3, vocab).contiguous(), drafts.expand(n, 2).contiguous(),
                    draft_logits=draft_logits.expand(n, 2, vocab).contiguous(), seeds=torch.arange(n),
                    sampling=SamplingParams(top_k=6, top_p=0.9), method="block")
    assert _count_pvalue(result, law) > ALPHA
    for slot in range(num_spec + 1):
        tokens = result.output_token_ids[result.num_accepted >= slot, slot]
        assert chi_square(torch.bincount(tokens, minlength=vocab), law.emit_probs[slot]) > ALPHA, slot


def test_methods_keep_the_random_stream_contract():
    # a request's output depends on its own inputs, seed and position only: not on its batch
    gen = torch.Generator().manual_seed(12)
    batch, vocab = 40, 7
    target = torch.randn(batch, 4, vocab, generator=gen)
    draft_logits = target[:, :3] + torch.randn(batch, 3, vocab, generator=gen)
    drafts = torch.randint(0, vocab, (batch, 3), generator=gen)
    common = {"seeds": torch.arange(batch) * 7, "positions": torch.arange(batch) + 3}
    for method in ("block", "typical", "relaxed"):
        whole = verify(target, drafts, draft_logits=draft_logits, method=method, **common)
        order = torch.randperm(batch, generator=gen)
        shuffled = verify(target[order], drafts[order], draft_logits=draft_logits[order], method=method,
                          **{k: v[order] for k, v in common.items()})
        assert _same(whole.map(lambda t, order=order: t[order]), shuffled), method


def test_relaxed_accepts_every_draft_the_token_rule_accepts():
    gen = torch.Generator().manual_seed(13)
    batch, vocab = 500, 6
    target = torch.randn(batch, 4, vocab, generator=gen) * 0.5  # flat rows: the entropy gate opens
    draft_logits = torch.randn(batch, 3, vocab, generator=gen)
    drafts = torch.randint(0, vocab, (batch, 3), generator=gen)
    common = {"draft_logits": draft_logits, "seeds": torch.arange(batch)}
    token, relaxed = verify(target, drafts, **common), verify(target, drafts, method="relaxed", **common)
    assert bool((relaxed.num_accepted >= token.num_accepted).all())
    assert int(relaxed.num_accepted.sum()) > int(token.num_accepted.sum())


def test_triton_refuses_what_it_has_no_kernel_for():
    pytest.importorskip("triton")
    target, draft = _rows(14, 2, 8)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    common = {"draft_logits": draft[None].to(device), "seeds": torch.zeros(1, dtype=torch.int64, device=device),
              "backend": "triton"}
    drafts = torch.zeros(1, 2, dtype=torch.int64, device=device)
    with pytest.raises(SpecbenchError, match="triton backend has no kernel for the typical method"):
        verify(target[None].to(device), drafts, method="typical", **common)
    from specbench import SamplingParams

    with pytest.raises(SpecbenchError, match="triton block kernel does not take truncation"):
        verify(target[None].to(device), drafts, method="block", sampling=SamplingParams(top_k=3), **common)


BLOCK_FORMS = ["logits", "probs", "one-hot", "target-probs", "target-probs, draft probs", "target-probs, one-hot"]


def _block_case(form: str, batch: int, vocab: int, seed: int, peaked: bool) -> tuple:
    """(target logits or None, drafts, verify keywords) of a block call in one draft/target form: drafts from q
    (with ``peaked``: half the requests draft every row's argmax, made likely), invalid ids, an invalid row, and
    greedy, other-temperature and NaN-temperature requests."""
    num_spec = 3
    gen = torch.Generator().manual_seed(seed)
    target = torch.randn(batch, num_spec + 1, vocab, generator=gen) * (4 if peaked else 1.5)
    draft_logits = target[:, :num_spec] + torch.randn(batch, num_spec, vocab, generator=gen)
    q = torch.softmax(draft_logits, -1)
    drafts = torch.multinomial(q.reshape(-1, vocab), 1, generator=gen).reshape(batch, num_spec)
    top = target[:, :num_spec].argmax(-1)
    if peaked:
        drafts[::2] = top[::2]
        target[:, :num_spec].scatter_add_(-1, top[..., None], torch.full((batch, num_spec, 1), 6.0))
    elif "one-hot" in form:  # a one-hot draft is accepted with p(x): mostly the target's top token then
        drafts = torch.where(torch.rand(batch, num_spec, generator=gen) < 0.8, top, drafts)
    drafts[0, 0], drafts[1, 2] = -1, vocab  # invalid ids
    target[2, 1] = float("-inf")  # an invalid row inside the block
    temperatures = torch.ones(batch)
    temperatures[3], temperatures[4], temperatures[5] = 0.0, 0.7, float("nan")  # greedy, another T, invalid
    kwargs = {"seeds": torch.arange(batch) * 3, "positions": torch.arange(batch) + 2, "temperatures": temperatures,
              "num_draft_tokens": torch.randint(0, num_spec + 1, (batch,), generator=gen, dtype=torch.int32),
              "check_values": False}
    if "draft probs" in form or form == "probs":
        kwargs["draft_probs"] = q
    elif form in ("logits", "target-probs"):
        kwargs["draft_logits"] = draft_logits
    if form.startswith("target-probs"):
        kwargs["target_probs"] = torch.softmax(target, -1)
        target = None
    return target, drafts, kwargs


def _triton_block(target, drafts, kwargs, strategy: str):
    launch = pytest.importorskip("specbench.kernels.launch")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    moved = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
    with launch.strategy(strategy):
        return verify(None if target is None else target.to(device), drafts.to(device), method="block",
                      backend="triton", **moved).map(torch.Tensor.cpu)


@pytest.mark.parametrize("form", BLOCK_FORMS)
def test_triton_block_kernel_equals_the_reference(form):
    # one program per request (specbench/kernels/block.py), under the interpreter on a CPU: tiny shapes
    target, drafts, kwargs = _block_case(form, batch=20, vocab=37, seed=15, peaked=False)
    want = verify(target, drafts, method="block", backend="torch", **kwargs)
    assert _same(_triton_block(target, drafts, kwargs, "sequential"), want)
    assert 0 < int(want.num_accepted.sum()) < 20 * 3


@pytest.mark.parametrize("strategy", ["sequential", "split"])
def test_hostile_draft_probabilities_under_block_are_read_cleaned(strategy):
    # -inf, negative, NaN, +inf and above-1 draft probabilities: block verification on the reference and on both
    # kernel paths gives what the call with the contract's cleaned values gives, bit for bit
    from conftest import hostile_draft_probs

    target, drafts, kwargs = _block_case("probs", batch=20, vocab=37, seed=16, peaked=False)
    kwargs["draft_probs"], cleaned = hostile_draft_probs(kwargs["draft_probs"], drafts, seed=5)
    want = verify(target, drafts, method="block", backend="torch", **{**kwargs, "draft_probs": cleaned})
    assert _same(verify(target, drafts, method="block", backend="torch", **kwargs), want)
    assert _same(_triton_block(target, drafts, kwargs, strategy), want)
    assert 0 < int(want.num_accepted.sum()) < 20 * 3


def _poisoned_scratch(monkeypatch):
    # the launcher's scratch comes fresh and poisoned (NaN floats, 0x5A5A5A5A ints): a slot read before this call
    # wrote it shows up in the tokens (as run_verify does, tests/conftest.py)
    launch = pytest.importorskip("specbench.kernels.launch")

    def poisoned(shape, dtype, device):
        return torch.full(shape, float("nan") if dtype.is_floating_point else 0x5A5A5A5A, dtype=dtype, device=device)

    monkeypatch.setattr(launch, "_alloc_scratch", poisoned)
    launch._scratch_cache.clear()
    return launch


@pytest.mark.parametrize(("form", "skip_from"), [(form, 1) for form in BLOCK_FORMS]
                         + [(form, 10**9) for form in ("logits", "target-probs")])
def test_triton_block_split_path_equals_the_reference(form, skip_from, monkeypatch):
    # the split path (the rows' statistics; each row's residual mass, then A; the terminal row's race), forced, on
    # poisoned scratch, as from BLOCK_SKIP_MIN_BATCH requests (the stop tests in each row's last program: one request
    # in each form stops at row 2 above a row 1 its uniform leaves to its mass, which is then skipped) and as below it
    # (A in the request's last program); 2100 tokens give three slices a row under the interpreter. Every counter
    # (arrivals, the passed row, the rows' arrivals) is left at zero.
    launch = _poisoned_scratch(monkeypatch)
    monkeypatch.setattr(launch, "BLOCK_SKIP_MIN_BATCH", skip_from)
    target, drafts, kwargs = _block_case(form, batch=12, vocab=2100, seed=17, peaked=True)
    want = verify(target, drafts, method="block", backend="torch", **kwargs)
    assert _same(_triton_block(target, drafts, kwargs, "split"), want)
    accepted, num_drafts = want.num_accepted, kwargs["num_draft_tokens"]
    # requests that stop before, inside and at the end of their blocks
    assert bool((accepted == 0).any() and ((accepted > 0) & (accepted < num_drafts)).any())
    assert bool(((accepted == num_drafts) & (num_drafts > 0)).any())
    assert all(int(counters.abs().sum()) == 0 for counters in launch._arrivals.values())


def _count_loads(monkeypatch, values: list[float]) -> dict[str, int]:
    """A counter (``["count"]``) of the float32 loads that return one of ``values``, under the Triton interpreter,
    for the rest of the test (a skip on a machine that runs the kernels on its GPU)."""
    if torch.cuda.is_available():
        pytest.skip("counts the interpreter's loads; this machine runs the kernels on its GPU")
    from triton.runtime import interpreter

    loads = {"count": 0}
    original = interpreter.InterpreterBuilder.create_masked_load
    wanted = np.float32(values)

    def counted(self, ptrs, mask, other, cache_policy, is_volatile):
        value = original(self, ptrs, mask, other, cache_policy, is_volatile)
        if value.data.dtype == np.float32:
            read = value.data[np.broadcast_to(mask.data, value.data.shape)]
            loads["count"] += int(np.isin(read, wanted).sum())
        return value

    monkeypatch.setattr(interpreter.InterpreterBuilder, "create_masked_load", counted)
    return loads


# The clamp h_i = min(r_i / (r_i + 1 - w_i), w_i) (verification.py, "block"): one request's rows (target and draft
# probabilities as given) where row 1 sums far past 1. Row 0 gives w_1 = p_0(x_0) / q_0(x_0) = 0.5; row 1 rejects
# its draft (p_1(x_1) = 0, so w_2 = 0 and test 2 fails) and holds SENTINEL entries in its target row and
# DRAFT_SENTINEL in its draft row: r_1 = (V - 1) (w_1 SENTINEL - DRAFT_SENTINEL), a ratio near 1, so the paper's
# test 1 passes for most u_0 while the clamped one passes iff u_0 < w_1 = 0.5. The sentinels (m / 1024) are loaded
# only when row 1 is read whole.
SENTINEL, DRAFT_SENTINEL = 833 / 1024, 31 / 1024


def _clamp_case(vocab: int, seeds: list[int]) -> tuple[torch.Tensor, torch.Tensor, dict]:
    p = torch.zeros(3, vocab)
    q = torch.zeros(2, vocab)
    p[0, :4] = torch.tensor([0.5, 0.125, 0.25, 0.125])
    q[0, :4] = 0.25
    p[1, 1:] = SENTINEL
    q[1, 0], q[1, 1:] = 1.0, DRAFT_SENTINEL
    p[2] = 1.0 / vocab
    batch = len(seeds)
    drafts = torch.tensor([[1, 0]] * batch)
    kwargs = {"target_probs": p.expand(batch, 3, vocab).contiguous(),
              "draft_probs": q.expand(batch, 2, vocab).contiguous(), "seeds": torch.tensor(seeds),
              "positions": torch.full((batch,), 5)}
    return p, q, {"draft_token_ids": drafts, **kwargs}


def _clamp_seeds(vocab: int) -> tuple[list[int], list[int], float]:
    # seeds whose u_0 the clamp decides (w_1 <= u_0 < the paper's h_1: the row is not needed) and seeds whose
    # test 1 passes either way (u_0 < w_1: the row is read); and the paper's h_1
    from specbench import rng

    mass = (vocab - 1) * (0.5 * SENTINEL - DRAFT_SENTINEL)
    ratio = mass / (mass + 0.5)
    u = rng.uniform(torch.arange(400), torch.full((400,), 5), rng.ACCEPT)
    decided = [int(s) for s in torch.nonzero((u >= 0.5) & (u < ratio))[:3, 0]]
    passing = [int(s) for s in torch.nonzero(u < 0.5)[:3, 0]]
    return decided, passing, ratio


def test_block_stop_probability_is_clamped_at_the_weight():
    vocab = 40
    decided, passing, ratio = _clamp_seeds(vocab)
    p, q, call = _clamp_case(vocab, decided + passing)
    law = oracle.step_distribution(mode="probabilistic", target_probs=p, draft_token_ids=call["draft_token_ids"][0],
                                   num_draft_tokens=2, draft_probs=q, method="block")
    # P(A = 1) = h_1 (1 - h_2), h_2 = w_2 = 0: the clamped h_1 = w_1, not the paper's ratio
    assert ratio > 0.9 and len(decided) == len(passing) == 3
    assert law.num_accepted_probs.tolist() == pytest.approx([0.5, 0.5, 0.0], abs=1e-12)
    want = verify(backend="torch", method="block", **call)
    assert want.num_accepted.tolist() == [0] * len(decided) + [1] * len(passing)
    target, drafts = call.pop("target_probs"), call.pop("draft_token_ids")
    for strategy in ("sequential", "split"):
        assert _same(_triton_block(None, drafts, {"target_probs": target, **call}, strategy), want), strategy


def test_triton_block_does_not_read_a_row_its_uniform_decides(monkeypatch):
    # u_0 >= w_1 fails test 1 whatever r_1: neither kernel path loads row 1 beyond its draft's entry (counted by
    # the loads that return a sentinel, under the interpreter); a row whose test may pass is read (the count works)
    launch = pytest.importorskip("specbench.kernels.launch")
    loads = _count_loads(monkeypatch, [SENTINEL, DRAFT_SENTINEL])
    vocab = 1100  # three slices of a row on the split path
    decided, passing, _ratio = _clamp_seeds(vocab)
    for seeds, accepted in ((decided, 0), (passing[:1], 1)):
        _p, _q, call = _clamp_case(vocab, seeds)
        drafts = call.pop("draft_token_ids")
        for strategy in ("sequential", "split"):
            loads["count"] = 0
            with launch.strategy(strategy):
                got = verify(None, drafts, method="block", backend="triton", **call)
            assert got.num_accepted.tolist() == [accepted] * len(seeds)
            assert (loads["count"] > 0) == (accepted == 1), (strategy, accepted, loads)


# One request's rows where a stop test is decided by its residual mass (target and draft probabilities, V tokens,
# drafts [0, 0, 1]): row 0 is uniform in both (w_1 = 1, and test 1 passes: r_1 > 0 makes h_1 = 1); row 1 gives w_2 =
# p_1(x_1) / q_1(x_1) = 0.5 and holds 0.75 / (V - 1) everywhere else (a value no other row holds); row 2 rejects its
# draft (p_2(x_2) = 0: w_3 = 0, test 3 fails) and leaves r_2 = sum max(p_2 / 2 - q_2, 0) = 0.36 at V = 1100 (on 100
# tokens, 50 at either end of the row), so test
# 2 passes iff u_1 < h_2 = r_2 / (r_2 + 1 / 2) (0.42; with r_2 halved, 0.26; 0.45 at V = 3000). A = 2 then, else 1.
def _row1_rest(vocab: int) -> float:
    return 0.75 / (vocab - 1)


def _mass_case(seeds: list[int], vocab: int = 1100) -> dict:
    p = torch.zeros(4, vocab)
    q = torch.zeros(3, vocab)
    p[0], q[0] = 1.0 / vocab, 1.0 / vocab
    p[1, 0], p[1, 1:] = 0.25, _row1_rest(vocab)
    q[1, 0], q[1, 1:] = 0.5, 0.5 / (vocab - 1)
    # r_2's mass half in the first slice, half in the last (a test on one slice's partial sees half of it)
    p[2, 52:-50] = 0.1 / (vocab - 102)
    p[2, 2:52], p[2, -50:] = 0.45 / 50, 0.45 / 50
    q[2] = 1.0 / vocab
    p[3] = 1.0 / vocab
    batch = len(seeds)
    drafts = torch.tensor([[0, 0, 1]] * batch)
    return {"draft_token_ids": drafts, "target_probs": p.expand(batch, 4, vocab).contiguous(),
            "draft_probs": q.expand(batch, 3, vocab).contiguous(), "seeds": torch.tensor(seeds),
            "positions": torch.full((batch,), 3)}


def test_triton_block_stop_tests_read_the_residual_mass(monkeypatch):
    # 24 requests on the same rows, each with its own uniforms: which pass test 2 depends on r_2 itself (not only
    # on whether it is positive), so a mass summed wrong, or a test run on one slice's partial, moves some. The split
    # path with the backward pass in the request's last program, and with each stop test in its row's last program
    # (skipping rows below a passed test); one program per request reads its masses as before (the clamp tests).
    launch = pytest.importorskip("specbench.kernels.launch")
    call = _mass_case(list(range(24)))
    want = verify(backend="torch", method="block", **call)
    assert 3 < int((want.num_accepted == 2).sum()) < 21 and set(want.num_accepted.tolist()) == {1, 2}
    drafts = call.pop("draft_token_ids")
    for skip_from in (10**9, 1):
        monkeypatch.setattr(launch, "BLOCK_SKIP_MIN_BATCH", skip_from)
        assert _same(_triton_block(None, drafts, call, "split"), want), skip_from


def test_triton_block_split_path_skips_rows_below_a_passed_test(monkeypatch):
    # The split path (skipping, as from BLOCK_SKIP_MIN_BATCH requests) reads no residual mass below a row whose stop
    # test passed, once the pass is known: its masses kernel runs row by row from the last, so under the interpreter
    # (one program after another) every program of row 1 starts after row 2's test. Counted by the loads of row 1's
    # own value: none with A = 2 (row 2 passes; the race reads row 2), its mass and its race with A = 1.
    launch = pytest.importorskip("specbench.kernels.launch")
    from specbench import rng

    vocab = 3000  # three slices a row
    loads = _count_loads(monkeypatch, [_row1_rest(vocab)])
    monkeypatch.setattr(launch, "BLOCK_SKIP_MIN_BATCH", 1)
    u = rng.uniform(torch.arange(200), torch.full((200,), 4), rng.ACCEPT)  # u_1 of each seed (position 3 + 1)
    seeds = {2: int(torch.nonzero(u < 0.3)[0, 0]), 1: int(torch.nonzero((u > 0.47) & (u < 0.5))[0, 0])}
    block, _warps = launch._launch_shape(vocab, torch.device("cpu"), True, "probabilistic", 1)
    assert launch._slices(3, vocab, block, torch.device("cpu"))[0] == 3
    for accepted, seed in seeds.items():
        call = _mass_case([seed], vocab)
        drafts = call.pop("draft_token_ids")
        loads["count"] = 0
        with launch.strategy("split"):
            got = verify(None, drafts, method="block", backend="triton", **call)
        assert got.num_accepted.tolist() == [accepted]
        assert loads["count"] == (0 if accepted == 2 else 2 * (vocab - 1)), (accepted, loads)

# --- specbench verify --method ----------------------------------------------------------------------------------

def _suite(name: str, method: str, samples: int = 6000):
    from specbench.exactness import Suite
    from specbench.implementations import resolve

    return Suite(resolve(name), torch.device("cpu"), ["probabilistic"], samples=samples, seed=1, method=method).run()


@pytest.mark.parametrize("name", ["torch", "textbook"])
def test_verify_block_passes_correct_block_samplers(name):
    checks = _suite(name, "block")
    assert not [(c.name, c.detail) for c in checks if c.verdict == "FAIL"]
    assert sum(c.verdict == "pass" and c.test == "chi-square" for c in checks) >= 30


def test_verify_block_fails_the_token_residual_port_bug():
    checks = _suite("control-block-token-residual", "block")
    failed = [c.name for c in checks if c.verdict == "FAIL"]
    assert failed and all(name.startswith("token law") for name in failed), failed
    # the same control is a correct token sampler: the token method passes it
    assert not [c.name for c in _suite("control-block-token-residual", "token", 3000) if c.verdict == "FAIL"]


def test_verify_skips_what_an_implementation_does_not_declare():
    checks = _suite("control-onehot-acceptance", "block", 100)
    assert [c.verdict for c in checks] == ["skipped"]
    assert "declares the methods token, not block" in checks[0].detail


def test_verify_reports_lossy_methods_without_failing_them():
    checks = _suite("torch", "relaxed")
    lossy = [c for c in checks if c.verdict == "lossy"]
    assert not [c.name for c in checks if c.verdict == "FAIL"]
    assert len(lossy) == 8 and all(c.detail.startswith("LOSSY (relaxed)") for c in lossy)
    assert max(c.total_variation for c in lossy) > 0.05  # the oracle's distance: not the target's law


def test_verify_command_takes_method(tmp_path):
    from typer.testing import CliRunner

    from specbench.cli import app

    runner = CliRunner()
    bad = runner.invoke(app, ["verify", "--impl", "torch", "--method", "blok"])
    assert bad.exit_code == 2 and "unknown method 'blok'" in bad.output
    caught = runner.invoke(app, ["verify", "--impl", "control-block-token-residual", "--method", "block", "-m",
                                 "probabilistic", "-n", "6000", "--seed", "1", "--json", str(tmp_path / "v.json")])
    assert caught.exit_code == 1, caught.output
    import json

    report = json.loads((tmp_path / "v.json").read_text())
    assert report["implementations"][0]["method"] == "block"
    lossy = runner.invoke(app, ["verify", "--impl", "torch", "--method", "typical", "-m", "probabilistic", "-n",
                                "2000"], env={"COLUMNS": "250"})
    assert lossy.exit_code == 0, lossy.output
    assert "typical is a LOSSY method" in lossy.output
