"""Comparing GPU results with the reference interpreter.

The interpreter computes in fp32 throughout; a GPU program keeps fp16 tensors
between kernels and accumulates in fp32, so the two differ by rounding. The
measure is the relative L2 error ``‖out − ref‖ / ‖ref‖`` per output, and a
result passes at :data:`FP16_TOLERANCE`. A non-finite element in a GPU output
(every output is poisoned with NaN before the run, so an element no kernel
wrote stays NaN) fails whatever the rest says.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mirage_xdsl.runtime.arguments import element_type
from mirage_xdsl.runtime.compiled import CompiledProgram

FP16_TOLERANCE = 2e-2
"""Relative L2 error allowed for fp16 outputs computed with fp32 accumulation."""

INPUT_AMPLITUDE = 0.25
"""Inputs are uniform in [-a, a]. At a = 1 the benchmark attention's exp(Q·K)
row sums exceed fp16's range (65504), which no fp16 program can represent;
0.25 keeps every workload's intermediates in range."""


def relative_l2(out: np.ndarray, ref: np.ndarray) -> float:
    """‖out − ref‖ / ‖ref‖ in float64; ``inf`` when ``out`` is not all finite."""
    out = np.asarray(out, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if not np.isfinite(out).all():
        return float("inf")
    return float(np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-30))


@dataclass(frozen=True)
class Comparison:
    errors: tuple[float, ...]
    """Relative L2 error of each output."""
    nonfinite: tuple[int, ...]
    """Non-finite (unwritten or overflowed) elements of each output."""
    reference_finite: bool
    tolerance: float

    @property
    def worst(self) -> float:
        return max(self.errors, default=0.0)

    @property
    def ok(self) -> bool:
        return self.reference_finite and self.worst <= self.tolerance

    def summary(self) -> str:
        if not self.reference_finite:
            return "reference has non-finite values (inputs too large?)"
        bad = [f"output {i}: {n} non-finite" for i, n in enumerate(self.nonfinite) if n]
        if bad:
            return "; ".join(bad)
        return f"max rel. L2 {self.worst:.2e} (tolerance {self.tolerance:.0e})"


def compare(
    outs: Sequence[np.ndarray],
    refs: Sequence[np.ndarray],
    tolerance: float = FP16_TOLERANCE,
) -> Comparison:
    if len(outs) != len(refs):
        raise ValueError(f"{len(outs)} outputs against {len(refs)} references")
    for o, r in zip(outs, refs, strict=True):
        if o.shape != r.shape:
            raise ValueError(f"output shape {o.shape} against reference {r.shape}")
    return Comparison(
        errors=tuple(relative_l2(o, r) for o, r in zip(outs, refs, strict=True)),
        nonfinite=tuple(
            int(np.size(o) - np.isfinite(np.asarray(o, np.float32)).sum()) for o in outs
        ),
        reference_finite=all(np.isfinite(r).all() for r in refs),
        tolerance=tolerance,
    )


def run_poisoned(
    compiled: CompiledProgram, inputs: Sequence[np.ndarray], use_torch: bool
) -> list[np.ndarray]:
    """Run once on fresh buffers poisoned with NaN; return float32 numpy outputs.

    With ``use_torch`` the inputs go through torch tensors and preallocated
    NaN-filled outputs (the path PyTorch users take); otherwise through numpy
    copies. Intermediates are poisoned too, so a kernel that reads what no
    kernel wrote produces NaN.
    """
    compiled.poison_intermediates()
    if not use_torch:
        return [np.asarray(o, np.float32) for o in compiled.run(*inputs)]
    import torch

    dev = f"cuda:{compiled.device_ordinal}"
    # via float32, which holds f16 and bf16 values exactly (torch has no ml_dtypes)
    xs = [
        torch.from_numpy(np.asarray(x, np.float32)).to(
            dev, element_type(spec).torch_dtype()
        )
        for x, spec in zip(inputs, compiled.inputs(), strict=True)
    ]
    outs = [
        torch.full(
            spec.shape, float("nan"), dtype=element_type(spec).torch_dtype(), device=dev
        )
        for spec in compiled.outputs()
    ]
    compiled.run(*xs, outputs=outs)
    compiled.synchronize()
    return [o.float().cpu().numpy() for o in outs]
