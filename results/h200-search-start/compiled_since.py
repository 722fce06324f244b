"""The launched variants the timings used, lowered for sm_90 at 9eeb308 (.old/s49/cutoffs_9eeb.py: ``git show
9eeb308:specbench/kernels/cutoffs.py``; truncation_9eeb.py: truncation.py importing it) and in the working tree after the bisection loop was shared (see README): "same" where
registers, stack and every innermost SASS loop are equal. Variants: the prepass (108) and the fused step's wide shape
(146) of tests/compile_kernels.py, at group blocks of 8192 and 4096."""

import inspect
import sys
import tempfile
from pathlib import Path

sys.path[:0] = ["tests", ".old/s49", "."]
import compile_kernels as ck
import triton
import truncation_9eeb as old
from triton.backends.compiler import GPUTarget

from specbench.kernels import truncation as now

rows = ck.variants()
for index in (108, 146):
    kernel, constexprs, warps, dtype = rows[index]
    for group_block in (8192, 4096):
        out = []
        for module in (old, now):
            fn = getattr(module, kernel.fn.__name__)
            names = list(inspect.signature(fn.fn).parameters)
            given = {**constexprs, "GROUP_BLOCK": group_block}
            sig = ck.signature(fn, given, dtype)
            source = triton.compiler.ASTSource(fn=fn, signature=sig, attrs=ck.aligned_attributes(names, sig),
                                               constexprs={(names.index(n),): v for n, v in given.items()})
            compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})
            with tempfile.TemporaryDirectory() as workdir:
                cubin = Path(workdir) / "k.cubin"
                cubin.write_bytes(compiled.asm["cubin"])
                out.append((ck.resources(cubin), ck.sass_loops(cubin)))
        changed = [(a["instructions"], b["instructions"]) for a, b in zip(out[0][1], out[1][1]) if a != b]
        verdict = "same" if out[0] == out[1] else f"differ {out[0][0]} {out[1][0]} {changed}"
        print(index, kernel.fn.__name__, warps, group_block, verdict, flush=True)
