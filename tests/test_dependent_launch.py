"""Dependent launches (specbench/kernels/dependent_launch.py): where the launcher takes them, that every launch of a
truncated step gets them, that a launch given them is launched with Triton's launch_pdl, and on a Hopper GPU that
they give the same tokens bit for bit, captured in a CUDA graph too. (That each such kernel waits before any memory
instruction is checked on its PTX: tests/test_kernels_compile.py.)"""

import pytest
import torch
import triton.language as tl

from specbench.implementations import resolve
from specbench.kernels import launch
from specbench.verification import SamplingParams, verify

# the launchers of a truncated step's kernels
DEPENDENT = ("_PREPASS", "_SPLIT_RADIX", "_SPLIT_HISTOGRAM", "_DRAFT_BOUNDS", "_BRACKET_RACE", "_TRUNCATED",
             "_TRUNCATED_TERMINAL")


def test_dependent_launches_only_on_a_hopper_gpu_and_at_small_batches(monkeypatch):
    cuda = torch.device("cuda", 0)
    monkeypatch.setitem(launch.TUNING, "dependent_launch", 1)  # a variant's -pdl
    assert not launch._dependent_launch(1, torch.device("cpu"))
    monkeypatch.setattr(launch, "INTERPRETED", False)
    monkeypatch.setattr(launch, "_compute_capability", lambda index: (9, 0))
    assert launch._dependent_launch(512, cuda)
    monkeypatch.setattr(launch, "_compute_capability", lambda index: (8, 0))  # no griddepcontrol before Hopper
    assert not launch._dependent_launch(1, cuda)
    monkeypatch.setattr(launch, "_compute_capability", lambda index: (10, 0))
    monkeypatch.setitem(launch.TUNING, "dependent_launch", None)  # the launcher's own: up to its threshold
    most = launch.DEPENDENT_LAUNCH_MAX_BATCH
    assert launch._dependent_launch(1, cuda) is (most >= 1) and not launch._dependent_launch(most + 1, cuda)
    monkeypatch.setitem(launch.TUNING, "dependent_launch", 0)  # -nopdl
    assert not launch._dependent_launch(1, cuda)


def test_a_launch_given_pdl_is_compiled_and_launched_with_launch_pdl(monkeypatch):
    """_Launcher gives a kernel that takes PDL the value False when the call does not give it, and passes Triton's
    launch_pdl option exactly where PDL is true."""
    calls = []

    def kernel_fn(x_ptr, BLOCK: tl.constexpr, PDL: tl.constexpr = False):
        pass

    class Kernel:
        fn = kernel_fn

        def __getitem__(self, grid):
            return lambda *args, **options: calls.append(options)  # returns None: nothing kept to launch directly

    monkeypatch.setattr(launch, "INTERPRETED", False)
    launcher = launch._Launcher(Kernel())
    key = ("cuda", 0, 0, 0)
    launcher((1,), (torch.zeros(1),), 4, key, BLOCK=8)
    launcher((1,), (torch.zeros(1),), 4, key, BLOCK=8, PDL=True)
    launcher((1,), (torch.zeros(1),), 4, key, BLOCK=8, PDL=False)
    assert calls == [{"num_warps": 4, "BLOCK": 8, "PDL": False},
                     {"num_warps": 4, "launch_pdl": True, "BLOCK": 8, "PDL": True},
                     {"num_warps": 4, "BLOCK": 8, "PDL": False}]


def _call(batch: int, draft: str, device, *, top_k=None, seed: int = 0, vocab: int = 600) -> dict:
    # verify's keywords: rows of `vocab` tokens, top_p 0.9 (and top_k where given), drafts mostly accepted
    generator = torch.Generator().manual_seed(seed)
    num_spec = 3
    target = torch.randn(batch, num_spec + 1, vocab, generator=generator) * 2
    drafted = target[:, :num_spec] + 0.5 * torch.randn(batch, num_spec, vocab, generator=generator)
    inputs = {"target_logits": target, "draft_token_ids": drafted.argmax(-1),
              "num_draft_tokens": torch.full((batch,), num_spec, dtype=torch.int32),
              "seeds": torch.arange(batch) + 100 * seed, "positions": torch.zeros(batch, dtype=torch.int64)}
    if draft == "logits":
        inputs["draft_logits"] = drafted
    else:
        inputs["draft_probs"] = torch.softmax(drafted, -1)
    inputs = {name: value.to(device) for name, value in inputs.items()}
    knobs = {"top_p": torch.full((batch,), 0.9, device=device)}
    if top_k is not None:
        knobs["top_k"] = torch.full((batch,), top_k, dtype=torch.int32, device=device)
    inputs["sampling"] = SamplingParams(temperatures=torch.ones(batch, device=device), **knobs)
    return inputs


@pytest.mark.parametrize(("draft", "top_k", "batch", "tuning", "kernel"), [
    ("logits", None, 2, {}, "_bracket_race_kernel"),  # decided after the first level, folded, with the race
    ("logits", None, 2, {"decision_fold": 0}, "_split_histogram_kernel"),  # ... the decisions' own launch
    ("logits", None, 4, {}, "_draft_bounds_kernel"),  # decided from the bounds, folded into the pass
    ("logits", None, 4, {"decision_fold": 0}, "_draft_bounds_kernel"),  # ... the decisions' own launch
    ("probs", None, 2, {}, "_split_histogram_kernel"),
    ("logits", None, 2, {"split_search": 0}, "_split_radix_kernel"),  # the split radix path
    ("logits", 50, 2, {}, "_truncation_prepass_kernel")])  # top_k: the prepass
def test_every_launch_of_a_truncated_step_is_a_dependent_launch_where_the_launcher_says(monkeypatch, draft, top_k,
                                                                                         batch, tuning, kernel):
    """With dependent launches on (forced here; the interpreter cannot run the wait, so each launch is recorded and
    then run without it), every launch of a small batch's truncated step gets PDL true, whichever way the step
    takes (top_p alone: the split histogram path with its drafts decided after the first level or from the draft
    bounds, their decisions folded into the launch before or by a launch of their own, the bracket race, the step,
    its terminal race; the split radix path; with top_k: the prepass and the step), and with them off none does."""
    from conftest import device_for

    device = device_for("triton")
    seen = []

    def recorded(original):
        def launch_recorded(grid, args, num_warps, stream, **constexprs):
            seen.append((original.kernel.fn.__name__, constexprs.get("PDL")))
            return original(grid, args, num_warps, stream, **{**constexprs, "PDL": False})
        return launch_recorded

    for name in DEPENDENT:
        monkeypatch.setattr(launch, name, recorded(getattr(launch, name)))
    for name, value in tuning.items():
        monkeypatch.setitem(launch.TUNING, name, value)
    for dependent in (True, False):
        seen.clear()
        monkeypatch.setattr(launch, "_dependent_launch", lambda batch, device, on=dependent: on)
        with launch.strategy("split"):  # (with top_k: the prepass, as at small batches on a GPU)
            verify(mode="probabilistic", backend="triton", check_values=False,
                   **_call(batch, draft, device, top_k=top_k))
        kernels = {name for name, _pdl in seen}
        assert {"_verify_truncated_kernel", kernel} <= kernels, seen
        assert all(pdl is dependent for _name, pdl in seen), seen


def test_the_variants_set_dependent_launches_inside_their_call(monkeypatch):
    """triton-pdl and -pdl after a histogram variant's name force dependent launches on for the call, triton-nopdl
    off, the launcher's own leaves it to DEPENDENT_LAUNCH_MAX_BATCH; the setting does not outlive the call."""
    from conftest import device_for

    seen, before = [], launch.TUNING["dependent_launch"]
    monkeypatch.setattr(launch, "_dependent_launch",
                        lambda batch, device: seen.append(launch.TUNING["dependent_launch"]) or False)
    kwargs = _call(2, "logits", device_for("triton"))
    for name, setting in (("triton-pdl", 1), ("triton-nopdl", 0), ("triton-histogram-4096x1024x4-fold-pdl", 1),
                          ("triton-histogram-4096x1024x4-nopdl", 0), ("triton", before)):
        seen.clear()
        resolve(name).prepare(dict(kwargs))()
        assert seen == [setting], name
    assert launch.TUNING["dependent_launch"] is before
    assert "dependent launch" in resolve("triton-pdl").description


def test_a_variant_forcing_dependent_launches_refuses_a_gpu_without_them(monkeypatch):
    """Before compute capability 9.0 the variants that force dependent launches cannot run (one sentence that says
    so), where the launcher would quietly launch without them; those that force them off run anywhere Triton does."""
    cuda = torch.device("cuda", 0)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 0))
    for name in ("triton-pdl", "triton-histogram-4096x1024x4-pdl"):
        assert resolve(name).unavailable(cuda) == ("dependent launches need a GPU of compute capability 9.0 or "
                                                   "later, this one has 8.0")
        assert resolve(name).unavailable(torch.device("cpu")) is None  # (the interpreter: the other launches)
    assert resolve("triton-nopdl").unavailable(cuda) is None
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    assert resolve("triton-pdl").unavailable(cuda) is None


_HOPPER = torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 9


@pytest.mark.skipif(not _HOPPER, reason="dependent launches need a GPU of compute capability 9.0 or later")
@pytest.mark.parametrize("batch", [1, 4, 8])
@pytest.mark.parametrize(("draft", "top_k"), [("logits", None), ("probs", None), ("logits", 50)])
def test_dependent_launches_give_the_same_tokens_bit_for_bit(batch, draft, top_k):
    """triton-pdl against triton-nopdl on the same inputs, five seeds each: the same tokens, emitted counts and
    accepted counts, called directly and replayed from a CUDA graph."""
    device = torch.device("cuda")
    for seed in range(5):
        kwargs = _call(batch, draft, device, top_k=top_k, seed=seed, vocab=3000)
        results = {}
        for name in ("triton-pdl", "triton-nopdl"):
            run = resolve(name).prepare(dict(kwargs))
            first = run()  # (through Triton's JIT, where a kernel is new)
            direct = run()  # (the compiled kernel launched directly)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                captured = run()
            graph.replay()
            torch.cuda.synchronize()
            results[name] = [first, direct, captured]
        for (pdl, nopdl) in zip(results["triton-pdl"], results["triton-nopdl"], strict=True):
            for field in ("output_token_ids", "num_emitted", "num_accepted"):
                assert torch.equal(getattr(pdl, field), getattr(nopdl, field)), (seed, field)
