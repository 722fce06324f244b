"""Draft trees: the layout and its checks, shape strings, converters from SGLang's and EAGLE's layouts, and
the torch reference's tree walk (a chain given as a tree is the chain, bit for bit, in every mode)."""

from __future__ import annotations

import math

import pytest
import torch

from specbench import acceptance
from specbench.errors import SpecbenchError
from specbench.trees import (
    DraftTree,
    batched,
    check_parents,
    children,
    depths,
    from_retrieve_indices,
    from_sglang,
    from_tree_choices,
    full_tree,
    parse_tree_shape,
    tensor_depths,
    to_sglang,
    tree_depth,
)
from specbench.verification import VerifyResult, verify

# --- layout, shapes, helpers ---------------------------------------------------------------------------------------


def test_shape_strings_give_the_parents_a_reader_would_write():
    assert parse_tree_shape("chain:3") == [-1, 0, 1]
    # 2x2: two children of the root, then two under each of them, level by level
    assert parse_tree_shape("2x2") == [-1, -1, 0, 0, 1, 1]
    assert parse_tree_shape("1x3") == [-1, 0, 1]
    assert len(parse_tree_shape("3x3")) == 3 + 9 + 27
    assert parse_tree_shape("parents:-1,0,0,1") == [-1, 0, 0, 1]


@pytest.mark.parametrize("text, words", [
    ("chain:0", ["chain:0", "1..64"]),
    ("chain:x", ["chain:x"]),
    ("0x3", ["W must lie"]),
    ("parents:-1,1", ["node 1", "earlier node"]),
    ("parents:-1,a", ["whole numbers"]),
    ("9x9", ["nodes, more than"]),
    ("star", ["chain:K", "'star'"]),
    ("sequoia:5", ["positional acceptance rates"]),
])
def test_bad_shape_strings_are_named(text, words):
    with pytest.raises(SpecbenchError) as error:
        parse_tree_shape(text)
    for word in words:
        assert word in str(error.value)


def test_depths_children_and_depth_of_a_hand_drawn_tree():
    #        root
    #       /    \
    #      0      1
    #     / \     |
    #    2   3    4
    #    |
    #    5
    parents = [-1, -1, 0, 0, 1, 2]
    assert depths(parents) == [0, 0, 1, 1, 1, 2]
    assert children(parents) == [[0, 1], [2, 3], [4], [5], [], [], []]
    assert tree_depth(parents) == 3 and tree_depth([-1, 0, 1, 2]) == 4 and tree_depth([]) == 0
    batch = torch.tensor([parents, [-1, 0, 1, 2, 3, 4]])
    assert tensor_depths(batch).tolist() == [[0, 0, 1, 1, 1, 2], [0, 1, 2, 3, 4, 5]]
    assert full_tree(2, 2) == [-1, -1, 0, 0, 1, 1]
    with pytest.raises(SpecbenchError, match="node 2"):
        check_parents([-1, 0, 2])


# --- converters ----------------------------------------------------------------------------------------------------


def test_sglang_layout_converts_by_its_sibling_lists():
    # SGLang's own verify_tree_greedy example: node 0 is the root of each row
    candidates = torch.tensor([[0, 1, 2, 3, 4, 5], [7, 8, 9, 10, 11, 12]])
    next_token = torch.tensor([[1, 2, -1, 4, 5, -1], [4, 2, 3, -1, 5, -1]])
    next_sibling = torch.tensor([[-1, 3, -1, -1, -1, -1], [-1, -1, -1, -1, 1, -1]])
    index = torch.tensor([[0, 1, 2, 3, 4, 5], [6, 7, 8, 9, 10, 11]])
    got = from_sglang(candidates, next_token, next_sibling, index)
    # row 0 by hand: root -> 1 (sibling 3); 1 -> 2; 3 -> 4 -> 5. Level order: 1, 3 | 2, 4 | 5
    #   parents 1 -> root, 3 -> root, 2 -> 1 (ours 0), 4 -> 3 (ours 1), 5 -> 4 (ours 3)
    # row 1 by hand: root -> 4 (sibling 1); 4 -> 5; 1 -> 2 -> 3. Level order: 4, 1 | 5, 2 | 3
    #   parents 4 -> root, 1 -> root, 5 -> 4 (ours 0), 2 -> 1 (ours 1), 3 -> 2 (ours 3)
    assert got.tree.parents.tolist() == [[-1, -1, 0, 1, 3], [-1, -1, 0, 1, 3]]
    assert got.node_index.tolist() == [[1, 3, 2, 4, 5], [4, 1, 5, 2, 3]]
    assert got.draft_token_ids.tolist() == [[1, 3, 2, 4, 5], [11, 8, 12, 9, 10]]
    assert got.row_index.tolist() == [[0, 1, 3, 2, 4, 5], [6, 10, 7, 11, 8, 9]]
    assert got.num_draft_tokens.tolist() == [5, 5]
    # the greedy walk on SGLang's example, by hand: row 0's target argmaxes are 3 at the root, 4 after node 3
    # and 5 after node 4, every other row 18: it accepts nodes 3, 4, 5 (tokens 3, 4, 5) and emits 18 at the
    # leaf; row 1's are 11 at the root, 12 after node 4: it accepts nodes 4, 5 (tokens 11, 12), then 18
    logits = torch.full((2, 6, 20), 1.0)
    logits[0, 0, 3] = logits[0, 3, 4] = logits[0, 4, 5] = 10
    logits[1, 0, 11] = logits[1, 4, 12] = 10
    logits[logits.amax(-1) < 10] = torch.nn.functional.one_hot(torch.tensor(18), 20) * 9.0 + 1.0
    ours = logits.reshape(12, 20)[got.row_index]
    result = verify(ours, got.draft_token_ids, mode="greedy", tree=got.tree, num_draft_tokens=got.num_draft_tokens,
                    backend="torch")
    assert result.output_token_ids.tolist() == [[3, 4, 5, 18, -1, -1], [11, 12, 18, -1, -1, -1]]
    assert result.num_accepted.tolist() == [3, 2]
    # as our node indices: SGLang's 3, 4, 5 are ours 1, 3, 4 in row 0; its 4, 5 ours 0, 2 in row 1
    assert result.accepted_nodes.tolist() == [[1, 3, 4, -1, -1], [0, 2, -1, -1, -1]]


def test_sglang_nodes_no_list_reaches_are_padding_and_a_cycle_is_refused():
    got = from_sglang(torch.tensor([[0, 5, 6, 7]]), torch.tensor([[1, -1, -1, -1]]), torch.tensor([[-1, -1, -1, -1]]))
    assert got.tree.parents.tolist() == [[-1, -1, -1]] and got.num_draft_tokens.tolist() == [1]
    assert got.draft_token_ids.tolist() == [[5, -1, -1]] and got.row_index.tolist() == [[0, 1, -1, -1]]
    with pytest.raises(SpecbenchError, match="reached twice"):
        from_sglang(torch.tensor([[0, 5, 6]]), torch.tensor([[1, 2, -1]]), torch.tensor([[-1, -1, 1]]))


def test_eagle_tree_choices_convert_in_medusa_order():
    # the paths by hand: [0], [1] under the root; [0, 0], [0, 1] under [0]; [1, 0] under [1]; [0, 0, 0] under [0, 0]
    got = from_tree_choices([[1, 0], [0], [0, 0, 0], [1], [0, 1], [0, 0]])
    assert got.source == [[0], [1], [0, 0], [0, 1], [1, 0], [0, 0, 0]]
    assert got.parents == [-1, -1, 0, 0, 1, 2]
    with pytest.raises(SpecbenchError, match=r"not its parent \[0, 1\]"):
        from_tree_choices([[0], [0, 1, 0]])


def test_eagle2_retrieve_indices_convert_by_depth_then_index():
    # tokens 0 (root) .. 6; paths 0-1-3, 0-1-4-6, 0-2-5: token 1 and 2 under the root, 3 and 4 under 1, 5 under 2,
    # 6 under 4. Ordered by (depth, index): 1, 2, 3, 4, 5, 6 -> parents -1, -1, 0, 0, 1, 3
    got = from_retrieve_indices(torch.tensor([[0, 1, 3, -1], [0, 1, 4, 6], [0, 2, 5, -1]]))
    assert got.source == [1, 2, 3, 4, 5, 6] and got.parents == [-1, -1, 0, 0, 1, 3]
    # indices out of depth order still come out topological: token 5 under the root, 2 under 5
    assert from_retrieve_indices([[0, 5, 2], [0, 1, -1]]) == ([-1, -1, 1], [1, 5, 2])
    with pytest.raises(SpecbenchError, match="two parents"):
        from_retrieve_indices([[0, 1, 3], [0, 2, 3]])


@pytest.mark.parametrize("call, words", [
    (lambda: from_tree_choices([0, 1]), "each a list of sibling ranks, got 0"),
    (lambda: from_retrieve_indices(torch.tensor([0, 1, 2])), "2-d integer tensor, got a 1-d int64 tensor"),
    (lambda: from_retrieve_indices([["0", "x"]]), "whole token indices"),
    (lambda: from_retrieve_indices([[0, 1.5]]), "whole token indices"),
    (lambda: from_sglang(torch.zeros(1, 3), torch.zeros(1, 3), torch.zeros(1, 3)), "2-d float32 tensor"),
    (lambda: to_sglang(torch.zeros(2, 3, dtype=torch.long), torch.zeros(2, 4, dtype=torch.long),
                       torch.zeros(2, dtype=torch.long)), "parents must be [B, N] like draft_token_ids [2, 4]"),
    (lambda: to_sglang(torch.zeros(2, 3, dtype=torch.long), torch.zeros(2, 3, dtype=torch.long), [3]),
     "num_draft_tokens must be a 1-d integer tensor, got list"),
    (lambda: parse_tree_shape(None), "a tree shape is a string"),
    (lambda: batched([-1, 0], -1), "batch must be a whole number >= 0, got -1"),
])
def test_the_converters_name_a_wrong_input_in_one_sentence(call, words):
    with pytest.raises(SpecbenchError) as error:
        call()
    assert words in str(error.value)


# --- verify's checks -----------------------------------------------------------------------------------------------

B, N, V = 3, 6, 9
PARENTS = [-1, -1, 0, 0, 1, 2]


def _tree_inputs(seed: int = 0, batch: int = B, **overrides):
    generator = torch.Generator().manual_seed(seed)
    inputs = {
        "target_logits": torch.randn(batch, N + 1, V, generator=generator),
        "draft_token_ids": torch.randint(0, V, (batch, N), generator=generator),
        "seeds": torch.randint(0, 2**40, (batch,), generator=generator),
        "tree": batched(PARENTS, batch),
        "backend": "torch",
    }
    inputs.update(overrides)
    return inputs


def _call(**overrides) -> VerifyResult:
    inputs = _tree_inputs(**overrides)
    return verify(inputs.pop("target_logits"), inputs.pop("draft_token_ids"), **inputs)


@pytest.mark.parametrize("overrides, words", [
    ({"tree": DraftTree(torch.zeros(B, N - 1, dtype=torch.int64))}, ["tree parents", f"[{B}, {N}]"]),
    ({"tree": DraftTree(torch.zeros(B, N))}, ["tree parents", "float32"]),
    ({"tree": DraftTree(torch.tensor([PARENTS] * B), "beam")}, ["candidates", "'beam'"]),
    ({"tree": DraftTree(torch.tensor([[-1, 1, 0, 0, 1, 2]] * B))}, ["[-1, j)", "parent 1 for node 1"]),
    ({"tree": DraftTree(torch.tensor([[-1, -2, 0, 0, 1, 2]] * B))}, ["parent -2"]),
    ({"tree": torch.tensor([PARENTS] * B)}, ["DraftTree", "Tensor"]),
    ({"sampling": __import__("specbench").SamplingParams(top_k=3)}, ["truncation"]),
    ({"logprobs": "processed"}, ["log-probabilities"]),
    ({"method": "block"}, ["token method", "'block'"]),
    ({"mode": "synthetic"}, ["acceptance_rates", "[D][W]"]),
    ({"mode": "synthetic", "acceptance_rates": [[0.5, 1.5]]}, ["[0, 1]", "1.5"]),
    ({"mode": "synthetic", "acceptance_rates": [[0.5, 0.5], [0.5]]}, ["rows of one length"]),
    ({"acceptance_rates": [0.5]}, ["only used by the synthetic mode"]),
])
def test_bad_tree_inputs_are_named(overrides, words):
    with pytest.raises(SpecbenchError) as error:
        _call(**overrides)
    for word in words:
        assert word in str(error.value)


def test_knobs_at_their_off_values_are_the_untruncated_tree_call():
    # the contract's all-off request is untruncated: a tree call takes it (top_k 0 or >= V, top_p 1, min_p 0, as
    # numbers or per-request tensors), and refuses a knob that is on for any request
    from specbench import SamplingParams

    want, vocab = _call(), V
    for sampling in (SamplingParams(top_k=0, top_p=1.0, min_p=0.0),
                     SamplingParams(top_k=torch.tensor([0, vocab, vocab + 5]), top_p=torch.ones(B))):
        got = _call(sampling=sampling)
        assert torch.equal(got.output_token_ids, want.output_token_ids)
        assert torch.equal(got.accepted_nodes, want.accepted_nodes)
    with pytest.raises(SpecbenchError, match="does not take truncation"):
        _call(sampling=SamplingParams(top_k=torch.tensor([0, 0, vocab - 1])))


def test_padding_parents_are_not_checked_and_never_read():
    parents = torch.tensor([PARENTS, [-1, 0, 7, 99, -5, 3], PARENTS])  # request 1 has 2 nodes; the rest is padding
    counts = torch.tensor([N, 2, N])
    result = _call(tree=DraftTree(parents), num_draft_tokens=counts)
    alone = _call(tree=DraftTree(torch.tensor([PARENTS] * B)), num_draft_tokens=counts)
    assert torch.equal(result.output_token_ids, alone.output_token_ids)


def test_verify_result_keeps_its_positional_fields():
    a, b, c = torch.zeros(1, 2), torch.ones(1), torch.ones(1)
    result = VerifyResult(a, b, c)
    assert result.logprobs is None and result.accepted_nodes is None
    assert result.map(lambda t: t + 1).accepted_nodes is None
    tree = _call()
    assert tree.logprobs is None and tree.accepted_nodes.dtype == torch.int32
    assert tree.map(lambda t: t.to(torch.int64)).accepted_nodes.dtype == torch.int64


# --- the walk ------------------------------------------------------------------------------------------------------


def _chain_and_tree(kwargs: dict, conditional: list[float] | None = None, candidates: str = "independent"):
    chain = verify(**kwargs, backend="torch")
    tree_kwargs = dict(kwargs)
    if conditional is not None:
        tree_kwargs["acceptance_rates"] = [[c] for c in conditional]
    num_drafts = kwargs["draft_token_ids"].shape[1]
    tree = verify(**tree_kwargs, backend="torch",
                  tree=batched(list(range(-1, num_drafts - 1)), kwargs["draft_token_ids"].shape[0],
                               candidates=candidates))
    return chain, tree


@pytest.mark.parametrize("form", ["greedy", "one-hot", "draft logits", "draft probs", "target probs",
                                  "without replacement", "synthetic"])
def test_a_chain_given_as_a_tree_is_the_chain_bit_for_bit(form):
    generator = torch.Generator().manual_seed(7)
    batch, num_drafts, vocab = 600, 4, 13
    logits = torch.randn(batch, num_drafts + 1, vocab, generator=generator) * 2
    draft_logits = logits[:, :num_drafts] + torch.randn(batch, num_drafts, vocab, generator=generator)
    temperatures = torch.rand(batch, generator=generator) + 0.4
    temperatures[::9] = 0.0  # greedy requests in a sampled batch
    drafts = torch.multinomial(torch.softmax(draft_logits, -1).reshape(-1, vocab), 1, generator=generator)
    drafts = drafts.reshape(batch, num_drafts)
    drafts[::13, 2] = -1
    logits[::31, 1] = float("-inf")  # an invalid row stops its request
    kwargs = {"target_logits": logits, "draft_token_ids": drafts,
              "num_draft_tokens": torch.randint(0, num_drafts + 1, (batch,), generator=generator),
              "seeds": torch.randint(0, 2**40, (batch,), generator=generator),
              "positions": torch.randint(0, 1000, (batch,), generator=generator), "temperatures": temperatures}
    conditional, candidates = None, "independent"
    if form == "greedy":
        kwargs.update(mode="greedy", temperatures=None)
    elif form == "draft logits":
        kwargs["draft_logits"] = draft_logits
    elif form == "draft probs":
        kwargs["draft_probs"] = torch.softmax(draft_logits / temperatures.clamp_min(1e-3)[:, None, None], -1)
    elif form == "target probs":
        kwargs.update(target_logits=None, target_probs=torch.softmax(logits, -1),
                      draft_probs=torch.softmax(draft_logits, -1))
    elif form == "without replacement":
        kwargs["draft_logits"] = draft_logits
        candidates = "without_replacement"
    elif form == "synthetic":
        rates = [0.9, 0.6, 0.5, 0.2]
        kwargs.update(mode="synthetic", acceptance_rates=rates)
        conditional = acceptance.conditional_rates(rates)
    chain, tree = _chain_and_tree(kwargs, conditional, candidates)
    assert torch.equal(chain.output_token_ids, tree.output_token_ids)
    assert torch.equal(chain.num_accepted, tree.num_accepted) and torch.equal(chain.num_emitted, tree.num_emitted)
    # the chain's accepted nodes are its first A slots
    slots = torch.arange(num_drafts)[None, :]
    assert torch.equal(tree.accepted_nodes, torch.where(slots < chain.num_accepted[:, None], slots, -1).int())
    assert 0 < float(chain.num_accepted.float().mean()) < num_drafts  # neither nothing nor everything accepted


def _by_hand(target_rows: list[list[float]], drafts: list[int], parents: list[int], seeds: int = 64, **kwargs):
    """One tree, the same for ``seeds`` requests of different seeds, target probabilities as given."""
    probs = torch.tensor(target_rows, dtype=torch.float32)[None].expand(seeds, -1, -1).contiguous()
    ids = torch.tensor(drafts)[None].expand(seeds, -1).contiguous()
    return verify(target_probs=probs, draft_token_ids=ids, seeds=torch.arange(seeds), tree=batched(parents, seeds),
                  backend="torch", **kwargs)


def test_sglangs_tree_lists_link_children_in_rank_order_from_this_layout():
    parents = torch.tensor([[-1, 0, -1, 0, 2], [-1, 0, 1, 2, 3], [-1, 3, 0, 2, -5]])
    drafts = torch.tensor([[5, 6, 7, 8, 9], [1, 2, 3, 4, 5], [1, 1, 1, 1, 1]])
    lists = to_sglang(parents, drafts, torch.tensor([5, 3, 5]))
    # request 0: the root's children 1 and 3 (nodes 0, 2), node 1's 2 and 4 (nodes 1, 3), node 3's 5 (node 4);
    # request 2: node 1's parent comes after it and node 4's is below -1 (neither linked), so node 3's parent
    # (node 2, under node 0) is linked and nothing below node 1
    assert lists["retrive_next_token"].tolist() == [[1, 2, -1, 5, -1, -1], [1, 2, 3, -1, -1, -1],
                                                    [1, 3, -1, 4, -1, -1]]
    assert lists["retrive_next_sibling"].tolist() == [[-1, 3, 4, -1, -1, -1], [-1] * 6, [-1] * 6]
    assert lists["candidates"].tolist()[:2] == [[0, 5, 6, 7, 8, 9], [0, 1, 2, 3, 4, 5]]
    assert lists["retrive_index"][1].tolist() == [6, 7, 8, 9, 10, 11]
    assert int(lists["depth"]) == 3  # request 2's path of nodes 0, 2, 3 (request 1's last two are past its count)


def test_to_sglang_then_from_sglang_gives_the_trees_back():
    parents = torch.tensor([[-1, 0, -1, 0, 2], [-1, -1, 1, 1, 0]])
    drafts = torch.tensor([[5, 6, 7, 8, 9], [1, 2, 3, 4, 5]])
    lists = to_sglang(parents, drafts, torch.tensor([5, 5]))
    back = from_sglang(lists["candidates"], lists["retrive_next_token"], lists["retrive_next_sibling"],
                       lists["retrive_index"])
    # from_sglang numbers nodes level by level: each tree comes back relabelled breadth first, the same tree
    for b in range(2):
        order = back.node_index[b].tolist()  # SGLang node (ours + 1) of each node it gives
        ours = [node - 1 for node in order]
        assert drafts[b, ours].tolist() == back.draft_token_ids[b].tolist()
        back_parents = back.tree.parents[b].tolist()
        assert [parents[b, j].item() for j in ours] == [-1 if p < 0 else ours[p] for p in back_parents]
        for parent in set(back_parents):  # the children keep their ranks
            kids = [ours[j] for j, p in enumerate(back_parents) if p == parent]
            assert kids == sorted(kids), (b, parent, kids)
    assert back.num_draft_tokens.tolist() == [5, 5]


def test_greedy_walk_takes_the_first_child_matching_the_argmax():
    # root argmax 2: children 0 (token 1), 1 (token 2), 2 (token 2, a repeat): node 1 is taken;
    # node 1's row argmax 4: its children 3 (token 3), 4 (token 4): node 4, a leaf, whose row argmax 0 is the bonus
    rows = [[0, .1, .6, .3, 0], [1, 0, 0, 0, 0], [0, 0, 0, .2, .8], [1, 0, 0, 0, 0], [1, 0, 0, 0, 0], [.9, .1, 0, 0, 0]]
    result = _by_hand(rows, [1, 2, 2, 3, 4], [-1, -1, -1, 1, 1], seeds=1, mode="greedy")
    assert result.output_token_ids.tolist() == [[2, 4, 0, -1, -1, -1]]
    assert result.accepted_nodes.tolist() == [[1, 4, -1, -1, -1]] and result.num_emitted.tolist() == [3]
    # no child matches at the root: the argmax is emitted and nothing accepted
    result = _by_hand(rows, [1, 3, 0, 3, 4], [-1, -1, -1, 1, 1], seeds=1, mode="greedy")
    assert result.output_token_ids.tolist() == [[2, -1, -1, -1, -1, -1]] and result.num_accepted.tolist() == [0]


def test_a_rejected_one_hot_sibling_is_removed_and_the_rest_renormalised():
    # p = (1/2, 1/2) at the root; one-hot children with tokens 0 and 1. Child 0 passes with probability 1/2;
    # once it fails, r = (0, 1/2) with R = 1/2, and child 1 passes u * 1 * R < r(1) for every u: every request
    # accepts one of the two (forgetting R would reject child 1 half of the time)
    rows = [[.5, .5, 0], [0, 0, 1], [0, 0, 1]]
    result = _by_hand(rows, [0, 1], [-1, -1], seeds=400)
    assert result.num_accepted.tolist() == [1] * 400
    first = int((result.accepted_nodes[:, 0] == 0).sum())
    assert 150 < first < 250  # about half take child 0 (binomial(400, 1/2): 5 standard deviations)
    assert result.output_token_ids[:, 1].tolist() == [2] * 400  # the leaf's bonus


def test_after_a_rejected_one_hot_child_the_mass_is_r_minus_its_value_not_the_rows_sum():
    # target probabilities as given, summing to 1/2 at the root: (0.2, 0.2, 0.1), one-hot children with tokens 0
    # and 1. Child 0 fails with probability 0.8; then R = 1 - 0.2 = 0.8 (the contract's R - r(x)), so child 1
    # passes u * 0.8 < 0.2 a quarter of the time (the row's sum, 0.3, would give two thirds)
    rows = [[.2, .2, .1], [0, 0, 1], [0, 0, 1]]
    result = _by_hand(rows, [0, 1], [-1, -1], seeds=2000)
    rejected_first = result.accepted_nodes[:, 0] != 0
    second = float((result.accepted_nodes[rejected_first, 0] == 1).float().mean())
    assert 1400 < int(rejected_first.sum()) < 1800 and 0.2 < second < 0.3, (int(rejected_first.sum()), second)


def test_absent_nodes_are_rejected_untested_and_their_subtrees_never_reached():
    # child 0 absent (-1) with a child of its own carrying the target's only token: never reached;
    # child 1 (token 0) takes all the mass
    rows = [[1, 0, 0], [0, 1, 0], [0, 0, 1], [0, 1, 0]]
    for mode in ("greedy", "probabilistic"):
        result = _by_hand(rows, [-1, 0, 0], [-1, -1, 0], seeds=50, mode=mode)
        assert result.accepted_nodes[:, 0].tolist() == [1] * 50 and result.num_accepted.tolist() == [1] * 50
        assert result.output_token_ids[:, :2].tolist() == [[0, 2]] * 50
    # every child absent: the residual race over p itself, as a chain's -1 draft
    result = _by_hand(rows, [-1, -1, 0], [-1, -1, 0], seeds=50)
    assert result.output_token_ids[:, 0].tolist() == [0] * 50 and result.num_accepted.tolist() == [0] * 50


def test_invalid_rows_and_requests_stop_as_for_chains():
    nan = math.nan
    rows = [[0, 1, 0], [nan, nan, nan], [0, 0, 1]]  # node 0's row has no mass: a walk that reaches it stops
    result = _by_hand(rows, [1, 2], [-1, 0], seeds=4)
    assert result.output_token_ids.tolist() == [[1, -1, -1]] * 4
    assert result.num_accepted.tolist() == [1] * 4 and result.num_emitted.tolist() == [1] * 4
    probs = torch.tensor([[0, 1, 0], [0, 0, 1], [1, 0, 0]], dtype=torch.float32)[None].expand(2, -1, -1)
    result = verify(target_probs=probs.contiguous(), draft_token_ids=torch.tensor([[1, 2], [1, 2]]),
                    seeds=torch.arange(2), temperatures=torch.tensor([nan, 1.0]), check_values=False,
                    tree=batched([-1, 0], 2), backend="torch")
    assert result.output_token_ids.tolist() == [[-1, -1, -1], [1, 2, 0]]
    assert result.num_emitted.tolist() == [0, 3] and result.accepted_nodes.tolist() == [[-1, -1], [0, 1]]


def test_unchecked_parents_out_of_range_are_never_reached():
    parents = torch.tensor([[-1, 5, 0]])  # node 1 claims a later parent: it belongs to no one
    probs = torch.tensor([[[0, 1, 0], [0, 0, 1], [1, 0, 0], [1, 0, 0]]], dtype=torch.float32)
    result = verify(target_probs=probs, draft_token_ids=torch.tensor([[2, 1, 2]]), mode="greedy",
                    tree=DraftTree(parents), check_values=False, backend="torch")
    assert result.output_token_ids.tolist() == [[1, -1, -1, -1]] and result.num_accepted.tolist() == [0]


def test_ragged_trees_in_one_batch_match_each_tree_alone():
    generator = torch.Generator().manual_seed(3)
    shapes = [PARENTS, [-1, 0, 1, 2, 3, 4], [-1, -1, -1, 0, 0, 0], [-1, 0, 0, 1, 1, 2]]
    counts = [6, 3, 0, 5]
    batch = len(shapes)
    logits = torch.randn(batch, N + 1, V, generator=generator)
    draft_probs = torch.softmax(torch.randn(batch, N, V, generator=generator), -1)
    drafts = torch.multinomial(draft_probs.reshape(-1, V), 1, generator=generator).reshape(batch, N)
    seeds = torch.randint(0, 2**40, (batch,), generator=generator)
    together = verify(logits, drafts, draft_probs=draft_probs, seeds=seeds, num_draft_tokens=torch.tensor(counts),
                      tree=DraftTree(torch.tensor(shapes)), backend="torch")
    for b in range(batch):
        n = counts[b]
        alone = verify(logits[b:b + 1, :n + 1].contiguous(), drafts[b:b + 1, :n], draft_probs=draft_probs[b:b + 1, :n],
                       seeds=seeds[b:b + 1], tree=DraftTree(torch.tensor([shapes[b][:n]], dtype=torch.int64)), backend="torch")
        assert together.output_token_ids[b, :n + 1].tolist() == alone.output_token_ids[0].tolist()
        assert together.accepted_nodes[b, :n].tolist() == alone.accepted_nodes[0].tolist()


def test_accepted_nodes_form_a_path_whose_tokens_are_the_output():
    generator = torch.Generator().manual_seed(5)
    batch = 300
    parents = full_tree(3, 2)
    logits = torch.randn(batch, len(parents) + 1, 6, generator=generator)
    draft_logits = torch.randn(batch, len(parents), 6, generator=generator)
    drafts = torch.randint(0, 6, (batch, len(parents)), generator=generator)
    result = verify(logits, drafts, draft_logits=draft_logits, seeds=torch.arange(batch),
                    tree=batched(parents, batch), backend="torch")
    for b in range(batch):
        path = [j for j in result.accepted_nodes[b].tolist() if j >= 0]
        assert len(path) == int(result.num_accepted[b])
        assert [parents[j] for j in path] == ([-1] + path[:-1])[:len(path)]
        assert result.output_token_ids[b, :len(path)].tolist() == [int(drafts[b, j]) for j in path]
    assert set(result.num_accepted.tolist()) == {0, 1, 2}


def test_synthetic_table_rates_by_depth_and_rank():
    # rank 0 at depth 0 never passes, rank 1 always: every request accepts node 1 (rank 1), then its only
    # child (depth 1, rank 0: rate 1); a flat list is the same at every depth
    rows = [[1.0, 0, 0]] * 5
    result = _by_hand(rows, [1, 2, 1, 0], [-1, -1, 1, 0], seeds=20, mode="synthetic",
                      acceptance_rates=[[0.0, 1.0], [1.0, 0.0]])
    assert result.accepted_nodes[:, :2].tolist() == [[1, 2]] * 20 and result.num_accepted.tolist() == [2] * 20
    result = _by_hand(rows, [1, 2, 1, 0], [-1, -1, 1, 0], seeds=20, mode="synthetic", acceptance_rates=[0.0, 1.0])
    assert result.accepted_nodes[:, :1].tolist() == [[1]] * 20 and result.num_accepted.tolist() == [1] * 20
    # depths past the table have rate 0
    result = _by_hand(rows, [1, 2, 1, 0], [-1, -1, 1, 0], seeds=20, mode="synthetic", acceptance_rates=[[0.0, 1.0]])
    assert result.num_accepted.tolist() == [1] * 20


def test_a_tree_of_no_nodes_emits_the_chains_bonus():
    generator = torch.Generator().manual_seed(9)
    target, none = torch.randn(50, 1, 5, generator=generator), torch.zeros(50, 0, dtype=torch.int64)
    tree = verify(target, none, seeds=torch.arange(50), tree=DraftTree(none), backend="torch")
    chain = verify(target, none, seeds=torch.arange(50), backend="torch")
    assert torch.equal(tree.output_token_ids, chain.output_token_ids) and tree.accepted_nodes.shape == (50, 0)
    assert len(set(tree.output_token_ids[:, 0].tolist())) > 1  # sampled, not one fixed token


def test_candidates_without_replacement_test_the_next_sibling_against_the_row_without_the_first():
    # p = (.3, .3, .4) at the root, both children drawn from q = (.5, .25, .25), tokens 0 then 1.
    # Child 0 passes with probability .3 / .5 = .6; after it fails r = (0, .05, .15), R = .2.
    # Independent candidates: q_1(1) = .25, child 1 passes with .05 / (.2 * .25) = 1: always one accepted.
    # Without replacement: q_1 = (0, .5, .5), child 1 passes with .05 / (.2 * .5) = .5, and when it fails
    # r = max(r - R q_1, 0) = (0, 0, .05): token 2 is emitted. So 20% of requests accept nothing and emit 2.
    rows = [[.3, .3, .4], [1, 0, 0], [1, 0, 0]]
    draft = torch.tensor([[.5, .25, .25]] * 2)[None].expand(400, -1, -1).contiguous()
    independent = _by_hand(rows, [0, 1], [-1, -1], seeds=400, draft_probs=draft)
    assert independent.num_accepted.tolist() == [1] * 400
    without = verify(target_probs=torch.tensor(rows)[None].expand(400, -1, -1).contiguous(),
                     draft_token_ids=torch.tensor([[0, 1]] * 400), draft_probs=draft, seeds=torch.arange(400),
                     tree=batched([-1, -1], 400, candidates="without_replacement"), backend="torch")
    none = without.num_accepted == 0
    assert 48 < int(none.sum()) < 112  # binomial(400, .2): 80, 4 standard deviations either way
    assert without.output_token_ids[none, 0].tolist() == [2] * int(none.sum())
    assert int((without.accepted_nodes[:, 0] == 1).sum()) > 48  # child 1 taken about 20% of the time too
