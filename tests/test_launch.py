"""The Triton launcher's choices: which kernels run, in which shape, and the launch variants' names."""

from __future__ import annotations

import math

import pytest
import torch
import triton

pytest.importorskip("triton")

from conftest import device_for, histogram_scratches

from specbench.errors import SpecbenchError
from specbench.implementations import resolve
from specbench.kernels import launch


@pytest.fixture
def h100(monkeypatch):
    monkeypatch.setattr(launch, "_num_sms", lambda index: 132)
    return torch.device("cuda", 0)


@pytest.mark.parametrize("mode, batch, num_slots, split", [
    ("greedy", 64, 5, True),  # B=64 K=4 V=151936: split 53 against 46 µs at L=3, 53 against 74 all accepted (graph)
    ("greedy", 64, 8, False),  # B=64 K=7: one program per request 1.6x faster at L=3, 1.3x slower all accepted
    ("greedy", 96, 5, False),  # B=96 K=4: one program per request as fast or faster at both
    ("greedy", 512, 8, False),
    ("probabilistic", 33, 5, True),
    ("probabilistic", 64, 8, True),  # B=64 K=7: split 1.3x slower at L=3, 1.5x faster all accepted
    ("probabilistic", 96, 5, False),  # B=96 K=4: one program per request 1.3x faster at L=3, equal all accepted
    ("probabilistic", 128, 8, False),
])
def test_the_split_rule_follows_the_measurements(h100, mode, batch, num_slots, split):
    assert launch._use_split(batch, num_slots, mode, h100) is split


def test_a_forced_strategy_and_the_cpu_ignore_the_table(h100):
    with launch.strategy("split"):
        assert launch._use_split(512, 8, "greedy", h100)
    with launch.strategy("sequential"):
        assert not launch._use_split(1, 2, "greedy", h100)
    assert not launch._use_split(1, 2, "greedy", torch.device("cpu"))


def test_a_batch_given_no_top_k_defers_its_races_on_a_gpu_at_every_batch_size(h100):
    # results/h200-large-batch-race/: the deferred race 1.05x to 1.18x faster at B = 128 to 512, where the batch does
    # not split
    for batch in (8, 128, 512):
        split = launch._use_split(batch, 8, "probabilistic", h100)
        assert launch._defers_races(True, split, h100)
        assert not launch._defers_races(False, split, h100)  # top_k given: the step races over its kept lists
    with launch.strategy("sequential"):
        assert not launch._defers_races(True, False, h100)
    with launch.strategy("split"):
        assert launch._defers_races(True, True, torch.device("cpu"))
    assert not launch._defers_races(True, False, torch.device("cpu"))


def test_small_batches_decide_as_the_table_says(monkeypatch):
    # results/h200-small-batch-decide/: below HISTOGRAM_DECIDE_MIN_BATCH requests, from draft logits decided after the
    # first level with the race after it at B = 1 and 2 and from the bounds with the race after the second level from
    # B = 3; from draft probabilities and one-hot drafts after the first level, race after it; a table row of None
    # leaves every row searched
    from specbench.kernels import truncation

    logits, probs, one_hot = (truncation.DRAFT_LOGITS.value, truncation.DRAFT_PROBS.value, truncation.DRAFT_NONE.value)

    def chosen(draft, batch):
        way = launch._decides("probabilistic", False, draft, True, batch, True)
        return way, launch.bracket_races(way, draft, batch)

    assert [chosen(logits, batch) for batch in (1, 2, 3, 7)] == [("level", 1)] * 2 + [("bounds", 2)] * 2
    assert [chosen(draft, batch) for draft in (probs, one_hot) for batch in (1, 7)] == [("level", 1)] * 4
    assert chosen(probs, launch.HISTOGRAM_DECIDE_MIN_BATCH) == ("bounds", 1)
    monkeypatch.setitem(launch.HISTOGRAM_SMALL_BATCH_DECIDE, probs, ((2, "bounds", 2),))
    assert [chosen(probs, batch) for batch in (1, 2)] == [(None, 0), ("bounds", 2)]
    monkeypatch.setitem(launch.TUNING, "histogram_decide", 2)  # a variant's way: the race as at HISTOGRAM_DECIDE
    assert chosen(logits, 1) == ("bounds", 2)


def test_decisions_fold_into_the_launch_before_them_up_to_eight_requests(monkeypatch):
    # results/h200-decision-fold/: folded, 0.2-0.8 µs faster at B = 1 to 8, 1-3% slower at B = 64 and 256; a launch
    # variant's -fold / -nofold wins at any batch
    assert [launch._decision_fold(batch) for batch in (1, 2, 8, 9, 64)] == [True, True, True, False, False]
    monkeypatch.setitem(launch.TUNING, "decision_fold", 0)
    assert not launch._decision_fold(1)
    monkeypatch.setitem(launch.TUNING, "decision_fold", 1)
    assert launch._decision_fold(512)


def test_the_bracket_race_level_follows_the_measurements(monkeypatch):
    # results/h200-first-level-bound/: from draft logits the race after the second level is the faster at B = 8 and
    # 64, after the first from B = 128; a step whose drafts are not decided first races from no bracket; a launch
    # variant's level wins
    from specbench.kernels import truncation

    logits, probs, one_hot = (truncation.DRAFT_LOGITS.value, truncation.DRAFT_PROBS.value, truncation.DRAFT_NONE.value)
    assert [launch.bracket_races("bounds", logits, batch) for batch in (8, 64, 127, 128, 512)] == [2, 2, 2, 1, 1]
    assert [launch.bracket_races("level", draft, 8) for draft in (probs, one_hot)] == [1, 1]
    assert launch.bracket_races(None, logits, 512) == 0
    monkeypatch.setitem(launch.TUNING, "histogram_race", 2)
    assert launch.bracket_races("bounds", logits, 512) == 2


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the launch of a GPU step")
@pytest.mark.parametrize(("forced", "races"), [("auto", 1), ("sequential", 0)])
def test_a_large_batch_given_top_p_alone_launches_the_deferred_race_on_a_gpu(monkeypatch, forced, races):
    # a batch too large to split (128 requests), given top_p alone: one terminal launch races its rows (none where
    # one program per request is forced), and the tokens are the torch reference's either way
    from specbench.verification import SamplingParams, verify

    launched = []
    terminal = launch._TRUNCATED_TERMINAL

    def counted(*args, **constexprs):
        launched.append(constexprs["DRAFT"])
        return terminal(*args, **constexprs)

    monkeypatch.setattr(launch, "_TRUNCATED_TERMINAL", counted)
    device = torch.device("cuda")
    generator = torch.Generator(device=device).manual_seed(5)
    batch, num_spec, vocab = 128, 3, 3000
    target = torch.randn(batch, num_spec + 1, vocab, generator=generator, device=device) * 3
    drafts = torch.randint(0, vocab, (batch, num_spec), generator=generator, device=device)
    sampling = SamplingParams(temperatures=torch.ones(batch, device=device),
                              top_p=torch.full((batch,), 0.9, device=device))
    inputs = {"draft_token_ids": drafts, "draft_logits": target[:, :num_spec] + 0.5 * torch.randn(
                  batch, num_spec, vocab, generator=generator, device=device),
              "num_draft_tokens": torch.full((batch,), num_spec, dtype=torch.int32, device=device),
              "seeds": torch.arange(batch, device=device), "positions": torch.zeros(batch, dtype=torch.int64,
                                                                                      device=device)}
    assert not launch._use_split(batch, num_spec + 1, "probabilistic", device)
    with launch.strategy(forced):
        got = verify(target, sampling=sampling, backend="triton", **inputs)
    assert len(launched) == races
    want = verify(target, sampling=sampling, backend="torch", **inputs)
    assert torch.equal(got.output_token_ids, want.output_token_ids)
    assert torch.equal(got.num_emitted, want.num_emitted)


def _searched_both_ways(monkeypatch, setting: str, call) -> list[tuple]:
    """``call()``'s result and its split histogram search's scratch (fresh, NaN-filled), with the drafts decided from
    the bounds on the split path, the launch variants' ``setting`` 1 and then 0: [(result, scratch), ...]."""
    monkeypatch.setitem(launch.TUNING, "split_search", 1)
    monkeypatch.setitem(launch.TUNING, "histogram_decide", 2)
    runs = []
    for value in (1, 0):
        monkeypatch.setitem(launch.TUNING, setting, value)
        scratches = histogram_scratches(monkeypatch, launch)
        with launch.strategy("split"):
            result = call()
        assert len(scratches) == 1
        runs.append((result, scratches[0]))
    return runs


def _scratch_fields_that_differ(first, second) -> list[str]:
    """The names of the fields of two split histogram searches' scratch that differ in any bit (floats compared as
    their bit patterns: -0 is not +0; where nothing wrote, both hold the fresh scratch's NaN; the candidates' lists
    sorted, as their atomics placed them in any order)."""
    differ = []
    for name in first._fields:
        one, other = getattr(first, name), getattr(second, name)
        if one.is_floating_point():
            one, other = one.view(torch.int32), other.view(torch.int32)
        if name.startswith("candidates"):
            one, other = one.sort().values, other.sort().values
        if not torch.equal(one, other):
            differ.append(name)
    return differ


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the PTX of a GPU build (the interpreter runs tl.exp there)")
@pytest.mark.parametrize("batch", [8, 128])
def test_the_one_instruction_exp_gives_the_histogram_path_the_same_sums_on_a_gpu(monkeypatch, batch):
    # the bounds pass's and the histogram path's summed masses by rows.exp_in_sum (ex2.approx.ftz, FTZ_SUMS) and by
    # tl.exp (-noftz), on rows where most masses lie below 2**-126 (logits spread over hundreds of nats, low
    # temperatures; drafts of no mass in a target and in a draft row): the same tokens and every number of the
    # search's scratch (fresh and NaN-filled each time; the candidates' lists, in the order their atomics gave,
    # sorted), bit for bit (random logits make no chain of exact rounding ties, rows.exp_in_sum) but the sums of
    # slices whose every mass is below 2**-126 (flushed to 0 by the one instruction), the drafts decided
    # from the bounds (batch 8: one program a request, 128: the stop rows, the pass in rounds)
    from specbench.verification import SamplingParams, verify

    device = torch.device("cuda")
    generator = torch.Generator(device=device).manual_seed(11)
    num_spec, vocab = 3, 20000
    target = torch.randn(batch, num_spec + 1, vocab, generator=generator, device=device) * 40
    drafts = target[:, :num_spec].argmax(-1)
    drafts[::2, 1] = torch.randint(0, vocab, (len(range(0, batch, 2)),), generator=generator, device=device)
    temperatures = torch.linspace(0.3, 1.0, batch, device=device)
    draft_logits = target[:, :num_spec] + 2.0 * torch.randn(batch, num_spec, vocab, generator=generator, device=device)
    target[1, 0, drafts[1, 0]] = -math.inf  # (drafts of no mass: their bounds need no sums)
    draft_logits[2, 0, drafts[2, 0]] = -math.inf
    tempered = target.double() / temperatures[:, None, None]
    assert bool(((tempered - tempered.amax(-1, keepdim=True)) < -88.0).double().mean() > 0.5)  # (e**-88 < 2**-126)
    sampling = SamplingParams(temperatures=temperatures, top_p=torch.full((batch,), 0.95, device=device))
    inputs = {"draft_token_ids": drafts, "draft_logits": draft_logits,
              "num_draft_tokens": torch.full((batch,), num_spec, dtype=torch.int32, device=device),
              "seeds": torch.arange(batch, device=device), "positions": torch.zeros(batch, dtype=torch.int64,
                                                                                      device=device)}
    (fast, fast_scratch), (plain, plain_scratch) = _searched_both_ways(
        monkeypatch, "histogram_ftz_sums", lambda: verify(target, sampling=sampling, backend="triton", **inputs))
    assert torch.equal(fast.output_token_ids, plain.output_token_ids)
    assert torch.equal(fast.num_emitted, plain.num_emitted)
    assert _scratch_fields_that_differ(fast_scratch, plain_scratch) == ["radix_part_f"]
    # a slice's own sums: where its every term lies below 2**-126, 0 against the sum of those terms (rows.exp_in_sum),
    # at most a slice's tokens times 2**-126; the rows' sums hold 1 and agree
    assert bool((fast_scratch.radix_part_f.nan_to_num(7.0) - plain_scratch.radix_part_f.nan_to_num(7.0)).abs()
                .le(vocab * 2.0**-126).all())
    assert bool(fast_scratch.decided.view(-1, 3)[:batch, 0].gt(0).any())  # (drafts were decided from the bounds)


@pytest.mark.parametrize("target_form", ["logits", "probs"])
@pytest.mark.parametrize("batch", [8, 128])
def test_predicated_adds_give_the_histogram_path_the_same_sums(monkeypatch, batch, target_form):
    # the bounds pass's sums above each depth and ahead of the draft, and the search's masses before the window, added
    # by rows.add_if_above / add_if_ahead (-pred) and by a select and an add (-nopred), and the first level's mass in
    # play with no test, on rows with tokens tied with the draft before and after it, drafts of no mass, and invalid
    # draft ids: the same tokens and every number of the search's scratch (fresh and NaN-filled each time; the
    # candidates' lists sorted), bit for bit: the same additions in the same order (batch 8: one program a request,
    # 128: the stop rows, the pass in rounds). On a GPU the inline PTX; under the interpreter (batch 8, a smaller
    # vocabulary), which adds by tl.where, the first level's untested add and the plumbing
    from specbench.verification import SamplingParams, verify

    device = device_for("triton")
    if device.type != "cuda" and batch > 8:
        pytest.skip("the interpreter takes batch 8 (the suite's time)")
    generator = torch.Generator(device=device).manual_seed(12)
    num_spec, vocab = 3, (20000 if device.type == "cuda" else 1200)
    target = torch.randn(batch, num_spec + 1, vocab, generator=generator, device=device) * 3
    drafts = target[:, :num_spec].argmax(-1)
    drafts[::2, 1] = torch.randint(100, vocab - 100, (len(range(0, batch, 2)),), generator=generator, device=device)
    drafts[3, 2] = vocab + 5  # (an invalid id)
    for b in range(0, batch, 3):  # tokens tied with the draft's value, before and after it in the row
        for r in range(num_spec):
            x = int(drafts[b, r]) % vocab
            target[b, r, [max(x - 7, 0), min(x + 9, vocab - 1)]] = target[b, r, x].clone()
    draft_logits = target[:, :num_spec] + 0.5 * torch.randn(batch, num_spec, vocab, generator=generator, device=device)
    for b in range(1, batch, 3):  # and in draft rows
        for r in range(num_spec):
            x = int(drafts[b, r]) % vocab
            draft_logits[b, r, [max(x - 5, 0), min(x + 11, vocab - 1)]] = draft_logits[b, r, x].clone()
    target[1, 0, drafts[1, 0]] = -math.inf  # (drafts of no mass)
    draft_logits[2, 0, drafts[2, 0]] = -math.inf
    temperatures = torch.linspace(0.5, 1.0, batch, device=device)
    sampling = SamplingParams(temperatures=temperatures, top_p=torch.full((batch,), 0.95, device=device))
    inputs = {"draft_token_ids": drafts, "draft_logits": draft_logits,
              "num_draft_tokens": torch.full((batch,), num_spec, dtype=torch.int32, device=device),
              "seeds": torch.arange(batch, device=device), "positions": torch.zeros(batch, dtype=torch.int64,
                                                                                      device=device)}
    if target_form == "probs":
        inputs["target_probs"] = torch.softmax(target / temperatures[:, None, None], -1)
        sampling = sampling._replace(temperatures=torch.ones(batch, device=device))
    else:
        inputs["target_logits"] = target
    (fast, fast_scratch), (plain, plain_scratch) = _searched_both_ways(
        monkeypatch, "histogram_predicated_sums", lambda: verify(sampling=sampling, backend="triton", **inputs))
    assert torch.equal(fast.output_token_ids, plain.output_token_ids)
    assert torch.equal(fast.num_emitted, plain.num_emitted)
    assert _scratch_fields_that_differ(fast_scratch, plain_scratch) == []
    assert bool(fast_scratch.decided.view(-1, 3)[:batch, 0].gt(0).any())  # (drafts were decided from the bounds)


@pytest.mark.parametrize(("mode", "target_is_probs", "draft_kind", "inline"), [
    ("synthetic", False, 0, True),
    ("probabilistic", True, 0, True),
    ("probabilistic", True, 2, True),
    ("probabilistic", True, 1, False),  # draft logits: each row's statistics give q(x)
    ("probabilistic", False, 2, False),  # target logits: each row's statistics give p(x)
    ("greedy", True, 0, False),  # greedy rows need every row's argmax
])
def test_requests_decided_at_their_drafts_take_one_launch(mode, target_is_probs, draft_kind, inline):
    assert launch.decided_at_drafts(mode, target_is_probs, draft_kind) is inline


@pytest.mark.parametrize(("batch", "shape"), [(64, (8192, 32)), (128, (8192, 32)), (256, (4096, 16)),
                                              (512, (2048, 8)), (4096, (2048, 8))])
def test_greedy_programs_keep_about_4096_warps_in_flight(h100, batch, shape):
    assert launch._launch_shape(151936, h100, False, "greedy", batch) == shape


def test_small_vocabularies_keep_at_least_four_tokens_per_thread(h100):
    assert launch._launch_shape(300, h100, False, "probabilistic", 256) == (512, 4)
    assert launch._launch_shape(100, h100, True, "probabilistic", 1) == (128, 1)


def test_small_and_large_batches_split_into_shorter_programs(h100):
    assert launch._launch_shape(128256, h100, True, "probabilistic", 8) == (512, 4)
    assert launch._launch_shape(128256, h100, True, "probabilistic", 64) == (1024, 4)
    assert launch._launch_shape(128256, h100, True, "probabilistic", 512) == (512, 4)
    assert launch._launch_shape(128256, h100, True, "greedy", 8) == (2048, 8)


def test_the_fused_truncated_step_runs_8_warps_capped_so_that_two_programs_share_a_multiprocessor(h100):
    # B = 256 on an H200, top_k 50 + top_p 0.9 from draft logits (results/h200-register-cap/): 2048 x 4 558.7 µs,
    # 2048 x 8 uncapped 702.7, capped at 128 registers 442.0
    assert launch._truncation_shape(128256, h100, True) == (2048, 8)
    assert launch._truncation_shape(128256, h100) == (2048, 8)  # the prepass's
    assert launch._register_cap(8) == 128
    assert launch._register_cap(16) == 64
    assert launch._register_cap(4) is None  # 256: no cap (a thread has at most 255)


def test_races_are_screened_where_they_are_bound_by_issue(h100):
    assert not launch.screened(8, h100)
    assert launch.screened(64, h100)
    assert launch.screened(1, torch.device("cpu"))  # the interpreter checks the screened races


@pytest.mark.parametrize(("name", "message"), [
    ("triton-sequential-3000x16", "power of two"),
    ("triton-split-1024x64", "warps per program"),
    ("triton-split-1024x4-chunk1000", "multiple of the block"),
    ("triton-sequential-1024x4-chunk2048", "for split variants"),
    ("triton-radix-1000x512x4", "divide the tokens per program"),
    ("triton-radix-4096x512x32", "warps per program"),
    ("triton-histogram-4096x3000x4", "power of two"),
    ("triton-histogram-4096x1024x4-bins8", "parts per level"),
    ("triton-tree-finish300", "1 to 256 slices"),
])
def test_a_launch_variant_name_that_cannot_launch_is_refused(name, message):
    with pytest.raises(SpecbenchError, match=message):
        resolve(name)


def test_a_launch_variant_name_spells_its_shape():
    impl = resolve("triton-split-2048x8-chunk32768")
    assert impl.name == "triton-split-2048x8-chunk32768"
    assert "2048 tokens x 8 warps" in impl.description and "32768" in impl.description
    radix = resolve("triton-radix-8192x1024x8")
    assert "8192 tokens of a row per program, 1024 x 8 warps" in radix.description
    assert "ahead" not in radix.description
    assert "each chunk loaded one iteration ahead" in resolve("triton-radix-4096x512x4-prefetch").description
    assert "the split histogram path" in resolve("triton-histogram-4096x1024x4").description
    assert "parts a level" not in resolve("triton-histogram-4096x1024x4").description
    assert "1024 x 4 warps, 32 parts a level" in resolve("triton-histogram-4096x1024x4-bins32").description
    tree = resolve("triton-tree-finish64-nocand").description
    assert "at most 64 slices" in tree and "by its own pass" in tree
    assert "at most" not in resolve("triton-tree-cand").description
    with pytest.raises(SpecbenchError, match="unknown implementation"):
        resolve("triton-tree")  # neither part: not a variant


def test_a_histogram_variant_takes_its_parts_per_level_inside_its_call(monkeypatch):
    """A triton-histogram-...-binsN variant's parts reach the launcher during its call, and only then."""
    from specbench.verification import SamplingParams

    class Stop(Exception):
        pass

    seen = []

    def levels(bins):
        seen.append(bins)
        raise Stop

    monkeypatch.setattr(launch, "_histogram_levels", levels)
    from conftest import device_for

    generator = torch.Generator().manual_seed(3)
    device = device_for("triton")  # (the GPU where there is one: the interpreter only without)
    kwargs = {"target_logits": torch.randn(2, 3, 50, generator=generator).to(device),
              "draft_token_ids": torch.randint(0, 50, (2, 2), generator=generator).to(device),
              "draft_logits": torch.randn(2, 2, 50, generator=generator).to(device),
              "seeds": torch.arange(2, device=device),
              "sampling": SamplingParams(temperatures=torch.ones(2, device=device),
                                         top_p=torch.full((2,), 0.9, device=device))}
    for name, bins in (("triton-histogram-4096x1024x4-bins32", 32),
                       ("triton-histogram-4096x1024x4", launch.HISTOGRAM_BINS)):
        with pytest.raises(Stop):
            resolve(name).prepare(dict(kwargs))()
        assert seen[-1] == bins
    assert launch.TUNING["histogram_bins"] is None


@pytest.mark.parametrize(("version", "bins", "atomic"), [
    ("3.6.0", 64, True), ("3.7.1", 64, True), ("3.8.0", 256, False), ("3.9.0", 256, False),
    ("3.10.0+git1a2b3c4", 256, False), ("4.0.0", 256, False)])
def test_the_histogram_path_takes_its_parts_by_how_this_triton_counts_a_histogram(version, bins, atomic):
    """Before Triton 3.8 (tl.histogram by warp ballots for every token) the launcher takes 64 parts a level, three
    levels, the last counted by atomics; from 3.8 (a shared-memory atomic that tokens outside the window skip) 256
    parts, two levels, every one by tl.histogram. Whichever this Triton is, the launcher's constants are its."""
    assert launch._histogram_defaults(launch._triton_version(version)) == (bins, atomic)
    assert launch._histogram_levels(bins) == (3 if bins == 64 else 2)
    assert (launch.HISTOGRAM_BINS, launch.HISTOGRAM_ATOMIC) == launch._histogram_defaults(
        launch._triton_version(triton.__version__))


def _recorded_histogram_launches(monkeypatch) -> list[tuple[tuple, dict]]:
    """The split histogram path's launches from here on, each as (grid, constexprs), in a list that fills as they go."""
    seen = []
    split_histogram = launch._SPLIT_HISTOGRAM

    def recorded(grid, args, num_warps, stream, **constexprs):
        seen.append((grid, constexprs))
        return split_histogram(grid, args, num_warps, stream, **constexprs)

    monkeypatch.setattr(launch, "_SPLIT_HISTOGRAM", recorded)
    return seen


def _top_p_call(seed: int, batch: int = 2, num_slots: int = 3, vocab: int = 600) -> dict:
    """verify's keywords for a batch given top_p 0.9 alone (the split histogram path), draft logits, on the Triton
    backend's device."""
    from conftest import device_for

    from specbench.verification import SamplingParams

    generator = torch.Generator().manual_seed(seed)
    device = device_for("triton")
    return {"target_logits": torch.randn(batch, num_slots, vocab, generator=generator).to(device),
            "draft_token_ids": torch.randint(0, vocab, (batch, num_slots - 1), generator=generator).to(device),
            "draft_logits": torch.randn(batch, num_slots - 1, vocab, generator=generator).to(device),
            "seeds": torch.arange(batch, device=device),
            "sampling": SamplingParams(temperatures=torch.ones(batch, device=device),
                                       top_p=torch.full((batch,), 0.9, device=device))}


def test_a_histogram_variant_counts_by_atomics_and_takes_slices_inside_its_call(monkeypatch):
    """triton-histogram-...-atomic counts the last level by atomics (ATOMIC on that launch alone), as the launcher's
    own path does under Triton before 3.8, -noatomic by tl.histogram, as it does from 3.8; -slicesN has each program
    of the slices' launches take N slices (a grid of that many fewer programs), the launcher's own path one. Rows of
    600 tokens: three slices of 256 on the interpreter, two programs at N = 2."""
    launches = _recorded_histogram_launches(monkeypatch)
    vocab = 600
    kwargs = _top_p_call(5, vocab=vocab)
    device = kwargs["target_logits"].device
    slices = -(-vocab // launch._histogram_shape(vocab, device)[0])
    for name, atomic, per_program in (("triton", launch.HISTOGRAM_ATOMIC, 1),
                                      ("triton-histogram-4096x1024x4-noatomic-slices2", False, 2),
                                      ("triton-histogram-4096x1024x4-atomic-slices2", True, 2)):
        launches.clear()
        resolve(name).prepare(dict(kwargs))()
        seen = [(c["STEP"], c["LAST"], c["ATOMIC"], c["SLICES_PER_PROGRAM"], grid) for grid, c in launches]
        levels = [entry for entry in seen if entry[0] == 1]
        assert levels and all(entry[2] == (atomic and entry[1]) for entry in levels)
        assert any(entry[2] for entry in levels) is atomic
        assert all(entry[3] == per_program for entry in seen)
        assert all(entry[4][2] == 2 * -(-slices // per_program) for entry in seen if entry[0] in (0, 1, 2))
    assert launch.TUNING["histogram_atomic"] is None and launch.TUNING["histogram_slices_per_program"] is None


@pytest.mark.parametrize(("way", "batch", "forced", "rows"),
                         [("bounds", 1, None, "request"), ("bounds", 8, None, "request"), ("bounds", 9, None, "cell"),
                          ("bounds", 15, None, "cell"), ("bounds", 16, None, "stop"), ("bounds", 512, None, "stop"),
                          (None, 512, None, "cell"), ("level", 512, None, "cell"), (None, 4, None, "cell"),
                          ("bounds", 512, 0, "cell"), ("bounds", 8, 2, "stop"), ("level", 8, 1, "request"),
                          ("level", 512, 2, "cell"), (None, 8, 2, "cell")])
def test_the_histogram_programs_take_rows_by_batch_and_decisions(monkeypatch, way, batch, forced, rows):
    """Which rows the split histogram path's programs take: after decisions from the bounds one program a request up to
    HISTOGRAM_PER_REQUEST_MAX_BATCH, its stop row then the rows after it from HISTOGRAM_STOP_ROW_MIN_BATCH, one a cell
    between and without those decisions; a launch variant's way at any batch, stop rows only where the bounds say the
    stops."""
    assert (launch.HISTOGRAM_PER_REQUEST_MAX_BATCH, launch.HISTOGRAM_STOP_ROW_MIN_BATCH) == (8, 16)
    monkeypatch.setitem(launch.TUNING, "histogram_rows", forced)
    assert launch._histogram_rows(way, batch) == rows


def test_after_decisions_from_the_bounds_each_histogram_program_takes_the_rows_of_its_request(monkeypatch):
    """Where the drafts were decided from one pass's bounds (forced here at B = 2 by the -bounds variants), the split
    histogram path launches one program per request, side and slice (grid (B, 1, ...); steps 0-3), each taking its
    request's rows in turn; -percell one per row (grid (B, K + 1, ...)), as every other way does by default, and
    -perrequest forces the first at any way; -stoprow two launches a step, each one program per request (its stop
    row, then the rows after it, those programs the launcher's HISTOGRAM_AFTER_SLICES slices each, leaving at once
    where the request stopped clean; -stoprow-after2: two), and one per row where no decisions say the stops. The
    same tokens every way."""
    from specbench.kernels import histogram

    launches = _recorded_histogram_launches(monkeypatch)
    batch, num_slots = 2, 3
    kwargs = _top_p_call(6, batch, num_slots)
    per_cell, per_request = (histogram.ROWS_PER_CELL.value,), (histogram.ROWS_PER_REQUEST.value,)
    stop = (histogram.ROWS_AT_STOP.value, histogram.ROWS_AFTER_STOP.value)
    results = []
    for name, rows, after in (("triton-histogram-4096x1024x4-bounds", per_request, None),
                              ("triton-histogram-4096x1024x4-bounds-percell", per_cell, None),
                              ("triton-histogram-4096x1024x4-nodecide", per_cell, None),
                              ("triton-histogram-4096x1024x4-nodecide-perrequest", per_request, None),
                              ("triton-histogram-4096x1024x4-bounds-stoprow", stop, launch.HISTOGRAM_AFTER_SLICES),
                              ("triton-histogram-4096x1024x4-bounds-stoprow-after2", stop, 2),
                              ("triton-histogram-4096x1024x4-stoprow", per_cell, None)):  # (B = 2: no decisions)
        launches.clear()
        results.append(resolve(name).prepare(dict(kwargs))())
        steps = [(c["STEP"], c["ROWS"], grid, c["SLICES_PER_PROGRAM"]) for grid, c in launches
                 if c["STEP"] in (0, 1, 2, 3)]
        assert steps and len(steps) % len(rows) == 0, name
        for i, (step, taken, grid, per) in enumerate(steps):
            assert taken == rows[i % len(rows)] and steps[i - i % len(rows)][0] == step, name
            assert grid[:2] == (batch, num_slots if rows == per_cell else 1), name
            assert per == (after if taken == histogram.ROWS_AFTER_STOP.value else 1), name
    for result in results[1:]:
        assert torch.equal(result.output_token_ids, results[0].output_token_ids)
    assert launch.TUNING["histogram_rows"] is None and launch.TUNING["histogram_after_slices"] is None


def test_after_decisions_from_the_bounds_the_search_takes_the_stop_rows_largest_values_from_them(monkeypatch):
    """Where the drafts were decided from one pass's bounds, the split histogram path's first launch takes the
    largest value of each row searched at a request's stop from that pass (BOUNDS_MAX), unless -noboundsmax says to
    read the rows again; with no decisions first there is no such pass and nothing to take (-boundsmax then changes
    nothing). The same tokens every way."""
    launches = _recorded_histogram_launches(monkeypatch)
    kwargs = _top_p_call(7, 2, 3)
    results = []
    for name, bounds_max in (("triton-histogram-4096x1024x4-bounds", True),
                             ("triton-histogram-4096x1024x4-bounds-noboundsmax", False),
                             ("triton-histogram-4096x1024x4-nodecide-boundsmax", False)):
        launches.clear()
        results.append(resolve(name).prepare(dict(kwargs))())
        first = [c for _grid, c in launches if c["STEP"] == 0]
        assert len(first) == 1 and first[0]["BOUNDS_MAX"] is bounds_max, name
        assert all(not c["BOUNDS_MAX"] for _grid, c in launches if c["STEP"] != 0), name
    for result in results[1:]:
        assert torch.equal(result.output_token_ids, results[0].output_token_ids)
    assert launch.TUNING["histogram_bounds_max"] is None


def test_the_masses_summed_take_the_short_instructions_a_variant_says(monkeypatch):
    """The bounds pass and every launch of the split histogram path take FTZ_SUMS, the launcher's
    (HISTOGRAM_FTZ_SUMS) or a launch variant's: -noftz gives 0 to each, -ftz 1; and PREDICATED_SUMS likewise
    (HISTOGRAM_PREDICATED_SUMS; -nopred 0, -pred 1). The same tokens every way."""
    launches = _recorded_histogram_launches(monkeypatch)
    bounds = []
    draft_bounds = launch._DRAFT_BOUNDS

    def recorded(grid, args, num_warps, stream, **constexprs):
        bounds.append(constexprs)
        return draft_bounds(grid, args, num_warps, stream, **constexprs)

    monkeypatch.setattr(launch, "_DRAFT_BOUNDS", recorded)
    kwargs = _top_p_call(8, 2, 3)
    results = []
    base = "triton-histogram-4096x1024x4-bounds"
    for name, ftz, predicated in ((base, launch.HISTOGRAM_FTZ_SUMS, launch.HISTOGRAM_PREDICATED_SUMS),
                                  (f"{base}-noftz", False, launch.HISTOGRAM_PREDICATED_SUMS),
                                  (f"{base}-ftz-pred", True, True),
                                  (f"{base}-nopred", launch.HISTOGRAM_FTZ_SUMS, False)):
        launches.clear()
        bounds.clear()
        results.append(resolve(name).prepare(dict(kwargs))())
        assert launches and bounds, name
        assert all(c["FTZ_SUMS"] is ftz and c["PREDICATED_SUMS"] is predicated for _grid, c in launches), name
        assert all(c["FTZ_SUMS"] is ftz and c["PREDICATED_SUMS"] is predicated for c in bounds), name
    assert (launch.HISTOGRAM_FTZ_SUMS, launch.HISTOGRAM_PREDICATED_SUMS) == (True, True)
    for result in results[1:]:
        assert torch.equal(result.output_token_ids, results[0].output_token_ids)
    assert launch.TUNING["histogram_ftz_sums"] is None and launch.TUNING["histogram_predicated_sums"] is None


def test_the_split_searches_follow_a_launch_variant(h100):
    """The histogram path is the default search of a batch given no top_k; a triton-radix-... variant takes
    the radix path at its shape, a triton-histogram-... variant sets the histogram path's shape."""
    assert launch._radix_shape(128256, h100) == launch.RADIX_SHAPE
    assert launch._histogram_shape(128256, h100) == launch.HISTOGRAM_SHAPE
    assert launch._split_search() == "histogram"
    saved = dict(launch.TUNING)
    try:
        launch.TUNING.update(radix_slice=2048, radix_block=256, radix_warps=8, split_search=0)
        assert launch._radix_shape(128256, h100) == (2048, 256, 8)
        assert launch._split_search() == "radix"
        launch.TUNING.update(histogram_slice=8192, histogram_block=2048, histogram_warps=8, split_search=1)
        assert launch._histogram_shape(128256, h100) == (8192, 2048, 8)
        assert launch._split_search() == "histogram"
    finally:
        launch.TUNING.update(saved)


@pytest.mark.parametrize(("bins", "levels"), [(16, 6), (32, 4), (64, 3), (128, 3), (256, 2)])
def test_the_histogram_levels_reach_a_256th_of_a_nat(bins, levels):
    """The first level's parts are 32 / bins nats; the second cuts eight of them, each later one four, into
    `bins` parts: levels until a part is at most 1/256 nat, and no more than the counts have room for."""
    from specbench.kernels import histogram

    assert launch._histogram_levels(bins) == levels <= histogram.MAX_LEVELS
    part = 32 / bins * 8 / bins * (4 / bins) ** (levels - 2)
    assert part <= 1 / 256 < part * bins / 4


def test_every_decision_record_the_terminal_kernel_reads_was_written(monkeypatch):
    # The split's terminal kernel reads every request's decision record, a greedy request's too: the rows
    # kernel must have written it (compute-sanitizer's initcheck reports a read of memory nothing wrote,
    # even where the value is then discarded). Scratch starts poisoned, so an unwritten record shows.
    from conftest import POISON_INT, device_for

    from specbench.verification import verify

    device = device_for("triton")
    monkeypatch.setattr(launch, "_alloc_scratch",
                        lambda shape, dtype, dev: torch.full(shape, POISON_INT if not dtype.is_floating_point
                                                             else float("nan"), dtype=dtype, device=dev))
    launch._scratch_cache.clear()
    batch, num_spec, vocab = 6, 3, 300
    generator = torch.Generator().manual_seed(2)
    target = torch.randn(batch, num_spec + 1, vocab, generator=generator)
    temperatures = torch.tensor([0.0, 1.0, 0.0, 0.7, 1.0, 0.0])
    try:
        with launch.strategy("split"):
            verify(target.to(device), target[:, :num_spec].argmax(dim=-1).to(device),
                   draft_logits=torch.randn(batch, num_spec, vocab, generator=generator).to(device),
                   temperatures=temperatures.to(device), seeds=torch.arange(batch, device=device), backend="triton")
        block, _ = launch._launch_shape(vocab, device, True, "probabilistic", batch)
        race_splits, _ = launch._slices(batch, vocab, block, device)
        row_splits, _ = launch._slices(batch * (num_spec + 1), vocab, block, device)
        scratch = launch._scratch_cache[(*launch._stream_key(device), torch.int32)].cpu()
        start = batch * (num_spec + 1) * row_splits + batch * race_splits * 2
        records = scratch[start:start + 4 * batch].view(batch, 4)
    finally:
        launch._scratch_cache.clear()
    assert not bool((records == POISON_INT).any()), records
    assert records[temperatures == 0, 1].tolist() == [-1, -1, -1]  # DONE: a greedy request has nothing to race


def test_each_scratch_set_has_its_own_buffers_and_the_same_results():
    # a timer's placements move the kernels' scratch and arrival counters with their inputs (bench.py):
    # a set is a separate buffer, and the tokens never depend on it
    from conftest import device_for

    from specbench.verification import verify

    device = device_for("triton")
    generator = torch.Generator().manual_seed(5)
    target = torch.randn(3, 3, 200, generator=generator)
    kwargs = {"draft_logits": torch.randn(3, 2, 200, generator=generator).to(device),
              "temperatures": torch.ones(3, device=device), "seeds": torch.arange(3, device=device), "backend": "triton"}
    results, buffers = [], []
    try:
        for index in (0, 1, 2):
            with launch.strategy("split"), launch.scratch_set(index):
                results.append(verify(target.to(device), target[:, :2].argmax(dim=-1).to(device), **kwargs))
                key = launch._stream_key(device)
            assert key[-1] == index
            buffers.append(launch._scratch_cache[(*key, torch.float32)].data_ptr())
            buffers.append(launch._arrivals[key].data_ptr())
        assert launch._stream_key(device)[-1] == 0  # the set is undone on leaving the block
    finally:
        launch._scratch_cache.clear()
    assert len(set(buffers)) == len(buffers)
    for other in results[1:]:
        assert torch.equal(other.output_token_ids, results[0].output_token_ids)
        assert torch.equal(other.num_emitted, results[0].num_emitted)


def test_a_grown_scratch_buffer_keeps_the_one_it_replaced_allocated():
    # a CUDA graph captured before a larger launch variant grew the scratch still writes the old buffer
    # when replayed (a timer interleaves variants): the replaced buffer and counters stay allocated
    key = ("cpu", 0, 0, 99)
    try:
        small = launch._scratch(2000, torch.float32, torch.device("cpu"), key)
        counters = launch._arrival_counters(100, torch.device("cpu"), key)
        assert launch._scratch(1500, torch.float32, torch.device("cpu"), key) is small  # big enough: kept
        grown = launch._scratch(3000, torch.float32, torch.device("cpu"), key)
        assert grown is not small and grown.numel() >= 2 * small.numel()
        assert any(buffer is small for buffer in launch._retired)
        more = launch._arrival_counters(300, torch.device("cpu"), key)
        assert more is not counters and any(buffer is counters for buffer in launch._retired)
    finally:
        launch._scratch_cache.pop((*key, torch.float32), None)
        launch._arrivals.pop(key, None)
        launch._retired.clear()


def test_drafts_decided_before_the_search_where_the_launcher_says(monkeypatch):
    """A batch given no top_k decides its first drafts before the histogram path's search from
    HISTOGRAM_DECIDE_MIN_BATCH requests (below as HISTOGRAM_SMALL_BATCH_DECIDE says), in the probabilistic mode
    without log-probabilities, given top_p, with drafts one-hot, probabilities or truncated logits: from one pass's
    bounds, or after the first level where min_p is given too; a ...-nodecide variant never, a ...-decide variant
    after the first level and a ...-bounds variant from one pass's bounds, at any batch; the bounds pass runs in
    rounds from BOUNDS_ROUNDS_MIN_BATCH requests, or as a variant says."""
    small, large = launch.HISTOGRAM_DECIDE_MIN_BATCH - 1, launch.HISTOGRAM_DECIDE_MIN_BATCH
    assert launch._decides("probabilistic", False, 1, True, large, True) == "bounds"
    assert launch._decides("probabilistic", False, 0, True, large, True) == "bounds"
    assert launch._decides("probabilistic", False, 2, False, large, True) == "bounds"
    assert launch._decides("probabilistic", False, 1, True, large, True, True) == "level"  # min_p given too
    assert launch._decides("probabilistic", False, 1, True, small, True, True) is None  # min_p below: not measured
    assert launch._decides("probabilistic", True, 1, True, large, True) is None  # log-probabilities read every summary
    assert launch._decides("probabilistic", False, 1, False, large, True) is None  # draft logits left whole
    assert launch._decides("probabilistic", False, 1, True, large, False) is None  # min_p alone: nothing to skip
    assert launch._decides("synthetic", False, 0, True, large, True) is None
    for forced, expected in ((1, "level"), (2, "bounds")):
        monkeypatch.setitem(launch.TUNING, "histogram_decide", forced)
        assert launch._decides("probabilistic", False, 1, True, 1, True) == expected
    monkeypatch.setitem(launch.TUNING, "histogram_decide", 0)
    assert launch._decides("probabilistic", False, 1, True, large, True) is None
    monkeypatch.setitem(launch.TUNING, "histogram_decide", None)
    monkeypatch.setitem(launch.TUNING, "split_search", 0)  # the radix path decides nothing
    assert launch._decides("probabilistic", False, 1, True, large, True) is None
    assert "every row searched" in resolve("triton-histogram-4096x1024x4-nodecide").description
    assert "after the search's first level" in resolve("triton-histogram-4096x1024x4-decide").description
    assert "from one pass's bounds" in resolve("triton-histogram-4096x1024x4-bounds").description
    assert launch._bounds_rounds(launch.BOUNDS_ROUNDS_MIN_BATCH)
    assert not launch._bounds_rounds(launch.BOUNDS_ROUNDS_MIN_BATCH - 1)
    assert "one round per slot" in resolve("triton-histogram-4096x1024x4-bounds8192x512x4-rounds").description
    assert "every slot at once" in resolve("triton-histogram-4096x1024x4-bounds-norounds").description
    assert "by its last program of the launch" in resolve("triton-histogram-4096x1024x4-bounds-race2-fold").description
    assert "by a launch of their own" in resolve("triton-histogram-4096x1024x4-nofold").description
    with pytest.raises(SpecbenchError, match="tokens per chunk must be a power of two"):
        resolve("triton-histogram-4096x1024x4-bounds8192x500x4")
    with pytest.raises(SpecbenchError, match="follow -bounds only"):
        resolve("triton-histogram-4096x1024x4-decide-rounds")
    assert "decided first at any batch" in resolve("triton-histogram-4096x1024x4-bins32-decide").description
