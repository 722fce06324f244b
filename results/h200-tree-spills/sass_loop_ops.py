"""The one-program tree kernel's innermost SASS loops of more than 300 instructions, with each opcode's count per
iteration: the probabilistic mode, target logits, draft logits (argument 1) or probabilities (2), independent
candidates, compiled here for sm_90 at the launch shape the launcher takes (``tests/compile_kernels.py``'s variant).

Usage, from the repository root, no GPU needed: ``python3 results/h200-tree-spills/sass_loop_ops.py 1``. The largest
loop is the pass that sums the mass after a first rejected child and keeps the race's candidates
(``_mass_and_candidates``). ``sass-loops.txt`` holds its output for d9959e6 and for 3cbd4c2.
"""

import collections
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, "tests")
import compile_kernels  # (tests/ on the path first)


def main() -> None:
    draft = int(sys.argv[1])
    index = next(i for i, (kernel, constexprs, _warps, _dtype) in enumerate(compile_kernels.variants())
                 if kernel.fn.__name__ == "_verify_tree_kernel" and constexprs["MODE"] == 1
                 and constexprs["DRAFT"] == draft and constexprs["TARGET_PROBS"] == 0
                 and constexprs["WITHOUT_REPLACEMENT"] == 0)
    _variant, compiled = compile_kernels.compile_variant(index, 90)
    with tempfile.TemporaryDirectory() as folder:
        cubin = Path(folder) / "kernel.cubin"
        cubin.write_bytes(compiled.asm["cubin"])
        loops = compile_kernels.innermost_loops(cubin)
    for ops in loops:
        if len(ops) > 300:
            print(len(ops), dict(collections.Counter(op.split(".")[0] for op in ops).most_common(25)))


if __name__ == "__main__":
    main()
