"""``verify-equivalent{against=REF.mlir}``: fail unless the module is
equivalent to a reference program.

Runs the probabilistic finite-field verifier (see ``mirage_xdsl/verify/equivalence.py``)
between the module being compiled and the program in ``against``, so a
pipeline can check that the rewrites before it preserved the meaning. The
module is left unchanged; a non-equivalent module fails the pipeline with the
verifier's reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from mirage_xdsl.ir.diagnostics import MirageError, parse, verify


@dataclass(frozen=True)
class VerifyEquivalentPass(ModulePass):
    """Check the module against a reference program, changing nothing."""

    name = "verify-equivalent"

    against: str
    """Path of the reference program (.mlir)."""
    trials: int = 0
    """Number of trials; 0 runs enough for a false-positive bound of 2^-40."""
    seed: int = 0

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        from mirage_xdsl.verify.equivalence import equivalent

        try:
            text = Path(self.against).read_text()
        except OSError as e:
            raise MirageError(
                f"{self.against}: error: {e.strerror} (verify-equivalent against=)"
            ) from None
        reference = parse(ctx, text, self.against)
        verify(reference)
        verdict = equivalent(op, reference, trials=self.trials or None, seed=self.seed)
        if not verdict.equivalent:
            raise MirageError(
                f"error: verify-equivalent: the module is not equivalent to "
                f"{self.against}: {verdict.reason}"
            )
