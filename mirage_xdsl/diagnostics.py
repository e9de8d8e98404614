"""User-facing diagnostics: one line, ``file:line:col: error: message``.

xDSL reports parse errors with a source excerpt and verifier errors without a
location. The driver wants one line that names the place and the problem, so
this module records where each op was parsed and verifies op by op, innermost
first, attributing each failure to the op that raised it.
"""

from __future__ import annotations

from collections.abc import Iterator

from xdsl.context import Context
from xdsl.dialects.builtin import FileLineColLoc, IntAttr, ModuleOp, StringAttr
from xdsl.ir import Operation
from xdsl.parser import Parser
from xdsl.utils.exceptions import DiagnosticException, ParseError, VerifyException


class MirageError(Exception):
    """An error in the user's input or options, reported as one line."""


class LocatingParser(Parser):
    """A parser that attaches the source position of every op to the op."""

    def parse_operation(self) -> Operation:
        location = self._current_token.span.get_location()
        op = super().parse_operation()
        if not isinstance(op.location, FileLineColLoc):
            op.location = FileLineColLoc(
                StringAttr(location.file), IntAttr(location.line), IntAttr(location.col)
            )
        return op


def where(op: Operation) -> str:
    """``file:line:col`` of an op, or its name when it was not parsed from text."""
    loc = op.location
    if isinstance(loc, FileLineColLoc):
        return f"{loc.filename.data}:{loc.line.data}:{loc.column.data}"
    return f"'{op.name}'"


def first_line(message: str) -> str:
    return next((line for line in str(message).splitlines() if line.strip()), "")


def parse_error_line(error: ParseError) -> str:
    return f"{error.span.get_location()}: error: {first_line(error.msg)}"


def parse(ctx: Context, text: str | bytes, name: str) -> ModuleOp:
    """Parse a module, raising :class:`MirageError` with a located message."""
    try:
        return LocatingParser(ctx, text, name).parse_module()
    except ParseError as e:
        raise MirageError(parse_error_line(e)) from None


def _post_order(op: Operation) -> Iterator[Operation]:
    for region in op.regions:
        for block in region.blocks:
            for inner in block.ops:
                yield from _post_order(inner)
    yield op


def _cause(error: Exception) -> str:
    text = str(error)
    marker = "Operation does not verify: "
    for line in text.splitlines():
        if marker in line:
            return line.split(marker, 1)[1].strip()
    return first_line(text)


def verify(module: ModuleOp) -> None:
    """Verify every op, raising :class:`MirageError` located at the first bad one."""
    for op in _post_order(module):
        try:
            op.verify(verify_nested_ops=False)
        except (VerifyException, DiagnosticException) as e:
            raise MirageError(f"{where(op)}: error: {_cause(e)}") from None
