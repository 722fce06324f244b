"""``specbench merge``: the shards of one sharded run (``shards.py``) joined into one results folder.

The slices must be one run cut in pieces, or merging them would make a table whose rows were not
measured alike. Refused, with one sentence naming the two folders and the value:

- a folder that was not run with ``--shard``, or holds another kind of run than the first;
- a record merge cannot read (hand-edited): a field of its case's key (``records.KEY_FIELDS``) or its
  case position missing or of another type, or a shard label that is not two whole numbers;
- a different commit, or different settings: seed, timing, implementations, the planned grid
  (``case_grid``, ``num_cases``), the sweep's steps, cost ratios and profiles, torch's CPU threads,
  the versions of specbench, torch, Triton and Python;
- a different machine type: device name, SM count, memory (hosts may differ: that is the point);
- overlapping cases: one shard given twice, or one case (``records.record_key`` of a kernels row, the
  case index of a sweep) in two folders;
- a shard count that differs between folders, or an incomplete set (a shard missing, or one whose
  run was interrupted or killed), unless ``allow_partial``; a partial merge says which are missing.

The merged metadata is the first shard's without ``shard``, so ``compare``, ``plot`` and ``export``
read it as an unsharded run, plus ``merged_from`` (each shard's folder, host, GPU UUID, start time, command,
load averages and, for kernels, measured copy bandwidth). The records are ordered by case position,
as one process would have written them.
"""

from __future__ import annotations

import shlex
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from specbench import results
from specbench.errors import SpecbenchError

SETTINGS = {
    "kernels": ("seed", "timing", "implementations", "implementation_facts", "conversion", "interpreted", "threads",
                "num_cases", "case_grid"),
    "sweep": ("seed", "backend", "num_requests", "cost_ratio", "scenario", "profiles", "num_cases", "confidence",
              "family_bug_alpha", "threads"),
}
VERSIONS = ("specbench", "torch", "triton", "python")
MACHINE = ("device", "sm_count", "memory_gib")
# what each shard keeps in the merged run's `merged_from` (gpu_uuid: the card it ran on)
SHARD_FIELDS = ("host", "gpu_uuid", "created", "command", "interrupted", "load_average_start", "load_average_end",
                "peak_bandwidth_gbps")


class Merged(NamedTuple):
    """The merged run: its folder, metadata and records (already written there)."""

    folder: Path
    metadata: dict[str, Any]
    records: list[dict]


def _case_key(kind: str, record: dict) -> tuple:
    from specbench.records import record_key

    return record_key(record) if kind == "kernels" else (record.get("case"),)


def _check_alike(first: tuple[Path, dict], other: tuple[Path, dict], kind: str) -> None:
    (first_dir, first_meta), (other_dir, other_meta) = first, other
    if other_meta.get("kind") != kind:
        raise SpecbenchError(f"{other_dir} holds a {other_meta.get('kind')} run and {first_dir} a {kind} run; merge "
                             f"slices of one run")
    pairs = f"{first_dir} and {other_dir}"
    if first_meta.get("commit") != other_meta.get("commit"):
        raise SpecbenchError(f"{pairs} were made at different commits ({first_meta.get('commit')} vs "
                             f"{other_meta.get('commit')}); merge slices of one commit")
    for key in MACHINE:
        if first_meta.get(key) != other_meta.get(key):
            raise SpecbenchError(f"{pairs} ran on different machine types ({key} {first_meta.get(key)!r} vs "
                                 f"{other_meta.get(key)!r}); merge slices run on one type of machine")
    for key in (*SETTINGS[kind], *VERSIONS):
        if first_meta.get(key) != other_meta.get(key):
            raise SpecbenchError(f"{pairs} were run with different settings ({key} {first_meta.get(key)!r} vs "
                                 f"{other_meta.get(key)!r}); merge slices run with the same options")
    if first_meta["shard"]["count"] != other_meta["shard"]["count"]:
        raise SpecbenchError(f"{first_dir} is shard {first_meta['shard']['index']}/{first_meta['shard']['count']} and "
                             f"{other_dir} shard {other_meta['shard']['index']}/{other_meta['shard']['count']}; merge "
                             f"the shards of one split")


def _read(folders: Sequence[Path]) -> list[tuple[Path, dict, list[dict]]]:
    from specbench.records import KEY_FIELDS, WHOLE, refuse_unreadable

    # what merge reads of a record: the fields of its key (record_key) and the case position it sorts by
    fields = {"kernels": {**KEY_FIELDS, "case": (WHOLE, False)}, "sweep": {"case": (WHOLE, False)}}
    runs = []
    for folder in folders:
        metadata, records = results.read_results(folder)
        shard = metadata.get("shard")
        if not isinstance(shard, dict) or not {"index", "count"} <= set(shard):
            raise SpecbenchError(f"{folder} was not run with --shard; merge joins the shards of one sharded run")
        if not all(isinstance(shard[key], int) and not isinstance(shard[key], bool) for key in ("index", "count")):
            raise SpecbenchError(f"{folder} names its shard {shard['index']!r}/{shard['count']!r}, not two whole "
                                 f"numbers; merge joins the shards of one sharded run as --shard wrote them")
        if metadata.get("kind") not in SETTINGS:
            raise SpecbenchError(f"{folder} holds a {metadata.get('kind')} run; merge joins kernels and sweep shards")
        refuse_unreadable(folder, records, fields[metadata["kind"]], "so merge cannot tell which case it is")
        runs.append((Path(folder), metadata, records))
    return runs


def _missing(runs: list[tuple[Path, dict, list[dict]]]) -> list[str]:
    """Why the set is incomplete: shards absent, shards interrupted or killed (one phrase each)."""
    count = runs[0][1]["shard"]["count"]
    present = {metadata["shard"]["index"] for _, metadata, _ in runs}
    found = [f"shard {index}/{count} is not among them" for index in range(1, count + 1) if index not in present]
    for folder, metadata, _ in runs:
        if metadata.get("interrupted") is not False:
            how = "was interrupted" if metadata.get("interrupted") else "did not finish (killed, or still running)"
            found.append(f"the run in {folder} {how}")
    return found


def merge_runs(folders: Sequence[Path], output: Path | None = None, allow_partial: bool = False) -> Merged:
    """Check the shards in ``folders`` (module docstring), join them and write the run to ``output``
    (default ``results/<kind>-<timestamp>/``; a folder that already holds results is refused)."""
    if not folders:
        raise SpecbenchError("merge needs the folders of the shards to join, got none")
    runs = _read(folders)
    first_dir, first_meta, _ = runs[0]
    kind = first_meta["kind"]
    seen_shards: dict[int, Path] = {}
    owner: dict[tuple, Path] = {}
    for folder, metadata, records in runs:
        _check_alike((first_dir, first_meta), (folder, metadata), kind)
        index = metadata["shard"]["index"]
        if index in seen_shards:
            raise SpecbenchError(f"{seen_shards[index]} and {folder} both hold shard {index}/"
                                 f"{metadata['shard']['count']}; their cases overlap, give each shard once")
        seen_shards[index] = folder
        for record in records:
            key = _case_key(kind, record)
            if key in owner:
                raise SpecbenchError(f"{owner[key]} and {folder} both hold the case {_label(kind, record)}; merge "
                                     f"shards whose cases do not overlap")
            owner[key] = folder
    missing = _missing(runs)
    if missing and not allow_partial:
        raise SpecbenchError(f"the shards are incomplete: {'; '.join(missing)}; run the missing shards, or pass "
                             f"--allow-partial to merge what is there")
    runs.sort(key=lambda run: run[1]["shard"]["index"])
    records = [record for _, _, shard_records in runs for record in shard_records]
    records.sort(key=lambda record: record.get("case", -1))  # stable: a case's rows keep their order
    metadata = _merged_metadata(runs, missing)
    if output is None:
        output = results.default_output_dir(kind)
    elif (output / results.RESULTS_JSON).is_file() or (output / results.RESULTS_JSON_GZ).is_file():
        raise SpecbenchError(f"{output} already holds a results file; choose another --output")
    elif output.exists() and not output.is_dir():
        raise SpecbenchError(f"--output {output} is a file, not a folder")
    results.ResultsWriter(output, metadata, records)
    if kind == "sweep":
        from specbench import sweep

        sweep.write_long_csv(records, output)
    return Merged(output, metadata, records)


def _label(kind: str, record: dict) -> str:
    if kind == "kernels":
        from specbench.compare_inputs import kernels_label

        return kernels_label(record)
    return f"{record.get('case')} ({record.get('profile')})"


def _largest(values: list) -> float | None:
    numbers = [value for value in values if isinstance(value, (int, float))]
    return max(numbers) if numbers else None


def _merged_metadata(runs: list[tuple[Path, dict, list[dict]]], missing: list[str]) -> dict[str, Any]:
    metas = [metadata for _, metadata, _ in runs]
    merged = {key: value for key, value in metas[0].items() if key != "shard"}
    merged.update(
        host=", ".join(dict.fromkeys(str(m.get("host")) for m in metas)),
        created=min(str(m.get("created")) for m in metas),
        command=" ".join(shlex.quote(a) for a in ["specbench", *sys.argv[1:]]),
        interrupted=any(m.get("interrupted") is not False for m in metas),
        load_average_start=_largest([m.get("load_average_start") for m in metas]),
        load_average_end=_largest([m.get("load_average_end") for m in metas]),
        merged_from=[{"folder": str(folder), "shard": metadata["shard"],
                      **{key: metadata.get(key) for key in SHARD_FIELDS if key in metadata}}
                     for folder, metadata, _ in runs],
        shard_count=metas[0]["shard"]["count"],
        partial=bool(missing),
    )
    if missing:
        merged["missing"] = missing
    earlier = [run for m in metas for run in m.get("earlier_runs", [])]
    if earlier:
        merged["earlier_runs"] = earlier
    peaks = [m["peak_bandwidth_gbps"] for m in metas if isinstance(m.get("peak_bandwidth_gbps"), (int, float))]
    if "peak_bandwidth_gbps" in merged:  # each row's % peak used its own shard's, listed in merged_from
        merged["peak_bandwidth_gbps"] = statistics.median(peaks) if peaks else None
    if merged.get("kind") == "sweep":
        positions = sum(m.get("simulated_positions") or 0 for m in metas)
        seconds = sum(m.get("simulation_seconds") or 0.0 for m in metas)
        merged.update(finished_cases=sum(m.get("finished_cases") or 0 for m in metas), simulated_positions=positions,
                      simulation_seconds=seconds, positions_per_second=positions / seconds if seconds > 0 else None)
    return merged
