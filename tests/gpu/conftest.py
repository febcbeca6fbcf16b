"""The GPU suite: circuitbook on CUDA, in float32, float16 and bfloat16, against CPU float64.

Every test compares a result computed on the GPU with the same computation done on the CPU in
float64 from the same weights (the reference), within a tolerance derived from the dtype's
machine epsilon and the size of the reductions involved (``gpu_helpers.tolerance``).

Without a CUDA GPU every test is skipped, visibly (``pytest -ra`` lists the reason).
``CIRCUITBOOK_GPU_SUITE_DEVICE=cpu`` runs the suite on the CPU instead, in the same dtypes:
a dry run of the tolerances on a machine without a GPU (CPU half-precision kernels accumulate
in float32, so this is a milder test than the GPU's).

Shared with every file here (the exercise checks' suite included): the ``device`` fixture (a
full ``torch.device``, with its index, so ``tensor.device == device`` is the test) and the
``dtype`` fixture; ``gpu_helpers`` holds the tolerances, ``on``/``reference`` copies and
``assert_on`` (every tensor of a result on one device).
"""

from __future__ import annotations

import os
import warnings

import pytest
import torch

warnings.filterwarnings("ignore", message="HookedTransformer is deprecated")

DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def suite_device() -> torch.device:
    wanted = os.environ.get("CIRCUITBOOK_GPU_SUITE_DEVICE", "cuda")
    if wanted.startswith("cuda") and not torch.cuda.is_available():
        pytest.skip("no CUDA GPU here: the GPU suite compares CUDA results with CPU float64 and needs one "
                    "(CIRCUITBOOK_GPU_SUITE_DEVICE=cpu dry-runs it on the CPU)")
    chosen = torch.device(wanted)
    if chosen.type == "cuda" and chosen.index is None:
        # tensors report their index (cuda:0): the suite compares devices in full, not by type
        chosen = torch.device("cuda", torch.cuda.current_device())
    return chosen


@pytest.fixture(scope="session")
def device() -> torch.device:
    return suite_device()


@pytest.fixture(params=DTYPES, ids=lambda dt: str(dt).removeprefix("torch."))
def dtype(request, device) -> torch.dtype:
    dt = request.param
    if dt is torch.bfloat16 and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        pytest.skip(f"bfloat16 is not supported on {torch.cuda.get_device_name(device)}")
    return dt
