"""Results on disk: ``results.json`` (``metadata`` + ``records``) and a long-form CSV beside it.

Records are written after every finished case (the JSON through a temporary file and a rename),
so a run stopped by Ctrl-C leaves everything it finished readable. Charts and comparisons read
these files and never re-run anything. A folder kept for the record may hold ``results.json.gz``
instead (the same file, gzip-compressed): whatever reads a results folder or file reads either.
"""

from __future__ import annotations

import csv
import datetime as _dt
import gzip
import json
import math
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specbench import __version__
from specbench.errors import SpecbenchError

if TYPE_CHECKING:
    import pandas as pd

RESULTS_JSON = "results.json"
RESULTS_JSON_GZ = RESULTS_JSON + ".gz"  # the same file kept compressed (gzip), read wherever results.json is
RESULTS_CSV = "results.csv"
RESULTS_LONG_CSV = "results_long.csv"  # a sweep's one row per position (sweep.py)
# settings a results folder written before they were recorded is taken to hold, by metadata field: what
# those runs did (ten placements, the default until forty); resuming and comparing such a folder reads them in
UNRECORDED = {"timing": {"placements": 10}}
CSV_EVERY_S = 1.0  # ResultsWriter rewrites the CSV at most this often between flushes
# 2: kernels records keep their timing samples (`samples_us`); files without `schema_version` are 1
SCHEMA_VERSION = 2
# long per-record lists that belong in results.json, not in a spreadsheet's cells
_JSON_ONLY_FIELDS = ("samples_us",)
# the fields of results.json, as a JSON Schema (draft 2020-12) shipped with the package
SCHEMA_FILE = Path(__file__).resolve().parent / "schema" / "results.schema.json"


def git_commit() -> str:
    """The commit of the specbench checkout (with ``-dirty`` when it has changes), or ``unknown``.

    ``SPECBENCH_COMMIT`` in the environment wins: a copy of a working tree run elsewhere (a GPU
    machine, a container) may carry no ``.git`` or a stale one.
    """
    if os.environ.get("SPECBENCH_COMMIT"):
        return os.environ["SPECBENCH_COMMIT"]
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
        return "unknown"
    return commit + ("-dirty" if dirty else "")


def device_description(device: str = "cpu") -> dict[str, Any]:
    """Name, SM count, memory, UUID and driver of a CUDA device, or the CPU's description."""
    import torch  # here, not at the top: `kernels --devices` starts its workers without waiting for torch

    if str(device).startswith("cuda") and torch.cuda.is_available():
        props = torch.cuda.get_device_properties(torch.device(device))
        return {
            "device": props.name,
            "sm_count": props.multi_processor_count,
            "memory_gib": round(props.total_memory / 2**30, 1),
            "gpu_uuid": _uuid(props),
            "cuda": torch.version.cuda,
            "driver": nvidia_driver(),
        }
    model, architecture = cpu_model(), platform.machine()
    about = architecture if model in ("", architecture) else f"{model}, {architecture}"
    return {"device": f"cpu ({about}, {os.cpu_count()} cores)"}  # "cpu" first: compare reads CPU runs by it


def _uuid(props: Any) -> str | None:
    """The GPU's UUID (which physical card ran the run: a ``--devices`` worker's shard names its own), or
    None where this torch does not report it."""
    uuid = getattr(props, "uuid", None)
    return None if uuid is None else f"GPU-{uuid}"


def cpu_model() -> str:
    """The CPU's model name (``Intel(R) Xeon(R) Processor``): ``/proc/cpuinfo`` on Linux, ``sysctl`` on
    macOS, else what ``platform`` says (on Linux ``platform.processor()`` is often empty); "" if nothing does."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            for line in info:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and value.strip():
                    return " ".join(value.split())
    except OSError:
        pass
    if platform.system() == "Darwin":
        try:
            return subprocess.run(["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True,
                                  timeout=5, check=True).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    return platform.processor()


def nvidia_driver() -> str:
    """The NVIDIA driver's version (``unknown`` without nvidia-smi). ``SPECBENCH_DRIVER`` wins: ``--devices``
    asks nvidia-smi once and hands the answer to its workers."""
    if os.environ.get("SPECBENCH_DRIVER"):
        return os.environ["SPECBENCH_DRIVER"]
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
    import torch

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
        "schema_version": SCHEMA_VERSION,
        **device_description(device),
        **extra,
    }


def default_output_dir(kind: str) -> Path:
    """A new ``results/<kind>-<UTC timestamp>/``, created here so that two runs started in the same
    second never share it (the second one gets ``-2``, and so on)."""
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    for attempt in range(1, 1000):
        directory = Path("results") / (f"{kind}-{stamp}" if attempt == 1 else f"{kind}-{stamp}-{attempt}")
        try:
            directory.mkdir(parents=True)
        except FileExistsError:
            continue
        except OSError as exc:
            raise SpecbenchError(f"cannot create output folder {directory}: {exc.strerror}") from exc
        return directory
    raise SpecbenchError(f"results/ already holds 999 {kind} folders from {stamp}; pass --output")


# what a resumed run records of each earlier run into the same folder
EARLIER_RUN_FIELDS = ("command", "commit", "created", "specbench", "torch", "triton", "implementations",
                      "interpreted", "peak_bandwidth_gbps")


def open_output(
    output: Path | None, kind: str, resume: bool = False, same: dict[str, tuple[str, Any]] | None = None
) -> tuple[Path, list[dict], dict[str, Any]]:
    """The folder a ``kind`` run writes into, the records and the metadata it already holds.

    A folder that already holds results is refused unless the run resumes it (one holding another run's
    ``results.csv`` or ``results_long.csv`` without its ``results.json`` always); a resumed folder
    must hold a run of the same kind whose metadata has the values in ``same`` (metadata key ->
    (the option's name for messages, value): seed, timing settings, device, whatever makes its rows
    comparable), so one file never mixes two runs' settings. Without ``--output`` a new folder is
    made (``default_output_dir``). A folder given that does not exist yet is made when the run writes
    into it, with any folders missing above it (as ``mkdir -p``); an output *file* never makes its
    folder (``check_output_file``).
    """
    if output is None:
        if resume:
            raise SpecbenchError("--resume needs --output DIR, the folder of the run to continue")
        return default_output_dir(kind), [], {}
    if output.exists() and not output.is_dir():
        raise SpecbenchError(f"--output {output} is a file, not a folder")
    if (output / RESULTS_JSON_GZ).is_file():
        raise SpecbenchError(f"{output} holds {RESULTS_JSON_GZ}, a run kept compressed: choose another --output (or "
                             f"gunzip it to continue that run)")
    if not (output / RESULTS_JSON).is_file():
        tables = [name for name in (RESULTS_CSV, RESULTS_LONG_CSV) if (output / name).exists()]
        if tables:  # another run's table (its results.json removed or moved): a run would overwrite it
            raise SpecbenchError(f"{output} already holds {tables[0]}, another run's table (without a {RESULTS_JSON} "
                                 f"to resume): choose another --output")
        return output, [], {}
    if not resume:
        raise SpecbenchError(f"{output} already holds {RESULTS_JSON}; pass --resume to continue that run or choose "
                             f"another --output")
    metadata, records = read_results(output)
    if metadata.get("kind") != kind:
        raise SpecbenchError(f"{output} holds a {metadata.get('kind')} run, not a {kind} run; choose another --output")
    for name, (label, value) in (same or {}).items():
        before = metadata.get(name)
        if name not in metadata and not _said_as_given(value):  # a setting recorded since that run
            raise SpecbenchError(f"{output} holds a run that did not record its {label}, so rows timed with "
                                 f"{label} {_setting(value)} may not compare with its rows; choose another --output")
        if name in UNRECORDED and isinstance(before, dict):
            before = {**UNRECORDED[name], **before}
        if _said_as_given(value) or _said_as_given(before):  # a shard (I/N), or none given
            if value != before:
                grid = " over another grid of cases" if _setting(value) == _setting(before) else ""
                raise SpecbenchError(f"{label} {_setting(value)}{grid} differs from the run in {output} "
                                     f"({_setting(before)}); resume it with the same {label}")
        elif isinstance(value, dict) and isinstance(before, dict):
            changed = [key for key in value if before.get(key) != value[key]]
            if changed:
                key = changed[0]
                raise SpecbenchError(f"{label} setting {key} = {value[key]!r} differs from the run in {output} "
                                     f"({before.get(key)!r}); resume it with the same {label} options")
        elif before != value:
            raise SpecbenchError(f"{label} {_setting(value)} differs from the run in {output} ({_setting(before)}); "
                                 f"resume it with the same {label}")
    return output, records, metadata


def _said_as_given(value: Any) -> bool:
    # a setting a refusal names as the user gave it rather than as stored: none, or a shard's I/N
    return value is None or (isinstance(value, dict) and {"index", "count"} <= value.keys())


def _setting(value: Any) -> str:
    # a resumed setting as a user gave it: a shard as I/N, none as "none given"
    if value is None:
        return "none given"
    if _said_as_given(value):
        return f"{value['index']}/{value['count']}"
    return repr(value)


def output_folder(option: str, text: str | None) -> Path | None:
    """An output folder given as text (None: not given); an empty one, which a ``Path`` takes for the current
    folder, where the run would land unasked, is refused."""
    if text is None:
        return None
    if not text.strip():
        raise SpecbenchError(f"{option} needs a folder name, got {text!r}")
    return Path(text)


# the files of a results folder that its readers take
RUN_FILES = (RESULTS_JSON, RESULTS_JSON_GZ, RESULTS_CSV, RESULTS_LONG_CSV)


def check_output_file(option: str, path: Path, example: str, inputs: Sequence[Path] = ()) -> None:
    """Refuse an output file given as ``option`` before anything is run or written: a path that is a
    folder (the sentence suggests ``path / example``), one whose folder does not exist or takes no file, or one of the
    ``inputs`` (a file given, or a results folder's ``RUN_FILES``): writing there would replace what the
    command reads. A file never makes its folder: a typo in it would otherwise leave a report somewhere
    nobody looks."""
    if path.is_dir():
        raise SpecbenchError(f"{option} {path} is a folder; give a file name such as {path / example}")
    if not path.parent.is_dir():
        raise SpecbenchError(f"{option} {path}: no folder {path.parent} (an output file's folder must exist; "
                             f"create it first)")
    try:  # a folder that exists but takes no file (read-only, /proc): said now, not after the work
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".specbench-write-check-"):
            pass
    except OSError as exc:
        raise SpecbenchError(f"{option} {path}: cannot write in {path.parent} ({exc.strerror or exc})") from None
    target = path.resolve()
    for given in inputs:
        read = [given / name for name in RUN_FILES] if given.is_dir() else [given]
        if any(target == file.resolve() for file in read):
            raise SpecbenchError(f"{option} {path} is one of this command's inputs ({given}); writing it would "
                                 f"replace what is read: give another file")


def resumed_metadata(metadata: dict[str, Any], earlier: dict[str, Any]) -> dict[str, Any]:
    """``metadata`` of a run that continues ``earlier`` (its folder's metadata): every run listed."""
    if not earlier:
        return metadata
    runs = [*earlier.get("earlier_runs", []), {key: earlier.get(key) for key in EARLIER_RUN_FIELDS}]
    return {**metadata, "earlier_runs": runs}


class ResultsWriter:
    """Keeps ``results.json`` and ``results.csv`` of one run up to date, one record at a time.

    ``results.json`` (what ``--resume`` and ``merge`` read) is rewritten with every record; the CSV, a
    view of it, at most every ``CSV_EVERY_S`` seconds and at every ``flush`` (a run's end calls it, stopped
    or not): rewriting both for every record cost a 192-row run 4.8 s, growing with the square of its rows.
    """

    def __init__(self, directory: str | Path, metadata: dict[str, Any], records: list[dict] | None = None):
        self.directory = Path(directory)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SpecbenchError(f"cannot create output folder {self.directory}: {exc.strerror}") from exc
        self.metadata = metadata
        self.records: list[dict] = list(records or [])
        self._csv_written = 0.0
        self.flush()

    def add(self, record: dict) -> None:
        self.records.append(record)
        self._write(with_csv=time.monotonic() - self._csv_written >= CSV_EVERY_S)

    def flush(self) -> None:
        self._write(with_csv=True)

    def _write(self, with_csv: bool) -> None:
        payload = {"metadata": self.metadata, "records": self.records}
        tmp = self.directory / (RESULTS_JSON + ".tmp")
        try:
            tmp.write_text(json.dumps(payload, indent=2, default=_json_default) + "\n")
            tmp.replace(self.directory / RESULTS_JSON)
            if with_csv:
                _write_csv(self.records, self.directory / RESULTS_CSV)
                self._csv_written = time.monotonic()
        except OSError as exc:
            raise SpecbenchError(f"cannot write results into {self.directory}: {exc.strerror or exc}") from exc


def _json_default(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot write {type(value).__name__} to JSON")


def _flat(value: Any) -> Any:
    # a list-valued field as one ``;``-joined cell
    if isinstance(value, list):
        return ";".join(f"{x:.6g}" if isinstance(x, float) else str(x) for x in value)
    return value


def _csv_cell(value: Any) -> Any:
    # a CSV cell: lists joined, a missing number (None, NaN) empty
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return _flat(value)


def records_frame(records: list[dict]) -> pd.DataFrame:
    """Records as a long-form table; list-valued fields become ``;``-joined strings."""
    import pandas as pd  # here: a process that only reads, merges or writes records never loads pandas

    return pd.DataFrame([{k: _flat(v) for k, v in record.items()} for record in records])


def _write_csv(records: list[dict], path: Path) -> None:
    """``results.csv``: one row per record, the columns of every record in first-seen order (less the
    JSON-only fields), list fields ``;``-joined, a missing or null field empty. The ``csv`` module, not
    pandas: loading pandas cost every process 0.3-0.4 s before its first case."""
    columns = list(dict.fromkeys(key for record in records for key in record if key not in _JSON_ONLY_FIELDS))
    with open(path, "w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=columns, restval="", extrasaction="ignore",
                                       lineterminator="\n")
        if columns:
            writer.writeheader()
        writer.writerows({key: _csv_cell(value) for key, value in record.items()} for record in records)


def results_file(directory: str | Path) -> Path:
    """The results file of a folder (``results.json``, else ``results.json.gz``), or the file given (a
    ``results.json`` that is not there but kept compressed beside: the compressed one)."""
    given = Path(directory)
    if given.is_file():
        return given
    folder = given.parent if given.name == RESULTS_JSON else given
    if not (folder / RESULTS_JSON).is_file() and (folder / RESULTS_JSON_GZ).is_file():
        return folder / RESULTS_JSON_GZ
    return given if given.name == RESULTS_JSON else given / RESULTS_JSON


def read_text(path: Path) -> str:
    """A JSON file's text (UTF-8), decompressed where its name ends in ``.gz``; damaged or cut-short
    compressed data is an ``OSError``, as an unreadable file is."""
    if path.suffix != ".gz":
        return path.read_text(encoding="utf-8")
    try:
        with gzip.open(path, "rt", encoding="utf-8") as file:
            return file.read()
    except (zlib.error, EOFError) as exc:
        raise gzip.BadGzipFile(f"damaged compressed data ({exc})") from exc


def read_results(directory: str | Path) -> tuple[dict[str, Any], list[dict]]:
    """``(metadata, records)`` of a results folder (or its ``results.json`` or ``results.json.gz``
    itself); a missing or broken file is a usage error."""
    given = Path(directory)
    path = results_file(given)
    if not path.is_file():
        what = "no such folder" if not given.exists() else f"no {RESULTS_JSON} or {RESULTS_JSON_GZ} in it"
        raise SpecbenchError(f"{directory} is not a specbench results folder ({what})")
    try:
        payload = json.loads(read_text(path))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SpecbenchError(f"{path} is not a readable specbench results file ({exc})") from exc
    if not isinstance(payload, dict):
        found = {list: "a JSON list", str: "a JSON string", type(None): "null", bool: "a JSON true or false",
                 int: "a JSON number", float: "a JSON number"}[type(payload)]
        raise SpecbenchError(f"{path} is not a specbench results file: it holds {found}, not an object with "
                             f"'metadata' and 'records'")
    if not isinstance(payload.get("metadata"), dict) or not isinstance(payload.get("records"), list):
        raise SpecbenchError(f"{path} is not a specbench results file: it needs 'metadata' (an object) and 'records' "
                             f"(a list)")
    metadata, records = payload["metadata"], payload["records"]
    if not all(isinstance(record, dict) and "kind" in record for record in records):
        raise SpecbenchError(f"{path} is not a readable specbench results file (every record must be an object with "
                             f"a kind)")
    return metadata, records
