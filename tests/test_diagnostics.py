"""Regressions for inputs that once crashed or hung the parser and verifiers."""

from __future__ import annotations

import time

import pytest

from mirage_xdsl.ir.context import make_context
from mirage_xdsl.ir.diagnostics import MirageError, parse, verify

CUSTOMIZED = """func.func @f(%x: tensor<8x32xf16>) -> tensor<8x32xf16> {
  %o = kernel.customized(%x) grid GRID block [128, 1, 1] forloop 1 : (tensor<8x32xf16>) -> tensor<8x32xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap IMAP fmap -1 : tensor<8x32xf16> -> tensor<8x32xf16>
    block.output %t omap [-1, -1, -1] : tensor<8x32xf16>
  }
  func.return %o : tensor<8x32xf16>
}
"""


def error_of(text: str | bytes) -> str:
    with pytest.raises(MirageError) as info:
        verify(parse(make_context(), text, "t.mlir"))
    return str(info.value)


def test_unterminated_string_is_linear() -> None:
    """xDSL's string pattern backtracked exponentially on a missing quote."""
    text = 'func.func @f() {\n  %0 = "kernel.exp' + " a" * 40 + "\n}\n"
    start = time.perf_counter()
    assert error_of(text) == "t.mlir:2:8: error: string literal is never closed"
    assert time.perf_counter() - start < 2.0


@pytest.mark.parametrize(
    ("grid", "imap", "message"),
    [
        (
            "[9223372036854775808, 1, 1]",
            "[-1, -1, -1]",
            "t.mlir:2:36: error: integer 9223372036854775808 does not fit in 64 bits",
        ),
        (
            "[1, 1, 1]",
            "[-1, -1, -99999999999999999999]",
            "t.mlir:4:39: error: integer -99999999999999999999 does not fit in 64 bits",
        ),
        (
            "[1, 1]",
            "[-1, -1, -1]",
            "t.mlir:2:3: error: 'kernel.customized' grid must be three positive "
            "sizes, got [1, 1]",
        ),
    ],
)
def test_bad_launch_numbers(grid: str, imap: str, message: str) -> None:
    """Out-of-range integers crashed attribute packing; a short grid crashed
    the inner verifiers, which read it before the customized op checked it."""
    assert error_of(CUSTOMIZED.replace("GRID", grid).replace("IMAP", imap)) == message


def test_not_utf8_is_located() -> None:
    assert error_of(b"func.func @f() {\n  \xc3(\n}") == (
        "t.mlir:2:3: error: input is not UTF-8 (byte 0xc3)"
    )


def test_empty_input_is_an_empty_module() -> None:
    module = parse(make_context(), "// nothing\n", "t.mlir")
    assert list(module.ops) == []


@pytest.mark.parametrize("op", ["block.add", "thread.add"])
def test_isolation_is_a_dialect_rule(op: str) -> None:
    """Values crossing a level boundary crashed the interpreter; xDSL's own
    ``verify`` rejects them too, not only the driver's. The cases are the
    chunks of ``errors/scopes.mlir`` whose op reads from outside its level."""
    from pathlib import Path

    from xdsl.parser import Parser
    from xdsl.utils.exceptions import VerifyException

    path = Path(__file__).parent / "filecheck" / "errors" / "scopes.mlir"
    wanted = f"'{op}' uses operand #1 from outside"
    (text,) = [c for c in path.read_text().split("// -----") if wanted in c]
    module = Parser(make_context(), text).parse_module()
    with pytest.raises(VerifyException, match="sees only its own arguments"):
        module.verify()
