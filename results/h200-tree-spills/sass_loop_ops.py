"""The one-program tree kernel's innermost SASS loops of more than 300 instructions, with each opcode's count per
iteration: the probabilistic mode, target logits, draft logits (argument 1) or probabilities (2), independent
candidates, compiled here for sm_90 at the launch shape the launcher takes (``tests/compile_kernels.py``'s variant).

Usage, from the repository root, no GPU needed: ``python3 results/h200-tree-spills/sass_loop_ops.py 1``. The largest
loop is the pass that sums the mass after a first rejected child and keeps the race's candidates
(``_mass_and_candidates``). ``sass-loops.txt`` holds its output for d9959e6 and for 3cbd4c2.
"""

import collections
import inspect
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import triton
from triton.backends.compiler import GPUTarget

sys.path.insert(0, "tests")
import compile_kernels  # (tests/ on the path first)


def _loops(sass: str) -> list[list[str]]:
    # the opcodes of each innermost loop (a backward branch whose body holds no other), as compile_kernels.sass_loops
    code = [(int(address, 16), text) for address, text in re.findall(r"/\*([0-9a-f]{4,})\*/\s+([^;]*);", sass)]
    index = {address: i for i, (address, _text) in enumerate(code)}
    spans = []
    for i, (address, text) in enumerate(code):
        branch = re.search(r"\bBRA\b[^0-9]*(0x[0-9a-f]+)", text)
        if branch and int(branch.group(1), 16) < address and int(branch.group(1), 16) in index:
            spans.append((index[int(branch.group(1), 16)], i))
    inner = [(a, b) for a, b in spans if not any(a <= c and d <= b and (c, d) != (a, b) for c, d in spans)]
    return [[(text.split()[1] if text.startswith("@") else text.split()[0]).split(".")[0]
             for _address, text in code[a:b + 1]] for a, b in inner]


def main() -> None:
    draft = int(sys.argv[1])
    kernel, constexprs, warps, dtype = next(
        v for v in compile_kernels.variants()
        if v[0].fn.__name__ == "_verify_tree_kernel" and v[1]["MODE"] == 1 and v[1]["DRAFT"] == draft
        and v[1]["TARGET_PROBS"] == 0 and v[1]["WITHOUT_REPLACEMENT"] == 0)
    names = list(inspect.signature(kernel.fn).parameters)
    sig = compile_kernels.signature(kernel, constexprs, dtype)
    source = triton.compiler.ASTSource(fn=kernel, signature=sig,
                                       constexprs={(names.index(n),): v for n, v in constexprs.items()},
                                       attrs=compile_kernels.aligned_attributes(names, sig))
    compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})
    with tempfile.TemporaryDirectory() as folder:
        cubin = Path(folder) / "kernel.cubin"
        cubin.write_bytes(compiled.asm["cubin"])
        tool = str(compile_kernels._cuda_tool("cuobjdump"))
        sass = subprocess.run([tool, "-sass", str(cubin)], check=True, capture_output=True, text=True).stdout
    for ops in _loops(sass):
        if len(ops) > 300:
            print(len(ops), dict(collections.Counter(ops).most_common(25)))


if __name__ == "__main__":
    main()
