"""Tree 2x2 / chain K = 6 (the chain kernel reading as many rows) from a `specbench kernels --tree 2x2,chain:6` results
file, per draft form, acceptance case and batch size, for each implementation in it:
`python3 results/h200-tree-masses-tail/landed/ratios.py results/h200-tree-masses-tail/landed/tree/results.csv`.
"""

import sys

import pandas as pd

d = pd.read_csv(sys.argv[1])
d["shape"] = None
d.loc[d.tree == "2x2", "shape"] = "tree"
d.loc[d.tree.isna() & (d.num_spec_tokens == 6), "shape"] = "chain"  # the chain kernel (chain:6 is the tree kernels')
d = d[d["shape"].notna()]
p = d.pivot_table(index=["draft", "acceptance", "batch_size"], columns=["impl", "shape"], values="median_us")
out = pd.DataFrame(index=p.index)
for impl in d.impl.unique():
    out[impl + " tree"] = p[(impl, "tree")].round(2)
    out[impl + " x"] = (p[(impl, "tree")] / p[(impl, "chain")]).round(3)
print(out.to_string())
