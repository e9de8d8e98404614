"""Module passes of mirage-xdsl, one module each.

``ALL_PASSES`` maps each pass name to a loader, the shape xDSL's ``Universe``
expects, so ``mirage-opt`` and stock ``xdsl-opt`` list the same passes.
"""

from collections.abc import Callable

from xdsl.passes import ModulePass


def _default_customize() -> type[ModulePass]:
    from mirage_xdsl.passes.default_customize import DefaultCustomizePass

    return DefaultCustomizePass


def _fuse_thread_graphs() -> type[ModulePass]:
    from mirage_xdsl.passes.fuse_thread_graphs import FuseThreadGraphsPass

    return FuseThreadGraphsPass


def _lower_to_gpu() -> type[ModulePass]:
    from mirage_xdsl.lowering.lower_to_gpu import LowerToGpuPass

    return LowerToGpuPass


def _legalize_for_triton() -> type[ModulePass]:
    from mirage_xdsl.lowering.triton_legalize import LegalizeForTritonPass

    return LegalizeForTritonPass


def _apply_mirage_rewrites() -> type[ModulePass]:
    from mirage_xdsl.passes.apply_mirage_rewrites import ApplyMirageRewrites

    return ApplyMirageRewrites


def _verify_equivalent() -> type[ModulePass]:
    from mirage_xdsl.passes.verify_equivalent import VerifyEquivalentPass

    return VerifyEquivalentPass


def _superoptimize() -> type[ModulePass]:
    from mirage_xdsl.passes.superoptimize import Superoptimize

    return Superoptimize


def _all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    return {
        "default-customize": _default_customize,
        "fuse-thread-graphs": _fuse_thread_graphs,
        "lower-to-gpu": _lower_to_gpu,
        "legalize-for-triton": _legalize_for_triton,
        "apply-mirage-rewrites": _apply_mirage_rewrites,
        "verify-equivalent": _verify_equivalent,
        "superoptimize": _superoptimize,
    }


ALL_PASSES = _all_passes()
