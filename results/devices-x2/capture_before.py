"""`specbench kernels` with timing._capture as it was before 053d191 (capture-order.sh runs it from the repository root)."""
import sys

import torch

from specbench import timing


def _capture_before(fns, num_calls, device):
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        for fn in fns:
            fn()
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for call in range(num_calls):
            fns[call % len(fns)]()
    return graph.replay


timing._capture = _capture_before
from specbench.cli import run

sys.exit(run(sys.argv[1:]))
