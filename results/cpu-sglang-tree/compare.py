"""sglang-tree against the torch reference, greedy, on trees and chains (issue 24), on a GPU where there is one,
else under the Triton interpreter:

    TRITON_INTERPRET=1 PYTHONPATH=DIR python3 results/cpu-sglang-tree/compare.py

IMPL (environment) names the adapter, ``sglang-tree`` by default (``sglang-tree-cuda``: on a GPU, with
apache-tvm-ffi and SGLang's CUDA headers under DIR too).

DIR holds ``sglang/kernels/ops/speculative/spec_tree.py`` (an installed SGLang's, or that file alone beside an
``sglang/__init__.py``: the adapter only locates the package). Small vocabularies, so that many drafts match the
argmax and paths run deep; some drafts absent (-1); ragged counts; each tree also as a batch of its chain.
"""

from __future__ import annotations

import os
import sys

import torch

from specbench import verify
from specbench.implementations.registry import resolve
from specbench.trees import DraftTree

TREES = {"bushy": [-1, -1, -1, 0, 0, 1, 3, 3, 6, 8], "2x3": [-1, -1, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5],
         "chain:6": [-1, 0, 1, 2, 3, 4]}


DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def case(parents: list[int], batch: int, vocab: int, seed: int, tree: bool) -> dict:
    generator = torch.Generator().manual_seed(seed)
    nodes = len(parents)
    drafts = torch.randint(0, vocab, (batch, nodes), generator=generator)
    drafts[torch.rand(batch, nodes, generator=generator) < 0.1] = -1
    kwargs = {"target_logits": torch.randn(batch, nodes + 1, vocab, generator=generator), "draft_token_ids": drafts,
              "num_draft_tokens": torch.randint(0, nodes + 1, (batch,), generator=generator).to(torch.int32),
              "mode": "greedy", "temperatures": torch.zeros(batch)}
    if tree:
        kwargs["tree"] = DraftTree(torch.tensor(parents).expand(batch, nodes).contiguous())
    return {name: DraftTree(value.parents.to(DEVICE)) if name == "tree" else
            value.to(DEVICE) if isinstance(value, torch.Tensor) else value for name, value in kwargs.items()}


def main() -> int:
    impl = resolve(os.environ.get("IMPL", "sglang-tree"))
    failures = 0
    for name, parents in TREES.items():
        for vocab in (3, 6):
            for tree in (True, False):
                kwargs = case(parents, 64, vocab, seed=vocab + len(parents), tree=tree)
                want, got = verify(**kwargs, backend="torch"), impl.prepare(dict(kwargs))()
                same = (torch.equal(want.output_token_ids, got.output_token_ids)
                        and torch.equal(want.num_accepted, got.num_accepted)
                        and torch.equal(want.num_emitted, got.num_emitted)
                        and (not tree or torch.equal(want.accepted_nodes, got.accepted_nodes)))
                failures += not same
                print(f"{name} V={vocab} {'tree' if tree else 'as a chain'}: {'same' if same else 'DIFFERENT'} "
                      f"(accepted per request: mean {want.num_accepted.float().mean():.2f}, "
                      f"max {int(want.num_accepted.max())})", flush=True)
    print(f"{failures} different")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
