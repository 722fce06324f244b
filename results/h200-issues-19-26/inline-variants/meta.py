"""Registers, spills and shared memory of every compiled kernel each package launched (run after a kernels run
in the same process is not possible: this runs one case per package itself)."""
import importlib
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from specbench import bench, scenarios

for batch, num_spec, model_vocab in ((8, 3, 128256), (64, 4, 151936), (512, 7, 128256)):
    profile = scenarios.make_profile(num_spec, acceptance_length=3.0, name="3")
    for draft in ("probs", "none"):
        case = bench.plan_cases(modes=["probabilistic"], batch_sizes=[batch], vocabularies=[(None, model_vocab)],
                                profiles=[profile], drafts=[draft], targets=["probs"])[0]
        inputs = bench.make_inputs(case, "cuda", seed=0)
        for package in ("specbench_e2c5a2e", "specbench_final", "specbench_v3a", "specbench_v3b"):
            verification = importlib.import_module(f"{package}.verification")
            launch = importlib.import_module(f"{package}.kernels.launch")
            fn, checked = verification.prepare_verify(**inputs.verify_kwargs(), backend="triton")
            fn(**checked)
            fn(**checked)
            torch.cuda.synchronize()
            for name in ("_SEQUENTIAL", "_ROWS", "_TERMINAL"):
                for key, compiled in getattr(launch, name).compiled.items():
                    print(batch, draft, package, name, key[:6], "regs", getattr(compiled, "n_regs", "?"),
                          "spills", getattr(compiled, "n_spills", "?"), "shared",
                          getattr(getattr(compiled, "metadata", None), "shared", "?"))
            for name in ("_SEQUENTIAL", "_ROWS", "_TERMINAL"):
                getattr(launch, name).compiled.clear()
