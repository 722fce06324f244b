"""The truncation kernels lowered for sm_90 here (no GPU), the top-k path's bisections one bit a step (9d3d2b6's
kernels), two (the working tree with ``bisect_bits.patch`` applied, as when it ran) and three (``.old/s50/truncation_b3.py``: the working tree with ``BISECT_BITS``
3): registers, spill stack and innermost SASS loops (instructions, global loads, local-memory instructions a loop).

``python3 results/h200-bisect-bits/compiled.py [INDEX ...]`` from the repository root with ``.old/s50`` in place
(``truncation_head.py`` / ``cutoffs_head.py``: ``git show 9d3d2b6:specbench/kernels/...`` with the import renamed);
INDEX: rows of ``tests/compile_kernels.py``'s ``variants()`` (default: the prepass from target logits in float32,
the fused step from truncated draft logits at 4 warps, from draft probabilities at 4 warps, the wide fused step),
each at a group block of 4096 (V = 128256) and 8192 (V = 151936).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

root = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(root / "tests"), str(root / ".old" / "s50"), str(root)]

import compile_kernels as ck
import truncation_b3
import truncation_head

from specbench.kernels import truncation

VERSIONS = (("1 bit (9d3d2b6)", truncation_head), ("2 bits", truncation), ("3 bits", truncation_b3))


def lowered(module, kernel, constexprs: dict, warps: int, dtype: str) -> str:
    """One line: the kernel of ``module`` named like ``kernel``, its resources and innermost loops."""
    compiled = ck.compile_kernel(getattr(module, kernel.fn.__name__), constexprs, warps, dtype)
    with tempfile.TemporaryDirectory() as workdir:
        cubin = Path(workdir) / "kernel.cubin"
        cubin.write_bytes(compiled.asm["cubin"])
        loops = [(loop["instructions"], loop["global_loads"], loop["local_memory"]) for loop in ck.sass_loops(cubin)]
        return f"{ck.resources(cubin)} loops (instructions, global loads, local memory): {loops}"


def main() -> int:
    rows = ck.variants()
    for index in [int(arg) for arg in sys.argv[1:]] or [108, 110, 126, 146]:
        kernel, constexprs, warps, dtype = rows[index]
        shown = {key: constexprs[key] for key in ("FUSED", "DRAFT", "TRUNCATE_DRAFT", "TARGET_PROBS", "BLOCK")
                 if key in constexprs}
        for group_block in (4096, 8192):
            for name, module in VERSIONS:
                line = lowered(module, kernel, {**constexprs, "GROUP_BLOCK": group_block}, warps, dtype)
                print(f"variant {index} {kernel.fn.__name__} {shown} {warps} warps {dtype}, GROUP_BLOCK "
                      f"{group_block}, {name}: {line}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
