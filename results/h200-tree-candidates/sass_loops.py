"""Registers, stack and innermost SASS loops of the one-program tree kernel, compiled for sm_90 with no GPU.

The probabilistic mode with draft probabilities and target logits, independent candidates, float32, at its launch
shape (``tests/compile_kernels.py``'s variant). Run from the repository root (or a checkout of another commit, to
compare): ``python results/h200-tree-candidates/sass_loops.py``.
"""

import os
import sys

sys.path[:0] = [os.getcwd(), os.path.join(os.getcwd(), "tests")]

import compile_kernels  # after the path

for index, (kernel, constexprs, _warps, dtype) in enumerate(compile_kernels.variants()):
    form = (constexprs.get("MODE"), constexprs.get("DRAFT"), constexprs.get("TARGET_PROBS"),
            constexprs.get("WITHOUT_REPLACEMENT"))
    if kernel.fn.__name__ == "_verify_tree_kernel" and form == (1, 2, 0, 0) and dtype == "fp32":
        row = compile_kernels._compile(index, 90, True)
        print(row["reg"], row["stack"])
        for loop in row["loops"]:
            print(loop)
