"""Results on disk: ``results.json`` (``metadata`` + ``records``) and a long-form CSV beside it.

Records are written after every finished case (the JSON through a temporary file and a rename),
so a run stopped by Ctrl-C leaves everything it finished readable. Charts and comparisons read
these files and never re-run anything.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from specbench import __version__
from specbench.errors import SpecbenchError

RESULTS_JSON = "results.json"
RESULTS_CSV = "results.csv"


def git_commit() -> str:
    """The commit of the specbench checkout (with ``-dirty`` when it has changes), or ``unknown``."""
    here = Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=5, check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return os.environ.get("SPECBENCH_COMMIT", "unknown")
    return commit + ("-dirty" if dirty else "")


def device_description(device: str = "cpu") -> dict[str, Any]:
    """Name, SM count and driver of a CUDA device, or the CPU's description."""
    if str(device).startswith("cuda") and torch.cuda.is_available():
        props = torch.cuda.get_device_properties(torch.device(device))
        return {
            "device": props.name,
            "sm_count": props.multi_processor_count,
            "memory_gib": round(props.total_memory / 2**30, 1),
            "cuda": torch.version.cuda,
            "driver": _nvidia_driver(),
        }
    return {"device": f"cpu ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)"}


def _nvidia_driver() -> str:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout.strip()
        return out.splitlines()[0] if out else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def collect_metadata(device: str = "cpu", **extra: Any) -> dict[str, Any]:
    """Versions, machine, commit, command line and time of a run, plus ``extra`` fields."""
    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    return {
        "specbench": __version__,
        "torch": torch.__version__,
        "triton": triton_version,
        "python": platform.python_version(),
        "host": platform.node(),
        "commit": git_commit(),
        "command": " ".join(shlex.quote(a) for a in ["specbench", *sys.argv[1:]]),
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        **device_description(device),
        **extra,
    }


def default_output_dir(kind: str) -> Path:
    """``results/<kind>-<UTC timestamp>/``."""
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    return Path("results") / f"{kind}-{stamp}"


def open_output(output: Path | None, kind: str, resume: bool = False, seed: int | None = None) -> tuple[Path, list]:
    """The folder a ``kind`` run writes into, and the records it already holds (with ``resume``).

    A folder that already holds results is refused unless the run resumes it; a resumed folder
    must hold a run of the same kind and seed, so one file never mixes two runs' settings.
    """
    if output is None:
        if resume:
            raise SpecbenchError("--resume needs --output DIR, the folder of the run to continue")
        return default_output_dir(kind), []
    if output.exists() and not output.is_dir():
        raise SpecbenchError(f"--output {output} is a file, not a folder")
    if not (output / RESULTS_JSON).is_file():
        return output, []
    if not resume:
        hint = "pass --resume to continue that run or choose" if kind == "kernels" else "choose"
        raise SpecbenchError(f"{output} already holds {RESULTS_JSON}; {hint} another --output")
    metadata, records = read_results(output)
    if metadata.get("kind") != kind:
        raise SpecbenchError(f"{output} holds a {metadata.get('kind')} run, not a {kind} run; choose another --output")
    if seed is not None and metadata.get("seed") != seed:
        raise SpecbenchError(f"--seed {seed} differs from the seed of the run in {output} ({metadata.get('seed')}); "
                             f"resume it with the same seed")
    return output, records


class ResultsWriter:
    """Keeps ``results.json`` and ``results.csv`` of one run up to date, one record at a time."""

    def __init__(self, directory: str | Path, metadata: dict[str, Any], records: list[dict] | None = None):
        self.directory = Path(directory)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SpecbenchError(f"cannot create output folder {self.directory}: {exc.strerror}") from exc
        self.metadata = metadata
        self.records: list[dict] = list(records or [])
        self.flush()

    def add(self, record: dict) -> None:
        self.records.append(record)
        self.flush()

    def flush(self) -> None:
        payload = {"metadata": self.metadata, "records": self.records}
        tmp = self.directory / (RESULTS_JSON + ".tmp")
        try:
            tmp.write_text(json.dumps(payload, indent=2, default=_json_default) + "\n")
            tmp.replace(self.directory / RESULTS_JSON)
            records_frame(self.records).to_csv(self.directory / RESULTS_CSV, index=False)
        except OSError as exc:
            raise SpecbenchError(f"cannot write results into {self.directory}: {exc.strerror or exc}") from exc


def _json_default(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot write {type(value).__name__} to JSON")


def records_frame(records: list[dict]) -> pd.DataFrame:
    """Records as a long-form table; list-valued fields become ``;``-joined strings."""
    flat = [
        {k: (";".join(f"{x:.6g}" if isinstance(x, float) else str(x) for x in v) if isinstance(v, list) else v)
         for k, v in record.items()}
        for record in records
    ]
    return pd.DataFrame(flat)


def read_results(directory: str | Path) -> tuple[dict[str, Any], list[dict]]:
    """``(metadata, records)`` of a results folder; a missing or broken file is a usage error."""
    path = Path(directory) / RESULTS_JSON
    if not path.is_file():
        raise SpecbenchError(f"no {RESULTS_JSON} in {directory}: not a specbench results folder")
    try:
        payload = json.loads(path.read_text())
        return payload["metadata"], list(payload["records"])
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise SpecbenchError(f"{path} is not a readable specbench results file ({exc})") from exc
