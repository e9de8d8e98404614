"""The passes (``-p NAME``) and targets (``-t NAME``) of mirage-xdsl.

Both tables map a name to a loader, the shape xDSL's ``Universe`` expects, so
``mirage-opt`` and stock ``xdsl-opt`` list the same passes and targets, and
naming one does not import every subsystem. The registry sits above the
passes, the lowering and the search, so none of them imports it.
"""

from collections.abc import Callable

from xdsl.passes import ModulePass
from xdsl.utils.target import Target


def _default_customize() -> type[ModulePass]:
    from mirage_xdsl.lowering.default_customize import DefaultCustomizePass

    return DefaultCustomizePass


def _fold_transposes() -> type[ModulePass]:
    from mirage_xdsl.lowering.fold_transposes import FoldTransposesPass

    return FoldTransposesPass


def _fold_slices() -> type[ModulePass]:
    from mirage_xdsl.lowering.fold_slices import FoldSlicesPass

    return FoldSlicesPass


def _fold_producers() -> type[ModulePass]:
    from mirage_xdsl.lowering.fold_producers import FoldProducersPass

    return FoldProducersPass


def _fuse_thread_graphs() -> type[ModulePass]:
    from mirage_xdsl.lowering.fuse_thread_graphs import FuseThreadGraphsPass

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
        "fold-producers": _fold_producers,
        "fold-slices": _fold_slices,
        "fold-transposes": _fold_transposes,
        "fuse-thread-graphs": _fuse_thread_graphs,
        "lower-to-gpu": _lower_to_gpu,
        "legalize-for-triton": _legalize_for_triton,
        "apply-mirage-rewrites": _apply_mirage_rewrites,
        "verify-equivalent": _verify_equivalent,
        "superoptimize": _superoptimize,
    }


ALL_PASSES = _all_passes()
"""Each pass name, as ``-p`` takes it, to a loader of its ``ModulePass``."""


def _cuda() -> type[Target]:
    from mirage_xdsl.lowering.cuda import CudaTarget

    return CudaTarget


def _ptx() -> type[Target]:
    from mirage_xdsl.lowering.cuda import PtxTarget

    return PtxTarget


def _triton() -> type[Target]:
    from mirage_xdsl.lowering.triton import TritonTarget

    return TritonTarget


def _dot() -> type[Target]:
    from mirage_xdsl.ir.dot import DotTarget

    return DotTarget


def _all_targets() -> dict[str, Callable[[], type[Target]]]:
    return {"cuda": _cuda, "ptx": _ptx, "triton": _triton, "dot": _dot}


ALL_TARGETS = _all_targets()
"""Each target name, as ``-t`` takes it, to a loader of its ``Target``."""
