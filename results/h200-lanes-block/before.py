"""Two earlier versions of specbench's Triton kernels, to time beside today's in one process.

- ``triton_before_lanes``: specbench's Triton backend whose tree calls launch the tree kernels of c965e6d
  (``specbench/kernels/tree.py`` there: a candidate lane took 8 consecutive tokens of a chunk, shared by two threads,
  and the candidates' E came from the degree-8 ``neg_log_of_uniform``). ``run.sh`` says how to write that file to
  ``.old/tree_before_lanes.py`` (``TREE_BEFORE`` names another path).
- ``triton_before_products``: specbench's Triton backend whose block verification calls launch the block kernels of
  e54963f, whose passes over a row divided by the row's sums (``decide.target_chunk`` / ``draft_chunk`` there),
  from ``.old/block_before_products/`` (``BLOCK_BEFORE`` names another folder): that commit's ``block.py`` importing
  that commit's ``decide.py``.

Each goes through today's launcher, whose arguments those kernels take unchanged (``tests/kernel_versions.py``);
every other call is today's code.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from kernel_versions import kernel_module, with_kernels, with_tree_kernels

_BLOCK = kernel_module(os.path.join(os.environ.get("BLOCK_BEFORE", ".old/block_before_products"),
                                    "block_before_products.py"))

triton_before_lanes = with_tree_kernels(
    "triton-before-lanes", os.environ.get("TREE_BEFORE", ".old/tree_before_lanes.py"),
    "Triton, the tree kernels before the candidate lanes of a thread's own tokens",
    "results/h200-lanes-block/before.py:triton_before_lanes")

triton_before_products = with_kernels(
    "triton-before-products", {"_BLOCK": _BLOCK._verify_block_kernel, "_BLOCK_ROWS": _BLOCK._block_rows_kernel,
                               "_BLOCK_MASSES": _BLOCK._block_masses_kernel, "_BLOCK_RACE": _BLOCK._block_race_kernel},
    "Triton, block verification's passes dividing by the row's sums",
    "results/h200-lanes-block/before.py:triton_before_products")
