"""The machine a run shares: which device it runs on, how many threads torch uses, how busy it was around
the run, its memory.

Measured on a 2-core machine (torch 2.13, the sweep's torch simulation, K = 3, 2M steps): one
thread gave 29-31M draft positions/s whether the machine was idle or one other process kept a
core busy; two threads gave 37-50M idle but 13-22M beside that one busy process (two measurements
of 3 runs each; the issue that asked for this saw 0.9M: with more threads than free cores, each
parallel step waits for the thread that was descheduled). One thread is the default because it never falls off that cliff; pass more
with ``--threads`` on a machine you know is quiet.

Busy rule: the 1-minute load average counts the processes that want a core. At the start of a run
the machine is busy when it is above ``cores - threads + 0.5`` (the run's threads would not all
find a free core; half a core of shells and editors is slack); at the end, when it is above
``cores + 0.5`` (the run's own threads are then part of it). ``--threads`` is at most ``cores``:
more threads than cores is never faster.
"""

from __future__ import annotations

import os

from specbench.errors import SpecbenchError

DEFAULT_THREADS = 1
DEVICES: tuple[str, ...] = ("auto", "cpu", "cuda")


def resolve_device(device: str) -> str:
    """``auto`` is ``cuda`` when torch sees a GPU, else ``cpu``; ``cuda`` without a GPU is an error.

    Here, not in ``sweep`` (which imports it for ``sweep`` and ``verify``): ``kernels`` would otherwise
    load the sweep's scipy.stats and pandas only to ask torch for a GPU (0.7 s of each start).
    """
    if device not in DEVICES:
        raise SpecbenchError(f"device must be one of {', '.join(DEVICES)}, got {device!r}")
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise SpecbenchError("device 'cuda' was asked for, but torch sees no CUDA GPU on this machine")
    return device


def parse_threads(text: str) -> int:
    """``--threads`` text as a whole number from 1 to the cores this process may run on.

    More threads than cores is never faster (each parallel step waits for a thread that has no
    core), so it is refused with a sentence, as any other value that is not a whole number >= 1.
    """
    try:
        value = int(text.strip().replace("_", ""))
    except ValueError:
        raise SpecbenchError(f"--threads takes a whole number of CPU threads, got {text!r}") from None
    cores = cpu_count()
    if not 1 <= value <= cores:
        raise SpecbenchError(f"--threads must lie in [1, {cores}] (the CPU cores this process may run on), "
                             f"got {value}")
    return value


def use_threads(threads: int) -> None:
    """Make torch run its CPU work on ``threads`` threads (intra-op) from now on."""
    import torch

    torch.set_num_threads(threads)


def cpu_count() -> int:
    """Cores this process may run on (its affinity mask where the platform has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def load_average() -> float | None:
    """The 1-minute load average, or None where the platform has none (Windows)."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def busy_warning(load: float | None, threads: int, *, at_end: bool) -> str | None:
    """One sentence when ``load`` says the machine was busy (the rule in the module docstring), else None."""
    if load is None:
        return None
    cores = cpu_count()
    if at_end:  # the run's own threads are part of the load now
        limit = cores + 0.5
        why = "more work than cores, this run's included"
    else:
        limit = max(cores - threads, 0) + 0.5
        why = ("so this run's thread would not find a free core" if threads == 1 else
               f"so this run's {threads} threads would not each find a free core")
    if load <= limit:
        return None
    when = "at the end of the run" if at_end else "when the run started"
    return (f"the machine was busy {when}: 1-minute load average {load:.2f} on {cores} cores, above {limit:g}, "
            f"{why}; CPU times and rates may be far too slow, rerun on a quiet machine")


def memory_bytes(device: str) -> int | None:
    """The memory of ``device``: a GPU's own (``cuda``, ``cuda:N``), else the host's RAM; None where unknown.

    What a size bound is held to: a run whose inputs alone need more can never run there.
    """
    if device.startswith("cuda"):
        import torch

        return int(torch.cuda.get_device_properties(torch.device(device)).total_memory)
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # a platform without sysconf (Windows)
        return None


def use_triton_interpreter(device: str) -> str:
    """``--interpret``: run Triton kernels on the CPU (set before anything imports triton); returns ``"cpu"``."""
    if device == "cuda":
        raise SpecbenchError("--interpret runs Triton on the CPU; it cannot be combined with --device cuda")
    os.environ["TRITON_INTERPRET"] = "1"
    return "cpu"
