"""Shared test setup: the Triton interpreter, the backend parametrization, checked verify calls.

``TRITON_INTERPRET=1`` is set here, before any test module imports triton, on machines without
a GPU (set it yourself to force the interpreter on a GPU machine). Tests that take the
``backend`` fixture run once per backend: ``torch`` (the reference), ``triton`` (the launcher's
own choice of kernel shape) and ``triton-split`` (the vocabulary-split kernels forced). The
Triton ones skip, with the reason, when ``specbench.kernels.launch`` does not exist yet.

Every call through the ``run_verify`` fixture poisons what it can first (the CUDA caching
allocator's blocks, the Triton launcher's scratch buffers) and checks the output invariants
every caller relies on, so each test also checks those.

``tests/compile_kernels.py`` (about 13 minutes of one core: 306 variants, the truncation kernels 10-18 s
each) runs for the compile test, which is marked ``compile`` and left out of a plain ``pytest``
(``pytest -m compile`` runs it, on every core; CI runs it after the suite). Selected with other tests
(and without pytest-xdist's ``-n``), it starts with the session and runs beside them on one core, and its
test runs last. ``pytest -n auto`` (the README's command) takes a worker per core, at most 8.

``SPECBENCH_TEST_DEPENDENT_LAUNCH=1`` on a Hopper GPU runs every truncated step of the launcher's own paths with
dependent launches (``specbench/kernels/dependent_launch.py``) at every batch.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import scipy.stats
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
# torch on one CPU thread, as the commands run it by default (specbench/machine.py): the tests' tensors
# are too small to gain from more, and on a machine busier than its cores each parallel op waits for a
# descheduled thread (here a statistical test took 1 s so, 0.01 s on one thread)
torch.set_num_threads(1)

from specbench import machine
from specbench.verification import VerifyResult, verify  # after TRITON_INTERPRET is set

if os.environ.get("SPECBENCH_TEST_DEPENDENT_LAUNCH") == "1":
    # every truncated step the tests run through the launcher's own paths takes dependent launches at every batch
    # (launch.TUNING's dependent_launch, as the launch variants' -pdl; a GPU of compute capability 9.0 or later)
    from specbench.kernels import launch as _launch

    _launch.TUNING["dependent_launch"] = 1

BACKENDS = ("torch", "triton", "triton-split")
POISON_INT = 0x5A5A5A5A  # not a token id, not -1, not a count: an unwritten slot shows up
POISON_FLOAT = float("nan")


def triton_launch():
    """``specbench.kernels.launch``, or a skip naming why it cannot run here."""
    try:
        return importlib.import_module("specbench.kernels.launch")
    except ModuleNotFoundError as error:
        if error.name in ("specbench.kernels.launch", "triton"):
            pytest.skip(f"the triton backend cannot be imported yet ({error})")
        raise


def histogram_scratches(monkeypatch, launch) -> list:
    """Fresh scratch from here on whose floats are NaN and ints the histogram search's fallback stage (so a
    read of what nothing wrote shows), and the list each split histogram search appends its scratch to."""
    from specbench.kernels import histogram

    monkeypatch.setattr(launch, "_scratch_cache", {})
    monkeypatch.setattr(launch, "_alloc_scratch", lambda shape, dtype, device: torch.full(
        shape, float("nan") if dtype.is_floating_point else histogram.FALLBACK.value, dtype=dtype, device=device))
    scratches = []
    # (the launcher's own function, also where an earlier call of this helper in the same test wrapped it: a wrapper
    # of a wrapper would append each search to both lists)
    split_histogram = getattr(launch._split_histogram, "__wrapped__", launch._split_histogram)

    def capturing(*args, **kwargs):
        scratches.append(split_histogram(*args, **kwargs))
        return scratches[-1]

    capturing.__wrapped__ = split_histogram
    monkeypatch.setattr(launch, "_split_histogram", capturing)
    return scratches


def device_for(backend: str) -> torch.device:
    """Triton runs on the GPU when there is one (else the interpreter); torch runs on the CPU."""
    if backend.startswith("triton") and torch.cuda.is_available():
        return torch.device("cuda")
    return torch.device("cpu")


def interpreted(backend: str) -> bool:
    """Whether ``backend`` runs under the Triton interpreter here (a Triton backend without a GPU).

    The interpreter runs one program at a time, as numpy: tens of milliseconds a request even at a
    vocabulary of 8, so tests give it a handful of requests where torch and GPUs take many.
    """
    return backend.startswith("triton") and device_for(backend).type != "cuda"


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    if request.param.startswith("triton"):
        triton_launch()
    return request.param


def same_result(got, want) -> bool:
    """Whether two VerifyResults hold equal tensors in every field: None where both are None, and
    NaN log-probabilities equal to NaN."""
    for a, b in zip(got, want, strict=True):
        if a is None or b is None:
            if a is not b:
                return False
            continue
        if a.is_floating_point():
            a, b = a.nan_to_num(nan=-1.0), b.nan_to_num(nan=-1.0)
        if not torch.equal(a, b):
            return False
    return True


def hostile_draft_probs(draft_probs: torch.Tensor, drafts: torch.Tensor, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(hostile, cleaned): draft probabilities ``[B, N, V]`` with -inf, negative, +inf, above-1 and NaN entries
    scattered in (at request 0's drafts -inf, at request 1's 2), and the values the contract reads from them
    (NaN and negative 0, above 1 1), for a test that the two calls give the same result."""
    generator = torch.Generator().manual_seed(seed)
    hostile = draft_probs.clone()
    for value, share in ((-math.inf, 0.1), (-0.25, 0.1), (math.inf, 0.02), (1.5, 0.02), (math.nan, 0.1)):
        hostile[torch.rand(hostile.shape, generator=generator) < share] = value
    at_drafts = drafts.clamp(0, hostile.shape[-1] - 1)[..., None]
    hostile[0].scatter_(1, at_drafts[0], -math.inf)  # q(x) = 0
    hostile[1 % len(hostile)].scatter_(1, at_drafts[1 % len(hostile)], 2.0)  # q(x) = 1
    return hostile, torch.where(hostile > 0, hostile.clamp(max=1.0), 0.0)


def check_invariants(result: VerifyResult, num_draft_tokens: torch.Tensor, vocab: int, drafts: torch.Tensor) -> None:
    """What every result must satisfy, whatever the inputs (all tensors on the CPU).

    Tokens before ``num_emitted`` lie in ``[0, V)``, every slot after is ``-1``; accepted slots
    hold the drafts; ``num_accepted <= num_draft_tokens`` and ``num_emitted`` is ``A`` or ``A + 1``.
    """
    tokens, emitted, accepted = result.output_token_ids, result.num_emitted, result.num_accepted
    batch, num_slots = tokens.shape
    assert tokens.dtype == torch.int64 and emitted.dtype == torch.int32 and accepted.dtype == torch.int32
    assert emitted.shape == (batch,) and accepted.shape == (batch,)
    assert bool(((accepted >= 0) & (accepted <= num_draft_tokens.cpu())).all()), f"num_accepted {accepted}"
    assert bool(((emitted == accepted) | (emitted == accepted + 1)).all()), f"num_emitted {emitted} vs {accepted}"
    slots = torch.arange(num_slots)[None, :]
    before = slots < emitted[:, None].long()
    assert bool(((tokens >= 0) & (tokens < vocab))[before].all()), f"tokens outside [0, {vocab}): {tokens}"
    assert bool((tokens[~before] == -1).all()), f"slots past num_emitted must be -1: {tokens}"
    in_prefix = slots < accepted[:, None].long()
    assert bool((tokens[:, :-1][in_prefix[:, :-1]] == drafts.cpu().long()[in_prefix[:, :-1]]).all())


def _poison_cuda_allocator(batch: int, num_slots: int, device: torch.device) -> None:
    # freed blocks of the output sizes, filled with garbage: the caching allocator hands them out next
    blocks = [
        torch.full((batch, num_slots), POISON_INT, dtype=torch.int64, device=device),
        torch.full((batch,), POISON_INT, dtype=torch.int32, device=device),
        torch.full((batch,), POISON_INT, dtype=torch.int32, device=device),
    ]
    del blocks


@contextlib.contextmanager
def _backend_context(backend: str, monkeypatch):
    if not backend.startswith("triton"):
        yield
        return
    launch = triton_launch()
    if hasattr(launch, "_alloc_scratch"):

        def poisoned_scratch(shape, dtype, device):
            value = POISON_FLOAT if dtype.is_floating_point else POISON_INT
            return torch.full(shape, value, dtype=dtype, device=device)

        monkeypatch.setattr(launch, "_alloc_scratch", poisoned_scratch)
    # scratch is kept between launches: drop it, so this call's comes fresh and poisoned
    cache = getattr(launch, "_scratch_cache", {})
    cache.clear()
    try:
        with launch.strategy("split" if backend == "triton-split" else "auto"):
            yield
    finally:
        cache.clear()


@pytest.fixture
def run_verify(backend, monkeypatch):
    """``verify`` on the backend under test: inputs moved to its device, outputs checked and on the CPU.

    Called as ``run_verify(target_logits, draft_token_ids, **keywords)`` like ``verify`` itself;
    ``backend="torch"`` among the keywords overrides the fixture's backend for that call.
    """

    def call(target_logits: torch.Tensor | None, draft_token_ids: torch.Tensor, **keywords) -> VerifyResult:
        which = keywords.pop("backend", backend)
        device = device_for(which)
        moved = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in keywords.items()}
        batch, num_rows, vocab = (keywords["target_probs"] if target_logits is None else target_logits).shape
        if device.type == "cuda":
            _poison_cuda_allocator(batch, num_rows, device)
        with _backend_context(which, monkeypatch):
            result = verify(
                None if target_logits is None else target_logits.to(device),
                draft_token_ids.to(device),
                backend="torch" if which == "torch" else "triton",
                **moved,
            )
        assert all(t.device.type == device.type for t in result if t is not None)
        result = result.map(torch.Tensor.cpu)
        num_draft = keywords.get("num_draft_tokens")
        if num_draft is None:
            num_draft = torch.full((batch,), num_rows - 1, dtype=torch.int32)
        check_invariants(result, num_draft.clamp(0, num_rows - 1), vocab, draft_token_ids)  # unchecked: clamped
        return result

    return call


def chi_square_pvalue(observed: torch.Tensor, probabilities: torch.Tensor) -> float:
    """Pearson's chi-square p-value of counts against a law (bins with expected count < 5 pooled).

    ``observed`` ``[V]`` counts; ``probabilities`` ``[V]`` float64 summing to 1. A count in a bin of
    probability 0 is an impossible outcome: the p-value is then 0.
    """
    observed = observed.to(torch.float64).cpu()
    probabilities = probabilities.to(torch.float64).cpu()
    total = float(observed.sum())
    if bool((observed[probabilities <= 0] > 0).any()):
        return 0.0
    expected = probabilities * total
    large = expected >= 5
    obs_bins = observed[large].tolist()
    exp_bins = expected[large].tolist()
    pooled_obs, pooled_exp = float(observed[~large].sum()), float(expected[~large].sum())
    if pooled_exp > 0:
        obs_bins.append(pooled_obs)
        exp_bins.append(pooled_exp)
    if len(obs_bins) < 2:
        return 1.0  # one outcome only: nothing to test beyond the impossible ones above
    return float(scipy.stats.chisquare(obs_bins, exp_bins).pvalue)


@pytest.fixture
def chi_square():
    """``chi_square_pvalue`` for the statistical tests."""
    return chi_square_pvalue


COMPILE_TEST = "test_every_kernel_variant_compiles_for_hopper"


class CompileRun:
    """``tests/compile_kernels.py 90`` started in the background, without ``TRITON_INTERPRET`` and with a
    fresh Triton cache (so it compiles now, not from an earlier run's cache)."""

    def __init__(self, workdir: Path, jobs: int):
        script = Path(__file__).with_name("compile_kernels.py")
        env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
        env["TRITON_CACHE_DIR"] = str(workdir / "cache")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(script.parent.parent), env.get("PYTHONPATH")]))
        self._stdout, self._stderr = workdir / "stdout.txt", workdir / "stderr.txt"
        with open(self._stdout, "w") as stdout, open(self._stderr, "w") as stderr:
            self.process = subprocess.Popen([sys.executable, str(script), "90", "--jobs", str(jobs)], env=env,
                                            stdout=stdout, stderr=stderr)

    def result(self, timeout: float) -> subprocess.CompletedProcess:
        """Wait for the run (at most ``timeout`` seconds from now) and return its status and output."""
        self.process.wait(timeout=timeout)
        return subprocess.CompletedProcess(self.process.args, self.process.returncode, self._stdout.read_text(),
                                           self._stderr.read_text())

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def pytest_collection_modifyitems(items: list) -> None:
    # the compile runs beside every other test, so its test goes last, to find it done (a stable sort)
    items.sort(key=lambda item: item.name == COMPILE_TEST)


@pytest.fixture(scope="session", autouse=True)
def _background_compile_run(request, tmp_path_factory):
    """A ``CompileRun`` started with the session, on one core, when ``COMPILE_TEST`` is selected with other
    tests (not under pytest-xdist, whose every worker would start one), else None."""
    wanted = [item.name == COMPILE_TEST for item in request.session.items]
    alone = all(wanted)
    run = None
    if any(wanted) and not alone and "PYTEST_XDIST_WORKER" not in os.environ:
        run = CompileRun(tmp_path_factory.mktemp("compile_kernels"), 1)
    yield run
    if run is not None:
        run.stop()


@pytest.fixture
def kernel_compile_run(_background_compile_run, tmp_path):
    """The session's background ``CompileRun``, or one started now on every core."""
    run = _background_compile_run or CompileRun(tmp_path, machine.cpu_count())
    yield run
    run.stop()


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config) -> int:
    # ``pytest -n auto``: a worker per core, at most 8 (each holds torch and Triton, about 0.7 GB)
    return min(machine.cpu_count(), 8)


def edited_run(source: Path, target: Path, change) -> Path:
    """A copy of the run in ``source`` (its results.json) in the new folder ``target``, with ``change(payload)``
    applied: a hand-edited results file."""
    payload = json.loads((source / "results.json").read_text())
    change(payload)
    target.mkdir()
    (target / "results.json").write_text(json.dumps(payload))
    return target
