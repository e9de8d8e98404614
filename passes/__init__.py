"""Module passes of mirage-xdsl, one module each.

``ALL_PASSES`` maps each pass name to a loader, the shape xDSL's ``Universe``
expects, so ``mirage-opt`` and stock ``xdsl-opt`` list the same passes.
"""

from collections.abc import Callable

from xdsl.passes import ModulePass


def _apply_mirage_rewrites() -> type[ModulePass]:
    from mirage_xdsl.passes.apply_mirage_rewrites import ApplyMirageRewrites

    return ApplyMirageRewrites


def _superoptimize() -> type[ModulePass]:
    from mirage_xdsl.passes.superoptimize import Superoptimize

    return Superoptimize


def _all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    return {
        "apply-mirage-rewrites": _apply_mirage_rewrites,
        "superoptimize": _superoptimize,
    }


ALL_PASSES = _all_passes()
