"""The Triton launcher's choice between one program per request and the vocabulary split."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from specbench.kernels import launch


@pytest.fixture
def h100(monkeypatch):
    monkeypatch.setattr(launch, "_num_sms", lambda index: 132)
    return torch.device("cuda", 0)


@pytest.mark.parametrize("mode, batch, num_slots, split", [
    ("greedy", 64, 5, True),  # B=64 K=4: the split measured 109 vs 135 us (L=3), 82 vs 212 (all accepted)
    ("greedy", 128, 5, True),  # 640 rows <= 5 x 132
    ("greedy", 128, 8, False),  # B=128 K=7: one program per request 1.6x faster at L=3
    ("greedy", 512, 8, False),
    ("probabilistic", 33, 5, True),
    ("probabilistic", 64, 5, False),  # one program per request already wins at L=3 from B=64
    ("synthetic", 34, 4, False),
])
def test_the_split_rule_follows_the_measurements(h100, mode, batch, num_slots, split):
    assert launch._use_split(batch, num_slots, mode, h100) is split


def test_a_forced_strategy_and_the_cpu_ignore_the_table(h100):
    with launch.strategy("split"):
        assert launch._use_split(512, 8, "greedy", h100)
    with launch.strategy("sequential"):
        assert not launch._use_split(1, 2, "greedy", h100)
    assert not launch._use_split(1, 2, "greedy", torch.device("cpu"))
