"""On a GPU: where one verification call's time goes, kernel by kernel (torch.profiler's CUDA activity).

    python tests/gpu_kernel_breakdown.py --batch 1 --k 3 --model llama3 --draft logits --top-k 50 --top-p 0.9
    python tests/gpu_kernel_breakdown.py --batch 8 --model llama3 --tree 2x2
    python tests/gpu_kernel_breakdown.py --batch 256 --k 7 --model qwen3 --method block --target probs

One case (``bench.plan_cases``: the same inputs ``specbench kernels`` builds, ``--acceptance 3`` or ``full``)
on the Triton implementation (or the launch variant ``--impl`` names). After warm-up calls, ``--calls`` calls are profiled, each after an L2 flush (cold,
as the host-free timer takes them; each call's first kernel, left out; ``--warm``: a one-element kernel in its place,
the rows left in L2 by the call before, as a CUDA graph of a small batch finds them) and a wait, so that calls never
overlap. Per kernel name: launches a call,
the median duration of one launch, and its share of the kernels' sum (and, where a kernel is launched more
than once a call, each launch's median duration by its place in the call). Then the median of that sum, and of
the call's span on the GPU (first kernel start to last kernel end). Span minus sum is the time between the
kernels: launch gaps and the work of an earlier kernel that a later one waits for. Kernel durations come
from CUPTI, so they exclude the host's launch time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from specbench import bench, models, timing
from specbench.errors import SpecbenchError
from specbench.implementations.registry import resolve_all
from specbench.scenarios import make_profile


def _case(args: argparse.Namespace) -> bench.Case:
    from specbench import tree_shapes
    from specbench.tree_inputs import spine

    shape = None if args.tree is None else tree_shapes.parse_tree_shape(args.tree)
    if shape is not None and not isinstance(shape, tree_shapes.TreeShape):
        raise SpecbenchError(f"--tree takes chain:K, WxD or parents:-1,0,..., got {args.tree!r}")
    depth = args.k if shape is None else len(spine(shape.parents))
    if args.acceptance == "full":
        profile = make_profile(depth, acceptance_length=depth + 1, name="full")
    else:
        profile = make_profile(depth, acceptance_length=float(args.acceptance), name=args.acceptance)
    preset = None if args.model is None else models.resolve_model(args.model)
    vocabulary = (None, args.vocab) if preset is None else (preset.name, preset.vocab_size)
    (case,) = bench.plan_cases(modes=[args.mode], batch_sizes=[args.batch], vocabularies=[vocabulary],
                               profiles=[profile], dtypes=[args.dtype], drafts=[args.draft], targets=[args.target],
                               top_k=args.top_k, top_p=args.top_p, min_p=args.min_p, methods=[args.method],
                               tree=shape)
    return case


def breakdown(case: bench.Case, calls: int, warmup: int, impl: str = "triton", warm: bool = False) -> None:
    device = torch.device("cuda", torch.cuda.current_device())
    inputs = bench.make_inputs(case, device)
    (triton,) = resolve_all([impl])
    call = triton.bind(inputs.verify_kwargs())
    flush = timing._flush_windows(timing._flush_buffer(device, 1), device, 1)[0]
    marker = torch.zeros(1, device=device)
    for _ in range(warmup):
        call()
    torch.cuda.synchronize(device)

    def profiled_calls() -> None:
        for _ in range(calls):
            if warm:  # a one-element kernel in the flush's place: it marks the call and leaves L2 as it was
                marker.add_(1)
            else:
                timing._evict(flush)
            call()
            torch.cuda.synchronize(device)

    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as profiler:
        profiled_calls()
    launched = sorted((event for event in profiler.events() if event.device_type == torch.autograd.DeviceType.CUDA),
                      key=lambda event: event.time_range.start)
    # each call's first kernel is its flush (a wait separates the calls): left out by its place, not its name
    per_call = len(launched) // calls if calls else 0
    flushes = {event.name for event in launched[::per_call]} if per_call else set()
    if per_call < 2 or len(launched) % calls or len(flushes) != 1:
        sys.exit(f"found {len(launched)} kernels in {calls} calls: not the same launches in every call; "
                 f"names: {sorted({event.name for event in launched})}")
    kernels = [event for index, event in enumerate(launched) if index % per_call]
    per_call -= 1
    durations: dict[str, list[float]] = defaultdict(list)
    by_place: dict[int, list[float]] = defaultdict(list)  # each launch of a call by its place in the call
    names: dict[int, str] = {}
    sums, spans = [], []
    for index in range(calls):
        launches = kernels[index * per_call:(index + 1) * per_call]
        for place, event in enumerate(launches):
            durations[event.name].append(event.time_range.elapsed_us())
            by_place[place].append(event.time_range.elapsed_us())
            names[place] = event.name
        sums.append(sum(event.time_range.elapsed_us() for event in launches))
        spans.append(launches[-1].time_range.end - launches[0].time_range.start)
    total = statistics.median(sums)
    print(f"{case.mode} B={case.batch_size} K={case.num_spec_tokens} V={case.vocab_size} draft={case.draft} "
          f"target={case.target} top_k={case.top_k} top_p={case.top_p} min_p={case.min_p} method={case.method} "
          f"tree={case.tree}: {calls} {'warm' if warm else 'cold'} calls, {per_call} launches each")
    print(f"{'kernel':<44} {'launches':>8} {'median µs':>10} {'share':>6}")
    for name, values in sorted(durations.items(), key=lambda item: -sum(item[1])):
        launches = len(values) // calls
        share = sum(values) / calls / total if total else 0.0
        print(f"{name[:44]:<44} {launches:>8} {statistics.median(values):>10.2f} {share:>6.1%}")
    if per_call > len(durations):  # a kernel launched more than once a call: each launch in the call's order
        print("each launch, in the call's order: median µs")
        for place, values in sorted(by_place.items()):
            print(f"  {place:>2} {names[place][:44]:<44} {statistics.median(values):>10.2f}")
    print(f"kernels' sum a call: median {total:.2f} µs; span on the GPU: median {statistics.median(spans):.2f} µs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", default="probabilistic")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--vocab", type=int, default=128256)
    parser.add_argument("--model", default=None)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--draft", default="logits")
    parser.add_argument("--target", default="logits")
    parser.add_argument("--acceptance", default="3")
    parser.add_argument("--top-k", type=int, default=None)
    parser.add_argument("--top-p", type=float, default=None)
    parser.add_argument("--min-p", type=float, default=None)
    parser.add_argument("--method", default="token")
    parser.add_argument("--tree", default=None)
    parser.add_argument("--impl", default="triton", help="a Triton implementation or launch variant")
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--warm", action="store_true",
                        help="no L2 flush before a call: the rows where the call before left them, as a CUDA graph's "
                             "repeated calls of a small batch find them")
    args = parser.parse_args()
    try:
        case = _case(args)  # the case is checked (and refused in one line) before any GPU is needed
    except SpecbenchError as exc:
        sys.exit(str(exc))
    if not torch.cuda.is_available():
        sys.exit(f"needs a CUDA GPU (the case is valid: {case})")
    breakdown(case, args.calls, args.warmup, args.impl, args.warm)


if __name__ == "__main__":
    main()
