"""Run the Triton kernels of every µGraph of a compiled transformers Llama (or
another family of ``hf_configs.FAMILIES``) in Triton's CPU interpreter and
compare them with ours.

Started by ``tests/test_hf_compile.py`` in a subprocess (Triton reads
``TRITON_INTERPRET`` at import). Prints the JSON lines of
``triton_interpret.check``, one per part and form.

    python tests/hf_triton_interpret.py float16
    python tests/hf_triton_interpret.py float16 cohere
"""

from __future__ import annotations

import os
import sys

os.environ["TRITON_INTERPRET"] = "1"
sys.path.insert(0, os.path.dirname(__file__))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import triton_interpret  # noqa: E402
from test_hf_compile import greedy, tiny_llama  # noqa: E402

from mirage_xdsl.torch import backend  # noqa: E402


def parts_of_a_decode(dtype: torch.dtype, family: str | None = None) -> list:
    """The parts torch.compile makes of a prefill and a decode step."""
    parts = []
    runner = backend._runner

    def keep(part, opts):
        parts.append(part)
        return runner(part, opts)

    backend._runner = keep
    if family is None:
        model = tiny_llama(dtype)
    else:
        from hf_configs import family_config
        from transformers import AutoModelForCausalLM

        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(family_config(family))
        model = model.to(dtype).eval()
    options = {"cpu": "interpret", "superoptimize": False}
    greedy(
        model, torch.compile(model, backend="mirage", dynamic=False, options=options), 2
    )
    return parts


def inputs(part, rng) -> list[np.ndarray]:
    """Random inputs (a boolean mask 0/1 with its first key attended), the
    stacked sibling weights the part takes, and its constants."""
    xs = []
    for node in part.inputs:
        val = node.meta["val"]
        if val.dtype == torch.bool:
            x = (rng.random(tuple(val.shape)) < 0.6).astype(np.float32)
            x[..., 0] = 1
        else:
            x = 0.5 * rng.standard_normal(tuple(val.shape)).astype(np.float32)
        xs.append(x)
    stacks = [np.concatenate([xs[i] for i in group], axis=0) for group in part.stacked]
    return xs + stacks + [t.float().numpy() for t in part.captured.parameters]


def main(dtype: str, family: str | None = None) -> None:
    rng = np.random.default_rng(0)
    for part in parts_of_a_decode(getattr(torch, dtype), family):
        triton_interpret.check(part.name, part.captured.module, inputs(part, rng))


if __name__ == "__main__":
    main(*sys.argv[1:3])
