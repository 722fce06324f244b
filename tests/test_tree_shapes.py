"""Draft-tree shapes: the parent list's derived tables, and every shape string the CLI takes or refuses."""

from __future__ import annotations

import pytest

from specbench.errors import SpecbenchError
from specbench.tree_shapes import (
    MAX_TREE_NODES,
    SequoiaRequest,
    TreeShape,
    parse_tree_shape,
    split_tree_shapes,
)


def test_a_tree_knows_its_depths_children_and_ranks():
    shape = TreeShape((-1, 0, 0, -1, 1, 3))
    assert shape.num_nodes == 6
    assert shape.depths == (0, 1, 1, 0, 2, 1)
    assert shape.depth == 3
    assert shape.children == ((0, 3), (1, 2), (4,), (), (5,), (), ())
    assert shape.ranks == (0, 0, 1, 1, 0, 0)
    assert shape.width == 2
    assert not shape.is_chain
    assert shape.label == "parents:-1,0,0,-1,1,3"


def test_chain_and_full_tree_strings():
    chain = parse_tree_shape("chain:4")
    assert chain.parents == (-1, 0, 1, 2) and chain.is_chain and chain.depth == 4 and chain.label == "chain:4"
    full = parse_tree_shape("2x3")
    assert full.num_nodes == 2 + 4 + 8 and full.depth == 3 and full.width == 2
    assert full.parents[:6] == (-1, -1, 0, 0, 1, 1)  # level by level
    assert [len(row) for row in full.children] == [2] * 7 + [0] * 8
    assert parse_tree_shape(" 3 X 1 ").parents == (-1, -1, -1)
    assert parse_tree_shape("1x5").is_chain  # a full tree of width 1 is a chain


def test_parents_and_sequoia_strings():
    assert parse_tree_shape("parents:-1,0,0,1").parents == (-1, 0, 0, 1)
    assert parse_tree_shape("sequoia:16") == SequoiaRequest(16, None)
    assert parse_tree_shape("sequoia:16:4") == SequoiaRequest(16, 4)
    assert SequoiaRequest(16, 4).label == "sequoia:16:4"


def test_a_comma_list_keeps_parent_lists_whole():
    assert split_tree_shapes("chain:3,2x2,parents:-1,0,0,sequoia:8") == ["chain:3", "2x2", "parents:-1,0,0",
                                                                          "sequoia:8"]
    assert split_tree_shapes("parents:-1,-1,0") == ["parents:-1,-1,0"]


@pytest.mark.parametrize(("text", "needle"), [
    ("chain:0", "K must lie in 1..64"),
    ("chain:x", "K must be a whole number"),
    ("2x", "must read chain:K, WxD"),
    ("tree", "must read chain:K, WxD"),
    ("", "must read"),
    ("0x3", "W must lie in"),
    ("4x6", "has 5460 nodes, more than 1024"),
    ("sequoia:0", "N must lie in 1.."),
    ("sequoia:8:0", "DEPTH must lie in 1..64"),
    ("sequoia:8:2:1", "must read sequoia:N or sequoia:N:DEPTH"),
    ("parents:-1,1", "parent of node 1 must be -1 (the root) or an earlier node (0), got 1"),
    ("parents:0,0", "parent of node 0 must be -1 (the root), got 0"),
    ("parents:-1,0,3", "parent of node 2 must be -1 (the root) or an earlier node (0..1), got 3"),
    ("parents:0", "parent of node 0 must be -1"),
    ("parents:-1,a", "comma-separated whole numbers"),
    ("parents:-2", "got -2"),
])
def test_bad_shape_strings_are_one_sentence(text, needle):
    with pytest.raises(SpecbenchError) as info:
        parse_tree_shape(text)
    message = str(info.value)
    assert needle in message, message
    assert "\n" not in message


def test_limits_on_nodes_and_depth():
    with pytest.raises(SpecbenchError, match="at most 1024 nodes"):
        TreeShape(tuple([-1] * (MAX_TREE_NODES + 1)))
    with pytest.raises(SpecbenchError, match="at most 64 deep, got depth 65"):
        TreeShape(tuple(range(-1, 64)))
    with pytest.raises(SpecbenchError, match="at least one node"):
        TreeShape(())
    assert TreeShape(tuple([-1] * MAX_TREE_NODES)).width == MAX_TREE_NODES
