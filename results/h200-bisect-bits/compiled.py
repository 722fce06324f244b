"""The truncation kernels lowered for sm_90 here (no GPU), the top-k path's bisections one bit a step (9d3d2b6's
kernels), two (the working tree with ``bisect_bits.patch`` applied, as when it ran) and three
(``.old/s50/truncation_b3.py``: that tree with ``BISECT_BITS`` 3): registers, spill stack and innermost SASS loops
(instructions, global loads, local-memory instructions a loop), uncapped (as 9d3d2b6's launcher launched them).

``python3 results/h200-bisect-bits/compiled.py`` from the repository root with ``.old/s50`` in place
(``truncation_head.py`` / ``cutoffs_head.py``: ``git show 9d3d2b6:specbench/kernels/...`` with the import renamed):
the prepass from target and truncated draft logits at 8 warps, the fused step from truncated draft logits and from
draft probabilities at 4 warps, and from truncated draft logits at 8 (in the probabilistic mode, every knob given,
float32: the rows of ``tests/compile_kernels.py``'s ``variants()`` with those constexprs, at these warps), each at a
group block of 4096 (V = 128256) and 8192 (V = 151936).
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


# (kernel, constexprs that pick its row of variants(), warps)
FORMS = (("_truncation_prepass_kernel", {"TRUNCATE_DRAFT": 1, "TARGET_PROBS": 0}, 8),
         ("_verify_truncated_kernel", {"FUSED": 1, "DRAFT": 1, "TRUNCATE_DRAFT": 1, "TARGET_PROBS": 0}, 4),
         ("_verify_truncated_kernel", {"FUSED": 1, "DRAFT": 2, "TRUNCATE_DRAFT": 0, "TARGET_PROBS": 0}, 4),
         ("_verify_truncated_kernel", {"FUSED": 1, "DRAFT": 1, "TRUNCATE_DRAFT": 1, "TARGET_PROBS": 0}, 8))
EVERY_KNOB = {"MODE": 1, "HAS_TOP_K": 1, "HAS_TOP_P": 1, "HAS_MIN_P": 1}


def main() -> int:
    for name, picked, warps in FORMS:
        kernel, constexprs = next((kernel, constexprs) for kernel, constexprs, _warps, dtype in ck.variants()
                                  if kernel.fn.__name__ == name and dtype == "fp32"
                                  and {**picked, **EVERY_KNOB}.items() <= constexprs.items()
                                  and not constexprs.get("DEFER") and not constexprs.get("DECIDED"))
        for group_block in (4096, 8192):
            for version, module in VERSIONS:
                line = lowered(module, kernel, {**constexprs, "GROUP_BLOCK": group_block}, warps, "fp32")
                print(f"{name} {picked} {warps} warps fp32, GROUP_BLOCK {group_block}, {version}: {line}", flush=True)
    return 0

if __name__ == "__main__":
    sys.exit(main())
