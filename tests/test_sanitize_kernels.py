"""tests/sanitize_kernels.py: its hostile inputs are valid calls that reach the edges, and without a GPU
it says so and exits 2 (the sanitizer runs on the GPU machine: results/ keeps its clean output)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import check_invariants

from specbench.verification import verify

SCRIPT = Path(__file__).resolve().parent / "sanitize_kernels.py"
sys.path.insert(0, str(SCRIPT.parent))
from sanitize_kernels import hostile_inputs, truncation_units


@pytest.mark.parametrize("mode, draft", [("greedy", "none"), ("probabilistic", "none"), ("probabilistic", "logits"),
                                         ("probabilistic", "probs"), ("synthetic", "none")])
@pytest.mark.parametrize("target", ["logits", "probs"])
@pytest.mark.parametrize("batch, num_spec, vocab", [(70, 4, 53), (2, 0, 17), (4, 2, 1)])
def test_hostile_inputs_are_valid_calls_that_reach_the_edges(mode, draft, target, batch, num_spec, vocab):
    kwargs = hostile_inputs(batch, num_spec, vocab, draft, target, torch.float32, seed=batch + vocab)
    if mode == "synthetic":
        kwargs["acceptance_rates"] = [0.9, 0.6, 0.5, 0.2][:num_spec]
    result = verify(mode=mode, backend="torch", check_values=False, **kwargs)
    counts = kwargs["num_draft_tokens"].clamp(0, num_spec)
    check_invariants(result, counts, vocab, kwargs["draft_token_ids"])
    temperatures = kwargs["temperatures"]
    if batch >= 4:
        assert bool((temperatures == 0).any()) and bool(torch.isnan(temperatures).any())
        assert bool((temperatures < 0).any()) and bool((temperatures > 0).any())
    if mode != "greedy":  # the greedy mode reads no temperature: every request is greedy there
        invalid = ~(temperatures >= 0)
        assert int(result.num_emitted[invalid].sum()) == 0
    if num_spec:
        drafts = kwargs["draft_token_ids"]
        assert bool(((drafts < 0) | (drafts >= vocab)).any()) and bool((counts < num_spec).any())


def test_without_a_gpu_it_says_so_and_exits_2():
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the script would run the sanitizer")
    done = subprocess.run([sys.executable, str(SCRIPT), "--out", "unused"], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 2
    assert done.stderr.strip() == "no CUDA GPU here: the kernels' memory checks need one"


def _units(part: str, by_shape: bool, shard: tuple[int, int] = (1, 1)) -> tuple[list[tuple], int]:
    # (the truncated calls' (mode, draft, target, dtype, shape) a shard runs, how many times it asked `mine`)
    asked = 0

    def mine() -> bool:
        nonlocal asked
        asked += 1
        return (asked - 1) % shard[1] == shard[0] - 1

    calls = [(mode, draft, target, str(dtype), shape)
             for mode, draft, target, dtype, shapes in truncation_units(mine, part, by_shape) for shape in shapes]
    return calls, asked


@pytest.mark.parametrize("part", ["radix", "truncation", "topk"])
def test_sharding_by_shape_runs_every_shape_of_every_group_once(part):
    """--by-shape counts each shape of a group of truncated calls as a group of its own: one shard runs the same
    calls in the same order either way, and N shards share them, each call in exactly one, none with more than its
    share; without it a shard takes whole groups, as before (part radix: 12 groups, 30 shapes among them)."""
    whole, groups = _units(part, False)
    every, units = _units(part, True)
    assert every == whole and units == len(whole) > groups
    if part == "radix":
        assert (groups, units) == (12, 30)
    for count in (3, 7, units):
        shards = [_units(part, True, (index, count))[0] for index in range(1, count + 1)]
        assert sorted(call for shard in shards for call in shard) == sorted(whole)
        assert max(len(shard) for shard in shards) == -(-units // count)
        by_group = [_units(part, False, (index, count))[0] for index in range(1, count + 1)]
        assert sorted(call for shard in by_group for call in shard) == sorted(whole)
        homes = {}  # (without it: each group's calls all in one shard)
        for index, shard in enumerate(by_group):
            for call in shard:
                homes.setdefault(call[:4], set()).add(index)
        assert all(len(shards_of_group) == 1 for shards_of_group in homes.values())
