"""Sharded runs: a deterministic slice of a case grid, and one worker process per device.

A grid of ``M`` cases (``kernels``: ``bench.plan_cases`` after the ``--quick`` filter; ``sweep``:
the profiles in order) is split into ``N`` shards by position: shard ``I`` of ``N`` (written
``I/N``, ``1 <= I <= N``) runs the cases at positions ``p`` with ``(p + floor(p / N)) mod N = I - 1``.
That deals each run of ``N`` consecutive positions one to a shard, the deal turned one place from one
run to the next. Dealing by position rather than in blocks spreads the grid's large and small cases
over the shards; turning the deal keeps an inner axis whose size divides ``N`` from going whole to
one shard (with plain ``p mod 2``, two shards of a grid whose last axis is the target input would
get all the logits cases and all the probabilities cases). The plan is the same on every machine (it
depends on the options alone), so ``N`` processes given the same options and ``--shard 1/N`` ...
``--shard N/N`` run every case exactly once, and the shards' sizes differ by at most one case.
Each shard records ``shard`` (index, count, the positions it ran) and the grid's ``num_cases`` and
``case_grid`` (a digest of the planned cases) in its metadata; ``specbench merge`` (``merge.py``)
checks them and joins the slices into one run.

``run_on_devices`` is ``kernels --devices``: one ``specbench kernels`` process per device, each with
its shard and ``CUDA_VISIBLE_DEVICES`` set to its GPU (a device ``"cpu"`` hides every GPU and runs
on the CPU, which is how the orchestration is tested without one), then the merge.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specbench.errors import SpecbenchError

if TYPE_CHECKING:
    from specbench.merge import Merged

SHARDS_FOLDER = "shards"
# seconds a worker gets to write its results after Ctrl-C before it is killed
_STOP_GRACE_S = 30.0


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` (from 1) of ``count``."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def positions(self, num_cases: int) -> list[int]:
        """The grid positions this shard runs, of ``num_cases``: those with
        ``(p + floor(p / count)) mod count = index - 1`` (module docstring)."""
        return [p for p in range(num_cases) if (p + p // self.count) % self.count == self.index - 1]

    def metadata(self, num_cases: int) -> dict[str, Any]:
        return {"index": self.index, "count": self.count, "cases": self.positions(num_cases)}


def parse_shard(text: str | None) -> Shard | None:
    """``"2/4"`` into ``Shard(2, 4)``; None stays None. One sentence for anything else."""
    if text is None:
        return None
    index, slash, count = text.strip().partition("/")
    try:
        shard = Shard(int(index), int(count))
    except ValueError:
        shard = None
    if not slash or shard is None or not 1 <= shard.index <= shard.count:
        raise SpecbenchError(f"--shard takes I/N with 1 <= I <= N (this process runs slice I of N), got {text!r}")
    return shard


def grid_digest(cases: Sequence[Any]) -> str:
    """A short digest of a planned grid (every case's fields, in order): shards of one grid share it."""
    text = "\n".join(repr(case) for case in cases)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _gpu_count() -> int:
    """How many GPUs this process may use: nvidia-smi's list (quick: the workers start without this process
    waiting for torch and CUDA), cut to CUDA_VISIBLE_DEVICES where that is set; torch's count where
    nvidia-smi is missing."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    try:
        listed = subprocess.run(["nvidia-smi", "--query-gpu=uuid", "--format=csv,noheader"], capture_output=True,
                                text=True, timeout=30, check=True).stdout.split()
    except (OSError, subprocess.SubprocessError):
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    if visible is None:
        return len(listed)
    return min(len(listed), len([item for item in visible.split(",") if item.strip()]))


def local_devices(text: str) -> list[str]:
    """``--devices``: ``all`` (every GPU this process may use) or GPU indices such as ``0,1``, as strings for
    ``CUDA_VISIBLE_DEVICES``. A machine without a GPU is refused."""
    count = _gpu_count()
    if count == 0:
        raise SpecbenchError(f"--devices {text} runs one worker per local GPU, and this process sees no CUDA GPU on "
                             f"this machine; run it on a GPU machine, or split the grid with --shard I/N")
    # GPUs are numbered as this process sees them; a worker's CUDA_VISIBLE_DEVICES must name them as this
    # process's own CUDA_VISIBLE_DEVICES does (index 0 may be physical GPU 2)
    visible = [item.strip() for item in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if item.strip()]
    names = visible[:count] if len(visible) >= count else [str(index) for index in range(count)]
    if text.strip() == "all":
        return names
    devices = []
    for item in text.split(","):
        item = item.strip()
        if not item.isdigit() or int(item) >= count:
            raise SpecbenchError(f"--devices takes all or GPU indices below {count} ({count} visible here), "
                                 f"comma-separated, got {text!r}")
        if names[int(item)] in devices:
            raise SpecbenchError(f"--devices names GPU {item} twice, got {text!r}; one worker per GPU")
        devices.append(names[int(item)])
    return devices


@dataclass(frozen=True)
class Worker:
    """One worker's shard, device, results folder, log file and exit status."""

    shard: Shard
    device: str
    folder: Path
    log: Path
    status: int

    def last_line(self) -> str:
        try:
            lines = [line.strip() for line in self.log.read_text(errors="replace").splitlines() if line.strip()]
        except OSError:
            return ""
        return lines[-1] if lines else ""


def _worker_environment(device: str, commit: str, driver: str) -> dict[str, str]:
    env = dict(os.environ)
    env["CUDA_VISIBLE_DEVICES"] = "" if device == "cpu" else device
    env["SPECBENCH_COMMIT"] = commit  # every shard names the parent's commit
    env["SPECBENCH_DRIVER"] = driver  # and its driver (one nvidia-smi for the run, not one a worker)
    env["SPECBENCH_FORMAT"] = "plain"  # a log file, not a terminal
    return env


def run_workers(arguments: Sequence[str], devices: Sequence[str], folder: Path,
                meanwhile: Sequence[str] = ()) -> list[Worker]:
    """Run ``specbench kernels ARGUMENTS --shard I/N`` once per device, all at once, and wait for them.

    Worker ``I`` writes into ``folder/shards/shard-I-of-N/`` and logs to ``shard-I-of-N.log`` beside it;
    ``arguments`` must not hold ``--shard``, ``--output`` or ``--device`` (set here). ``meanwhile``: modules
    this process imports once the workers are started, so that what comes after them (the charts) does
    not wait for matplotlib to load. Ctrl-C is passed on to every
    worker (each keeps what it finished, marked interrupted), then raised here.
    """
    from specbench import results

    count = len(devices)
    place = folder / SHARDS_FOLDER
    try:
        place.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SpecbenchError(f"cannot create {place}: {exc.strerror or exc}") from exc
    commit, driver = results.git_commit(), results.nvidia_driver()
    started = []
    try:
        for index, device in enumerate(devices, start=1):
            shard = Shard(index, count)
            out = place / f"shard-{index}-of-{count}"
            log = place / f"shard-{index}-of-{count}.log"
            command = [sys.executable, "-m", "specbench", "kernels", *arguments, "--shard", str(shard),
                       "--output", str(out), "--device", "cpu" if device == "cpu" else "cuda", "--no-charts"]
            with open(log, "w") as log_file:
                process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT,
                                           env=_worker_environment(device, commit, driver))
            started.append((shard, device, out, log, process))
        for name in meanwhile:  # loads on a spare core while the workers start and run
            with contextlib.suppress(Exception):  # a failed import is said where the module is used, later
                importlib.import_module(name)
        statuses = [process.wait() for *_, process in started]
    except BaseException:
        _stop(process for *_, process in started)
        raise
    return [Worker(shard, device, out, log, status)
            for (shard, device, out, log, _), status in zip(started, statuses)]


def _stop(processes) -> None:
    # a Ctrl-C at a terminal reaches the workers too (one process group): give them a moment to stop on
    # their own, then pass it on to those still running, then kill what outlives the grace period
    running = [process for process in processes if process.poll() is None]
    for process in running:
        try:
            process.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGINT)
    for process in running:
        try:
            process.wait(timeout=_STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def run_on_devices(arguments: Sequence[str], devices: Sequence[str], folder: Path,
                   meanwhile: Sequence[str] = ()) -> Merged:
    """``kernels --devices``: ``run_workers``, then ``merge.merge_runs`` of their folders into ``folder``.

    While the workers run, this process imports ``meanwhile`` (the merge itself reads records only:
    ``records``, no torch). A worker that ends other than done (0) or with a FAIL row (1) is one
    sentence naming it, its last line and its log; nothing is merged then (the shards' folders keep
    what they finished).
    """
    from specbench import merge

    workers = run_workers(arguments, devices, folder, meanwhile=meanwhile)
    for worker in workers:
        if worker.status not in (0, 1):
            said = worker.last_line()
            raise SpecbenchError(f"the worker of shard {worker.shard} on device {worker.device} exited with status "
                                 f"{worker.status}" + (f" ({said})" if said else "") + f"; its log is {worker.log}")
    return merge.merge_runs([worker.folder for worker in workers], folder)
