"""The xDSL context and registries every driver of mirage-xdsl uses."""

from __future__ import annotations

from collections.abc import Callable

from xdsl.context import Context
from xdsl.ir import Dialect


def _kernel() -> Dialect:
    from mirage_xdsl.dialects.kernel import Kernel

    return Kernel


def _block() -> Dialect:
    from mirage_xdsl.dialects.block import BlockDialect

    return BlockDialect


def _thread() -> Dialect:
    from mirage_xdsl.dialects.thread import Thread

    return Thread


def _gpux() -> Dialect:
    from mirage_xdsl.dialects.gpux import GPUX

    return GPUX


DIALECTS: dict[str, Callable[[], Dialect]] = {
    "kernel": _kernel,
    "block": _block,
    "thread": _thread,
    "gpux": _gpux,
}


def make_context() -> Context:
    """A context with builtin, func and the µGraph dialects loaded."""
    from xdsl.dialects import builtin, func

    ctx = Context()
    ctx.load_dialect(builtin.Builtin)
    ctx.load_dialect(func.Func)
    for load in DIALECTS.values():
        ctx.load_dialect(load())
    return ctx
