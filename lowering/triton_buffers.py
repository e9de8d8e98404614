"""The named buffers a Triton kernel is printed into.

As in Inductor (``torch/_inductor/codegen/common.py``), code is written line by
line into an :class:`IndentedBuffer`, and a kernel keeps one buffer per part
of its body (:class:`KernelBody`), which are joined only at the end.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from mirage_xdsl.dialects.block_structure import Phase

INDENT = "    "


class IndentedBuffer:
    """Lines of code, each written at the buffer's current indentation."""

    def __init__(self) -> None:
        self._lines: list[str] = []
        self._indent = 0

    def __bool__(self) -> bool:
        return bool(self._lines)

    def writeline(self, line: str) -> None:
        self._lines.append(INDENT * self._indent + line)

    @contextmanager
    def indent(self) -> Iterator[None]:
        """Write one level deeper inside the ``with`` block."""
        self._indent += 1
        try:
            yield
        finally:
            self._indent -= 1

    def splice(self, other: IndentedBuffer) -> None:
        """Append ``other``'s lines at this buffer's indentation."""
        for line in other._lines:
            self.writeline(line)

    def getvalue(self) -> str:
        return "\n".join(self._lines)


@dataclass
class KernelBody:
    """The parts of a kernel's body, each a buffer, in the order they print.

    Before the wait for the kernel ahead (``gdc_wait()``): what is computed
    from the program's inputs alone, loop-invariant code then its own pass of
    the for-loop. After it: loop-invariant code, the for-loop's body, the
    lines that end each iteration once every accumulator is updated, and
    what follows the loop.
    """

    early_invariant: IndentedBuffer = field(default_factory=IndentedBuffer)
    early_loop: IndentedBuffer = field(default_factory=IndentedBuffer)
    invariant: IndentedBuffer = field(default_factory=IndentedBuffer)
    loop: IndentedBuffer = field(default_factory=IndentedBuffer)
    loop_tail: IndentedBuffer = field(default_factory=IndentedBuffer)
    post: IndentedBuffer = field(default_factory=IndentedBuffer)

    def section(self, phase: Phase, early: bool) -> IndentedBuffer:
        """The buffer of an op's ``phase``, before the wait when ``early``
        (the part before the wait ends with its loop: what follows a loop
        prints after the wait)."""
        if phase == Phase.INVARIANT:
            return self.early_invariant if early else self.invariant
        if phase == Phase.LOOP:
            return self.early_loop if early else self.loop
        return self.post
