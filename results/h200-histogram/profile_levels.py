"""One call of the split histogram path's launches for ncu: B = 64, five N(0, 1) target rows of 151936 tokens
(logits), top_p 0.95, after two warm-up calls (compiles). Usage, from the repository root on the GPU machine:
ncu --clock-control none --kernel-name regex:_split_histogram_kernel --launch-skip 12 --launch-count 6
--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis
--section Occupancy python3 results/h200-histogram/profile_levels.py (the skip leaves out the two warm-up
calls' six launches each)."""

import torch

from specbench.kernels import launch

DEVICE = torch.device("cuda")
BATCH, ROWS, VOCAB = 64, 5, 151936

torch.manual_seed(0)
values = torch.randn(BATCH, ROWS, VOCAB, device=DEVICE)
for _ in range(3):
    launch.truncation_summaries(target=values, target_is_probs=False, temperatures=torch.ones(BATCH, device=DEVICE),
                                num_draft_tokens=torch.full((BATCH,), ROWS - 1, dtype=torch.int32, device=DEVICE),
                                top_k=None, top_p=torch.full((BATCH,), 0.95, device=DEVICE), min_p=None)
torch.cuda.synchronize()
print("done")
