"""How many truncated rows of `specbench kernels -l 3`'s planned inputs the histogram path reads, per request, at the
issue's shapes (a count on the CPU, no timing): every row a step may read (target rows 0..n, draft rows 0..n-1 of
draft logits, all cut), the rows searched past the first level once drafts are decided first (row t, and the draft
row t when t < n: every request here is decided clean, as its accepted drafts are the target's argmax and its
rejected draft has p = 0), and the rows a step reads up to its first rejection (what deciding position by position
would leave the first two launches). From the repository root: python3 results/h200-decide/reached_rows.py
"""

from specbench.acceptance import length_to_rates
from specbench.bench import assign_accepted_counts

for batch, num_spec in ((1, 3), (8, 3), (64, 4), (256, 7), (512, 7)):
    rates = length_to_rates(3.0, num_spec, "min-variance")  # `kernels -l 3`'s default schedule
    accepted = assign_accepted_counts(rates, batch, seed=0)
    every = batch * (2 * num_spec + 1)
    searched = sum(1 + (a < num_spec) for a in accepted)
    reached = sum((a + 1) + min(a + 1, num_spec) for a in accepted)
    print(f"B = {batch:3d}, K = {num_spec}: rows a step may read {every:5d}; searched past the first level "
          f"{searched:4d} ({searched / every:.0%}); read up to the first rejection {reached:5d} ({reached / every:.0%})")
