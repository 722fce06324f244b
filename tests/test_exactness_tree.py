"""Tree exactness: the float64 oracle shows every tree rule emits the target's law; ``specbench verify --tree``
passes the torch reference and the positive control and fails each tree negative control."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from specbench.oracle_tree import fixed_rows, fixed_rows_law, target_law, tree_law
from specbench.trees import full_tree, tree_depth

V = 5
SHAPES = {"2x2": full_tree(2, 2), "ragged": [-1, -1, -1, 0, 0, 1, 3]}


class _Model:
    """A target and a drafter whose laws depend on the tokens before them (a random law per prefix)."""

    def __init__(self, seed: int):
        self.rng, self.laws = np.random.default_rng(seed), {}

    def law(self, key: tuple, concentration: float) -> np.ndarray:
        if key not in self.laws:
            self.laws[key] = self.rng.dirichlet(np.full(V, concentration))
        return self.laws[key]

    def target(self, prefix: tuple) -> np.ndarray:
        return self.law(("p",) + prefix, 1.0)

    def draft(self, prefix: tuple) -> np.ndarray:
        return self.law(("q",) + prefix, 0.5)

    def step(self, parents, sampled: bool = False, **kwargs):
        """The tree step's law; ``sampled``: candidates drawn from the drafter (its law after the parent's path)."""
        draft_row = (lambda node, prefix: self.draft(prefix)) if sampled else kwargs.pop("draft_row", None)
        return tree_law(parents, lambda place, prefix: self.target(prefix), V, draft_row=draft_row, **kwargs)


def _largest_gap(law, model: _Model, length: int) -> float:
    want = target_law(length, model.target)
    got = law.continued(length, model.target)
    return max(abs(got.get(key, 0.0) - value) for key, value in want.items())


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("rule", ["independent", "without_replacement", "one-hot", "one-hot, repeats and absent"])
def test_every_tree_rule_emits_the_targets_law(shape, rule):
    parents = SHAPES[shape]
    longest = tree_depth(parents) + 1  # the emitted path and its final token
    for seed in range(3):
        model = _Model(seed)
        if rule in ("independent", "without_replacement"):
            law = model.step(parents, sampled=True, candidates=rule)
        else:
            tokens = [int(t) for t in np.random.default_rng(seed + 10).integers(0, V, len(parents))]
            if rule != "one-hot":
                tokens[1] = tokens[0]  # siblings repeating a token
                tokens[2] = -1  # an absent node
            law = model.step(parents, tokens=tokens)
        assert abs(sum(law.sequences.values()) - 1.0) < 1e-12
        # the first token follows p_root exactly, and so does every prefix continued by the target
        for length in range(1, longest + 2):
            assert _largest_gap(law, model, length) < 1e-12, (seed, length)


def test_fixed_candidates_tested_against_a_draft_law_they_did_not_come_from_are_not_exact():
    # the check above can fail: the same walk with tokens fixed but tested against q (as if drawn from it)
    model = _Model(0)
    law = model.step(SHAPES["2x2"], draft_row=lambda node, prefix: model.draft(prefix), tokens=[0, 1, 2, 3, 4, 0])
    assert _largest_gap(law, model, 1) > 1e-3


@pytest.mark.parametrize("candidates", ["independent", "without_replacement"])
def test_fixed_row_laws_agree_with_the_whole_sequence_law(candidates):
    rng = np.random.default_rng(4)
    parents = SHAPES["ragged"]
    target = rng.dirichlet(np.ones(V), size=len(parents) + 1)
    draft = rng.dirichlet(np.ones(V), size=len(parents))
    draft[1] = draft[2] = draft[0]  # siblings drawn without replacement share their row
    draft[4] = draft[3]
    target_row, draft_row = fixed_rows(target, draft)
    whole = tree_law(parents, target_row, V, draft_row=draft_row, candidates=candidates)
    per_slot = fixed_rows_law(parents, target, draft_rows=draft, candidates=candidates)
    assert np.allclose(per_slot.accepted_law, whole.accepted_law(3), atol=1e-14)
    for slot in range(4):
        assert np.allclose(per_slot.slot_laws[slot], whole.slot_law(slot, V), atol=1e-14)
    assert abs(per_slot.accepted_law.sum() - 1.0) < 1e-12


def test_synthetic_table_gives_the_positional_models_depth_law():
    # two children at the root (rates 0.5 then 0.4), one under each at depth 1 (rate 0.8):
    # P(A >= 1) = 0.5 + 0.5 * 0.4 = 0.7, P(A = 2) = 0.7 * 0.8
    parents = [-1, -1, 0, 1]
    target = np.full((5, V), 1.0 / V)
    law = fixed_rows_law(parents, target, tokens=[0, 1, 2, 3], rates=[[0.5, 0.4], [0.8, 0.0]])
    assert np.allclose(law.accepted_law, [0.3, 0.7 * 0.2, 0.7 * 0.8], atol=1e-15)
    assert np.allclose(law.node_reach, [0.5, 0.2, 0.4, 0.16], atol=1e-15)
    assert np.allclose(law.slot_laws[2], np.full(V, 1.0 / V))


def test_the_torch_reference_follows_the_oracle_on_a_small_tree():
    # one statistical look without the suite: the accepted-depth law of 4000 requests, chi-square
    from scipy import stats

    from specbench import verify
    from specbench.trees import batched

    generator = torch.Generator().manual_seed(2)
    parents, vocab, n = SHAPES["ragged"], 6, 4000
    target = torch.randn(len(parents) + 1, vocab, generator=generator)
    draft = torch.softmax(target[[0, 0, 0, 1, 1, 2, 4]] + torch.randn(len(parents), vocab, generator=generator), -1)
    drafts = torch.multinomial(draft.repeat(n, 1), 1, replacement=True, generator=generator).reshape(n, len(parents))
    result = verify(target.expand(n, -1, -1).contiguous(), drafts, draft_probs=draft.expand(n, -1, -1).contiguous(),
                    seeds=torch.arange(n), tree=batched(parents, n), backend="torch")
    law = fixed_rows_law(parents, torch.softmax(target.double(), -1).numpy(), draft_rows=draft.double().numpy())
    observed = np.bincount(result.num_accepted.numpy(), minlength=4)
    assert stats.chisquare(observed, law.accepted_law * n).pvalue > 1e-4


# --- specbench verify --tree ---------------------------------------------------------------------------------------

CPU = torch.device("cpu")


def _tree_suite(name: str, shape: str = "2x2", samples: int = 2000, seed: int = 1):
    from specbench.exactness_tree import TreeSuite
    from specbench.implementations import resolve
    from specbench.trees import parse_tree_shape

    impl = resolve(name)
    return TreeSuite(impl, CPU, list(impl.modes), parse_tree_shape(shape), samples=samples, seed=seed).run()


def _failed(checks) -> set[str]:
    return {c.name for c in checks if c.verdict == "FAIL"}


@pytest.mark.parametrize("name", ["torch", "textbook"])
def test_tree_suite_passes_the_reference_and_the_positive_control(name):
    checks = _tree_suite(name)
    assert not _failed(checks), [(c.name, c.detail) for c in checks if c.verdict == "FAIL"]
    tested = {c.name for c in checks if c.verdict == "pass"}
    assert any(name.startswith("token law, depth 2 (candidates without replacement") for name in tested)
    if name == "torch":  # specbench's streams: the exact checks run too
        assert sum(c.name == "a chain as a tree equals the chain" and c.verdict == "pass" for c in checks) == 3


def test_target_only_control_fails_where_candidates_came_from_q_only():
    failed = _failed(_tree_suite("control-tree-target-only"))
    for label in ("independent candidates, draft probs", "candidates without replacement, draft logits"):
        assert f"accepted-depth law ({label})" in failed
        assert f"token law, depth 1 ({label})" in failed
    # one-hot candidates are exactly what the target-only rule is right for
    assert not {name for name in failed if "one-hot candidates" in name}


def test_no_renormalise_control_fails_the_token_and_depth_laws():
    failed = _failed(_tree_suite("control-tree-no-renormalise"))
    for label in ("independent candidates, draft probs", "one-hot candidates (fixed tokens)"):
        assert f"accepted-depth law ({label})" in failed
        assert f"token law, depth 0 ({label})" in failed


def test_verify_tree_command_runs_and_refuses_what_it_cannot_check(tmp_path):
    import json

    from typer.testing import CliRunner

    from specbench.cli import app

    runner = CliRunner()
    report = tmp_path / "tree.json"
    passed = runner.invoke(app, ["verify", "--tree", "parents:-1,-1,0", "--impl", "torch", "-n", "1500",
                                 "--json", str(report)])
    assert passed.exit_code == 0, passed.output
    assert "torch (tree parents:-1,-1,0): 0 failed" in passed.stdout
    data = json.loads(report.read_text())
    assert data["metadata"]["tree"] == "parents:-1,-1,0" and data["implementations"][0]["facts"]["trees"] is True
    caught = runner.invoke(app, ["verify", "--tree", "2x2", "--impl", "control-tree-no-renormalise", "-n", "1500"])
    assert caught.exit_code == 1 and "FAIL" in caught.stdout
    for args, words in ((["--tree", "2y2"], "tree shape must read"), (["--tree", "2x2", "--method", "block"],
                                                                      "token method only")):
        refused = runner.invoke(app, ["verify", "--impl", "torch", *args])
        assert refused.exit_code == 2 and words in refused.output
    # an implementation that does not declare trees: nothing checked, which is a usage error
    nothing = runner.invoke(app, ["verify", "--tree", "2x2", "--impl", "control-residual-from-p", "-n", "500"])
    assert nothing.exit_code == 2 and "does not declare trees" in nothing.output


def test_path_and_ragged_checks_catch_samplers_that_break_them():
    from specbench.exactness_tree import TreeSuite
    from specbench.implementations import sampler
    from specbench.implementations.controls import tree_sample
    from specbench.trees import parse_tree_shape

    facts = {"draft": "probs", "target": "probs", "trees": True}

    @sampler(name="ignores-counts", **facts)
    def ignores_counts(*, target_probs, draft_probs, draft_token_ids, num_draft_tokens, seeds, tree_parents,
                       tree_candidates, **_):
        every = torch.full_like(num_draft_tokens, draft_token_ids.shape[1])
        return tree_sample(target_probs, draft_probs, draft_token_ids, every, tree_parents, tree_candidates, seeds)

    @sampler(name="wrong-path", **facts)
    def wrong_path(*, target_probs, draft_probs, draft_token_ids, num_draft_tokens, seeds, tree_parents,
                   tree_candidates, **_):
        result = tree_sample(target_probs, draft_probs, draft_token_ids, num_draft_tokens, tree_parents,
                             tree_candidates, seeds)
        return result._replace(accepted_nodes=result.accepted_nodes.flip(1))  # the path, back to front

    for impl, name in ((ignores_counts, "ragged trees: nothing past the count or absent accepted"),
                       (wrong_path, "paths and tokens agree (independent candidates, draft probs)")):
        checks = TreeSuite(impl, CPU, ["probabilistic"], parse_tree_shape("2x2"), samples=600, seed=3).run()
        assert name in _failed(checks), impl.name


# --- wide trees: what each mode can check --------------------------------------------------------------------------


def test_the_oracle_walks_a_node_of_a_thousand_children():
    # the children of a place are walked one after another without a stack frame each (1024: the most a shape has)
    rng = np.random.default_rng(4)
    parents = [-1] * 1024
    p = rng.dirichlet(np.ones(V), size=len(parents) + 1)
    q = rng.dirichlet(np.ones(V), size=len(parents))
    law = fixed_rows_law(parents, p, draft_rows=q)
    np.testing.assert_allclose(law.slot_laws[0], p[0], atol=1e-12)  # exact: the first token follows the root's p
    synthetic = fixed_rows_law(parents, p, draft_rows=q, rates=[[0.7, 0.5, 0.4]])
    none_accepted = 0.3 * 0.5 * 0.6  # ranks past the table's accept nothing
    np.testing.assert_allclose(synthetic.accepted_law, [none_accepted, 1 - none_accepted], atol=1e-12)


def test_the_probabilistic_mode_takes_at_most_six_children_a_node_and_the_others_any():
    from specbench import cli_verify
    from specbench.errors import SpecbenchError
    from specbench.exactness_tree import MAX_PROBABILISTIC_CHILDREN, TreeSuite, check_tree_modes
    from specbench.implementations import resolve

    assert MAX_PROBABILISTIC_CHILDREN == cli_verify.HELP_MAX_CHILDREN == 6  # --help names it without torch
    check_tree_modes(full_tree(6, 2), ["greedy", "probabilistic", "synthetic"])
    check_tree_modes(full_tree(1024, 1), ["greedy", "synthetic"])
    with pytest.raises(SpecbenchError, match="node 0 of tree parents:-1,0,0,0,0,0,0,0 has 7 children"):
        check_tree_modes([-1, 0, 0, 0, 0, 0, 0, 0], ["probabilistic"])
    with pytest.raises(SpecbenchError, match="the root of tree parents:.* has 17 children, more than the 6"):
        TreeSuite(resolve("torch"), CPU, ["probabilistic"], full_tree(17, 1), samples=100)
    # a tree wider than the vocabulary (16) and one of 1024 children, in the modes that take any tree
    for shape, modes in (((17, 1), ["greedy", "synthetic"]), ((1024, 1), ["synthetic"])):
        checks = TreeSuite(resolve("torch"), CPU, modes, full_tree(*shape), samples=100, seed=1).run()
        assert not _failed(checks) and all(c.verdict == "pass" for c in checks), [(c.name, c.detail) for c in checks]


@pytest.mark.parametrize("shape", ["17x1", "1024x1", "7x1"])
@pytest.mark.parametrize("modes", [[], ["-m", "probabilistic"], ["-m", "greedy,probabilistic"]])
def test_verify_refuses_a_tree_too_wide_to_check_before_it_runs(shape, modes, tmp_path, capsys):
    from specbench import cli

    report = tmp_path / "verify.json"
    assert cli.run(["verify", "--tree", shape, "--impl", "torch", *modes, "-n", "200", "--json", str(report)]) == 2
    out, err = capsys.readouterr()
    assert not out and not report.exists() and len(err.strip().splitlines()) == 1, (out, err)
    assert f"the root of tree {shape} has {shape[:-2]} children, more than the 6 the probabilistic mode" in err
    assert "check this tree with --mode greedy,synthetic" in err


def test_verify_refuses_more_requests_than_a_large_trees_reference_fits_in_memory(monkeypatch, capsys):
    from specbench import cli, machine
    from specbench.exactness import BYTES_PER_REQUEST
    from specbench.exactness_tree import BYTES_PER_NODE_PAIR

    monkeypatch.setattr(machine, "memory_bytes", lambda device: 16 * 2**30)
    assert cli.run(["verify", "--tree", "1024x1", "--impl", "torch", "-m", "greedy,synthetic"]) == 2
    out, err = capsys.readouterr()
    most = 16 * 2**30 // (BYTES_PER_REQUEST + BYTES_PER_NODE_PAIR * 1024**2)
    assert not out and len(err.strip().splitlines()) == 1, (out, err)
    assert "--samples 20,000 needs about 234 GiB (12.0 MiB a request for a tree of 1024 nodes" in err
    assert f"give at most {most:,}" in err


@pytest.mark.parametrize(("args", "said"), [
    (["--tree", "2x2,chain:3"], ("verify --tree takes one tree shape, got 2 in '2x2,chain:3'; run verify once for "
                                 "each of 2x2, chain:3")),
    (["--tree", "parents:-1,0,chain:3"], "verify --tree takes one tree shape, got 2"),
    (["--tree", "2y2"], "tree shape must read chain:K, WxD or parents:-1,0,..., got '2y2'"),
    (["-m", "greedy", "--tree", "2x2", "--tree", "chain:3"], "--tree was given 2 times"),
])
def test_verify_takes_one_tree_shape_of_the_forms_it_checks(args, said, capsys):
    from specbench import cli

    assert cli.run(["verify", "--impl", "torch", *args]) == 2
    out, err = capsys.readouterr()
    assert not out and len(err.strip().splitlines()) == 1 and said in err, err
    assert "sequoia" not in err  # verify refuses sequoia:N (it has no rates to choose one with)
