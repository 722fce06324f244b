"""The truncated step's fused variants lowered for sm_90 here (no GPU): fde41ff's kernels beside the working
tree's, with their registers, spill stack and innermost SASS loops (instructions, global loads, local-memory
instructions a loop), at a group block of 8192 (V = 151936: the search starts from the top bit there, so the two
should be the same) and 4096 (V <= 131072: it starts from shared bits).

``python3 results/h200-search-start/compiled.py [INDEX ...]`` from the repository root with ``.old/s49`` in place;
INDEX: rows of ``tests/compile_kernels.py``'s ``variants()`` (default: the fused step from target logits with
draft probabilities, then with truncated draft logits).
"""

from __future__ import annotations

import inspect
import sys
import tempfile
from pathlib import Path

root = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(root / "tests"), str(root / ".old" / "s49"), str(root)]

import compile_kernels as ck
import triton
import truncation_head as before
from triton.backends.compiler import GPUTarget

from specbench.kernels import truncation as after


def lowered(module, kernel, constexprs: dict, warps: int, dtype: str) -> str:
    """One line: the kernel of ``module`` named like ``kernel``, its resources and innermost loops."""
    fn = getattr(module, kernel.fn.__name__)
    names = list(inspect.signature(fn.fn).parameters)
    sig = ck.signature(fn, constexprs, dtype)
    source = triton.compiler.ASTSource(fn=fn, signature=sig, constexprs={(names.index(name),): value
                                                                         for name, value in constexprs.items()},
                                       attrs=ck.aligned_attributes(names, sig))
    compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})
    with tempfile.TemporaryDirectory() as workdir:
        cubin = Path(workdir) / "kernel.cubin"
        cubin.write_bytes(compiled.asm["cubin"])
        loops = [(loop["instructions"], loop["global_loads"], loop["local_memory"]) for loop in ck.sass_loops(cubin)]
        return f"{ck.resources(cubin)} loops (instructions, global loads, local memory): {loops}"


def main() -> int:
    rows = ck.variants()
    for index in [int(arg) for arg in sys.argv[1:]] or [126, 110]:
        kernel, constexprs, warps, dtype = rows[index]
        shown = {key: constexprs[key] for key in ("FUSED", "DRAFT", "TRUNCATE_DRAFT", "TARGET_PROBS", "BLOCK")}
        for group_block in (8192, 4096):
            for name, module in (("fde41ff", before), ("working tree", after)):
                line = lowered(module, kernel, {**constexprs, "GROUP_BLOCK": group_block}, warps, dtype)
                print(f"variant {index} {shown} {warps} warps {dtype}, GROUP_BLOCK {group_block}, {name}: {line}",
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
