"""Inputs for running a program: its input shapes and seeded random values.

The verifier, the search, the drivers and the tests all draw inputs the same
way, so a failure seen in one can be reproduced in another from the seed.
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from mirage_xdsl.semantics.interpreter import entry_function


def input_shapes(module: ModuleOp) -> list[tuple[int, ...]]:
    """The static shape of each input of the module's entry function."""
    fn = entry_function(module)
    return [tuple(t.get_shape()) for t in fn.function_type.inputs.data]  # type: ignore[attr-defined]


def random_inputs(
    module: ModuleOp, seed: int = 0, low: float = -1.0, high: float = 1.0
) -> list[np.ndarray]:
    """fp16 inputs drawn uniformly; small magnitudes keep exp() in fp16 range."""
    rng = np.random.default_rng(seed)
    return [rng.uniform(low, high, s).astype(np.float16) for s in input_shapes(module)]
