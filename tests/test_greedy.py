"""Greedy verification: exact tables, ties, ragged and invalid drafts, NaN/inf rows, greedy rows in mixed batches."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import interpreted

from specbench import oracle

V = 5
NAN, INF = math.nan, math.inf


def _rows(argmaxes: list[int], vocab: int = V, seed: int = 0) -> torch.Tensor:
    # [len(argmaxes), vocab] logits whose unique maximum sits at each given id
    generator = torch.Generator().manual_seed(seed)
    rows = torch.rand(len(argmaxes), vocab, generator=generator)
    for row, best in zip(rows, argmaxes):
        row[best] = 2.0
    return rows


# (argmax of rows 0..3, drafts of slots 0..2, num_draft_tokens, expected output_token_ids)
TABLE = [
    ([1, 2, 3, 4], [1, 2, 3], 3, [1, 2, 3, 4]),  # all accepted, bonus from row 3
    ([1, 2, 3, 4], [0, 2, 3], 3, [1, -1, -1, -1]),  # first draft wrong: emit argmax of row 0
    ([1, 2, 3, 4], [1, 0, 3], 3, [1, 2, -1, -1]),
    ([1, 2, 3, 4], [1, 2, 0], 3, [1, 2, 3, -1]),
    ([1, 2, 3, 4], [1, 2, 3], 1, [1, 2, -1, -1]),  # ragged: one draft, bonus from row 1
    ([1, 2, 3, 4], [4, 4, 4], 0, [1, -1, -1, -1]),  # no draft: only the bonus of row 0
    ([1, 2, 3, 4], [1, -1, 3], 3, [1, 2, -1, -1]),  # -1 is a rejected draft
    ([1, 2, 3, 4], [V, 2, 3], 3, [1, -1, -1, -1]),  # id V is out of range: rejected
    ([1, 2, 3, 4], [1, 10**12, 3], 3, [1, 2, -1, -1]),
    ([1, 2, 3, 4], [-7, 2, 3], 3, [1, -1, -1, -1]),
    ([0, 0, 0, 0], [0, 0, 0], 2, [0, 0, 0, -1]),  # slots past num_draft_tokens are never read
]


def test_greedy_table(run_verify):
    target = torch.stack([_rows(argmaxes, seed=b) for b, (argmaxes, _, _, _) in enumerate(TABLE)])
    drafts = torch.tensor([d for _, d, _, _ in TABLE], dtype=torch.int64)
    counts = torch.tensor([n for _, _, n, _ in TABLE], dtype=torch.int32)
    result = run_verify(target, drafts, mode="greedy", num_draft_tokens=counts)
    expected = torch.tensor([e for _, _, _, e in TABLE])
    assert result.output_token_ids.tolist() == expected.tolist()
    assert result.num_emitted.tolist() == (expected >= 0).sum(dim=1).tolist()
    assert result.num_accepted.tolist() == ((expected >= 0).sum(dim=1) - 1).tolist()


def test_argmax_ties_go_to_the_lowest_id(run_verify):
    row = torch.tensor([0.0, 3.0, 1.0, 3.0, 3.0])
    target = torch.stack([torch.stack([row, row]), torch.stack([row, row])])  # [2, 2, V]
    drafts = torch.tensor([[3], [1]])  # a tied id that is not the lowest is rejected; the lowest is accepted
    result = run_verify(target, drafts, mode="greedy")
    assert result.output_token_ids.tolist() == [[1, -1], [1, 1]]


def test_nan_and_inf_logits(run_verify):
    rows = torch.tensor(
        [
            [NAN, 1.0, NAN, 0.5, -INF],  # NaN counts as -inf: argmax 1
            [1.0, INF, 2.0, INF, NAN],  # +inf ties: the lowest +inf id
            [NAN, NAN, NAN, NAN, NAN],  # no finite value: the request stops here
            [-INF, -INF, -INF, -INF, -INF],
            [-INF, -INF, -INF, 0.0, -INF],
        ]
    )
    # request 0: rows 0, 1, then the NaN row 2 stops it after accepting both drafts
    # request 1: row 3 (all -inf) first: nothing emitted at all
    # request 2: row 4 then row 1: the bonus row decides
    target = torch.stack([rows[[0, 1, 2]], rows[[3, 0, 1]], rows[[4, 1, 2]]])
    drafts = torch.tensor([[1, 1], [0, 1], [3, 2]])
    counts = torch.tensor([2, 2, 1], dtype=torch.int32)
    result = run_verify(target, drafts, mode="greedy", num_draft_tokens=counts)
    assert result.output_token_ids.tolist() == [[1, 1, -1], [-1, -1, -1], [3, 1, -1]]
    assert result.num_emitted.tolist() == [2, 0, 2]
    assert result.num_accepted.tolist() == [2, 0, 1]


def _greedy_decode(target: torch.Tensor, drafts: torch.Tensor, counts: torch.Tensor) -> list[list[int]]:
    # what greedy decoding of the target alone gives, one request and one row at a time
    outputs = []
    for rows, request_drafts, n in zip(target, drafts.tolist(), counts.tolist()):
        tokens = []
        for i in range(n + 1):
            best = oracle.greedy_token(rows[i])
            if best < 0:
                break
            tokens.append(best)
            if i == n or request_drafts[i] != best:
                break
        outputs.append(tokens + [-1] * (rows.shape[0] - len(tokens)))
    return outputs


@pytest.mark.parametrize(("batch", "num_spec", "vocab"), [(99, 3, 111), (1, 7, 1), (7, 1, 111), (13, 7, 32_001)])
def test_greedy_equals_greedy_decoding_of_the_target(run_verify, backend, batch, num_spec, vocab):
    if backend != "torch" and vocab > 1000:
        batch = 2  # the interpreter walks big rows slowly
    elif interpreted(backend):
        batch = min(batch, 20)  # and takes tens of ms a request; the batch picks launch shapes on a GPU only
    generator = torch.Generator().manual_seed(batch * 1000 + num_spec)
    target = torch.randn(batch, num_spec + 1, vocab, generator=generator)
    best = target[:, :num_spec].argmax(dim=-1)
    # drafts right about 70% of the time, so every accepted length shows up
    wrong = torch.randint(-1, vocab + 1, (batch, num_spec), generator=generator)
    drafts = torch.where(torch.rand(batch, num_spec, generator=generator) < 0.7, best, wrong)
    counts = torch.randint(0, num_spec + 1, (batch,), generator=generator, dtype=torch.int32)
    result = run_verify(target, drafts, mode="greedy", num_draft_tokens=counts)
    assert result.output_token_ids.tolist() == _greedy_decode(target, drafts, counts)


def test_argmax_across_a_large_odd_vocabulary(run_verify):
    vocab = 100_003
    target = torch.zeros(2, 2, vocab)
    target[:, :, 70_001] = 5.0  # tied with the last id: the lower id must win across chunks
    target[:, :, vocab - 1] = 5.0
    target[1, 1, vocab - 1] = 6.0  # request 1's bonus row has its maximum in the very last slot
    drafts = torch.tensor([[vocab - 1], [70_001]])
    result = run_verify(target, drafts, mode="greedy")
    assert result.output_token_ids.tolist() == [[70_001, -1], [70_001, vocab - 1]]


@pytest.mark.parametrize("mode", ["probabilistic", "synthetic"])
def test_greedy_rows_inside_a_sampled_batch(run_verify, mode):
    # temperature 0 rows follow the greedy rule in the probabilistic mode; in the synthetic mode
    # acceptance follows the profile and a rejected or bonus greedy row emits its argmax
    generator = torch.Generator().manual_seed(11)
    batch, num_spec, vocab = 12, 3, 9
    target = torch.randn(batch, num_spec + 1, vocab, generator=generator)
    best = target[:, :num_spec].argmax(dim=-1)
    drafts = torch.where(torch.rand(batch, num_spec, generator=generator) < 0.6, best, (best + 1) % vocab)
    temperatures = torch.tensor([0.0, 1.0, 0.0, 2.0] * 3)
    keywords = {"seeds": torch.arange(batch), "temperatures": temperatures}
    if mode == "synthetic":
        keywords["acceptance_rates"] = [0.9, 0.6, 0.3]
    mixed = run_verify(target, drafts, mode=mode, **keywords)
    greedy_rows = temperatures == 0
    if mode == "probabilistic":
        greedy = run_verify(target, drafts, mode="greedy")
        assert torch.equal(mixed.output_token_ids[greedy_rows], greedy.output_token_ids[greedy_rows])
    else:
        tokens, accepted = mixed.output_token_ids, mixed.num_accepted
        for b in torch.nonzero(greedy_rows)[:, 0].tolist():
            a = int(accepted[b])
            assert tokens[b, a] == oracle.greedy_token(target[b, a])


def test_greedy_accepts_bfloat16_logits(run_verify):
    generator = torch.Generator().manual_seed(3)
    target = torch.randn(9, 4, 40, generator=generator).to(torch.bfloat16)
    drafts = target[:, :3].float().argmax(dim=-1)
    drafts[::2, 1] = -1
    sixteen = run_verify(target, drafts, mode="greedy")
    thirty_two = run_verify(target.float(), drafts, mode="greedy")
    assert torch.equal(sixteen.output_token_ids, thirty_two.output_token_ids)
    assert sixteen.num_accepted.tolist() == [1, 3, 1, 3, 1, 3, 1, 3, 1]
