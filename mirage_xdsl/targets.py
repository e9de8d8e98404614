"""Output targets (``-t NAME``) of mirage-xdsl, in xDSL's ``Target`` shape."""

from collections.abc import Callable

from xdsl.utils.target import Target


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
    from mirage_xdsl.dot import DotTarget

    return DotTarget


def _all_targets() -> dict[str, Callable[[], type[Target]]]:
    return {"cuda": _cuda, "ptx": _ptx, "triton": _triton, "dot": _dot}


ALL_TARGETS = _all_targets()
