"""The tree kernel's innermost SASS loops for sm_90 (issue 24): the one-program tree kernel, probabilistic, draft logits
on target logits (float32), sampled candidates, at the compile check's shape, compiled from the specbench first on
PYTHONPATH. Prints each loop's instructions an iteration, instructions a token (BLOCK / (32 W) tokens a thread an
iteration), its MUFU.RCP, SHFL and local-memory instructions, and the thread's registers; the loop with the most
MUFU.RCP is the pass that sums the mass after a first child and keeps the race's candidates (a reciprocal a token),
marked `<- mass and candidates`. Needs cuobjdump (Triton's bundled CUDA tools)."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import triton

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from compile_kernels import compile_kernel, innermost_loops, resources, tree_variants

from specbench.kernels.tree import _verify_tree_kernel


def main() -> None:
    (kernel, constexprs, warps, dtype), = [
        (k, c, w, d) for k, c, w, d in tree_variants() if k is _verify_tree_kernel and c["MODE"] == 1
        and c["DRAFT"] == 1 and c["TARGET_PROBS"] == 0 and c["WITHOUT_REPLACEMENT"] == 0 and d == "fp32"]
    compiled = compile_kernel(kernel, constexprs, warps, dtype)
    with tempfile.TemporaryDirectory() as workdir:
        cubin = Path(workdir) / "kernel.cubin"
        cubin.write_bytes(compiled.asm["cubin"])
        loops = innermost_loops(cubin)
        registers = resources(cubin).get("reg")
    tokens = constexprs["BLOCK"] // (32 * warps)
    mass = max(range(len(loops)), key=lambda i: sum(op.startswith("MUFU.RCP") for op in loops[i]))
    print(f"Triton {triton.__version__}, sm_90, BLOCK {constexprs['BLOCK']}, {warps} warps ({tokens} tokens a thread "
          f"an iteration), registers {registers}")
    for i, ops in enumerate(loops):
        count = {name: sum(op.startswith(name) for op in ops) for name in ("MUFU.RCP", "SHFL", "LDL", "STL")}
        print(f"loop {i}: {len(ops)} instructions, {len(ops) / tokens:.1f} a token; "
              + ", ".join(f"{name} {n}" for name, n in count.items())
              + ("  <- mass and candidates" if i == mass else ""))


if __name__ == "__main__":
    main()
