"""User-facing diagnostics: one line, ``file:line:col: error: message``.

xDSL reports parse errors with a source excerpt and verifier errors without a
location. The driver wants one line that names the place and the problem, so
this module records where each op was parsed and verifies op by op, innermost
first, attributing each failure to the op that raised it.

Parse errors are reworded where xDSL's wording is internal or vague: the
found token is named (``found '}'``, ``found end of input``), an input that
ends inside a region says which ``{`` was never closed, an unknown op name is
located at the name and gets a close match suggested. Input that is not
UTF-8, integers that do not fit 64 bits and an unterminated string literal
(which makes xDSL's lexer backtrack exponentially) are caught here too, so
:func:`parse` and :func:`verify` raise nothing but :class:`MirageError` on bad
input.
"""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import FileLineColLoc, IntAttr, ModuleOp, StringAttr
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.parser import Parser
from xdsl.parser.generic_parser import ParserState
from xdsl.traits import IsolatedFromAbove
from xdsl.utils.exceptions import DiagnosticException, ParseError, VerifyException
from xdsl.utils.lexer import Input, Location, Span
from xdsl.utils.mlir_lexer import MLIRLexer, MLIRTokenKind

from mirage_xdsl.dialects.block_structure import OpVerifyError, defined_inside


class MirageError(DiagnosticException):
    """An error in the user's input or options, reported as one line.

    A ``DiagnosticException``, so xDSL's ``--verify-diagnostics`` prints it
    and carries on, as for xDSL's own verifier errors.
    """


class LinearLexer(MLIRLexer):
    """xDSL's lexer with a string-literal pattern that cannot backtrack.

    The stock pattern nests quantifiers (``(?:[^"]+|...)*"``), so an
    unterminated string makes the regex engine try exponentially many splits
    of the rest of the line: a stray ``"`` hangs the parser. Matching one
    character per repetition accepts the same strings in linear time.
    """

    _unescaped_characters_regex = re.compile(
        r'"(?:[^"\\\n\v\f]|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*"'
    )


class LocatingParser(Parser):
    """A parser that attaches the source position of every op to the op.

    It also lexes with :class:`LinearLexer` and rejects integer literals that
    do not fit 64 bits (every integer in a µGraph, from a tensor dim to a grid
    size, is an i64; xDSL would otherwise fail deep inside attribute packing).
    """

    def __init__(self, ctx: Context, input: str, name: str = "<unknown>"):
        super().__init__(ctx, "", name)
        self._parser_state = ParserState(LinearLexer(Input(input, name)))

    def parse_operation(self) -> Operation:
        location = self._current_token.span.get_location()
        op = super().parse_operation()
        if not isinstance(op.location, FileLineColLoc):
            op.location = FileLineColLoc(
                StringAttr(location.file), IntAttr(location.line), IntAttr(location.col)
            )
        return op

    def _parse_block(self) -> Block:
        # MLIR allows ``^5``; xDSL's name hints do not, and it fails with a
        # ValueError deep inside. Reject the label here, in words.
        token = self._current_token
        if token.kind == MLIRTokenKind.CARET_IDENT:
            name = token.text[1:]
            if not Block.is_default_block_name(name) and not Block.is_valid_name(name):
                self.raise_error(
                    f"block label '{token.text}' must start with a letter or '_'",
                    token.span,
                )
        return super()._parse_block()

    def parse_optional_integer(
        self, allow_boolean: bool = True, allow_negative: bool = True
    ) -> int | None:
        start = self._current_token.span.start
        value = super().parse_optional_integer(allow_boolean, allow_negative)
        if value is not None and not -(2**63) <= value < 2**63:
            end = self._current_token.span.start
            span = Span(start, end, self._current_token.span.input)
            raise ParseError(span, f"integer {value} does not fit in 64 bits")
        return value


def where(op: Operation) -> str:
    """``file:line:col`` of an op, or its name when it was not parsed from text."""
    loc = op.location
    if isinstance(loc, FileLineColLoc):
        return f"{loc.filename.data}:{loc.line.data}:{loc.column.data}"
    return f"'{op.name}'"


def first_line(message: str) -> str:
    return next((line for line in str(message).splitlines() if line.strip()), "")


def error_line(e: BaseException) -> str:
    """The first line of ``e``'s message, or its kind where it has none: what
    a one-line report of a failure quotes."""
    return first_line(str(e).strip()) or type(e).__name__


def show(text: str, limit: int = 24) -> str:
    """Quote source text for a message: escaped, shortened, on one line."""
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return f"'{text[:limit]}...'" if len(text) > limit else f"'{text}'"


# --- parse errors --------------------------------------------------------------


@dataclass
class ParseFailure:
    """What a rewording rule knows about a parse error."""

    ctx: Context | None
    span: Span
    match: re.Match[str]

    @property
    def at_end(self) -> bool:
        return self.span.start >= self.span.input.len

    @property
    def found(self) -> str:
        if self.at_end:
            return "end of input"
        text = self.span.text or self.span.input.content[self.span.start]
        return show(text)

    def unclosed(self) -> str | None:
        """The innermost bracket the input leaves open, as a phrase."""
        return unclosed_bracket(self.span.input)


OPENERS = {MLIRTokenKind.L_BRACE, MLIRTokenKind.L_PAREN, MLIRTokenKind.L_SQUARE}
CLOSERS = {MLIRTokenKind.R_BRACE, MLIRTokenKind.R_PAREN, MLIRTokenKind.R_SQUARE}


def unclosed_bracket(source: Input) -> str | None:
    stack: list[Span] = []
    lexer = LinearLexer(source)
    try:
        while (token := lexer.lex()).kind != MLIRTokenKind.EOF:
            if token.kind in OPENERS:
                stack.append(token.span)
            elif token.kind in CLOSERS and stack:
                stack.pop()
    except ParseError:
        return None
    if not stack:
        return None
    loc = stack[-1].get_location()
    return f"'{stack[-1].text}' at {loc.line}:{loc.col} is never closed"


def _expectation(f: ParseFailure, what: str) -> str:
    if f.at_end and (open_bracket := f.unclosed()):
        return f"unexpected end of input: {open_bracket}"
    return f"expected {what}, found {f.found}"


def _unknown_op(f: ParseFailure) -> tuple[Span, str]:
    name = f.match.group(1)
    content = f.span.input.content
    start = content.rfind(name, 0, f.span.start + 1)
    span = Span(start, start + len(name), f.span.input) if start >= 0 else f.span
    loaded = {op.name for op in f.ctx.loaded_ops} if f.ctx else set()
    known = loaded | mirage_op_names()
    close = difflib.get_close_matches(name, sorted(known), n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    return span, f"unknown operation '{name}'{hint}"


@functools.cache
def mirage_op_names() -> frozenset[str]:
    """Op names of our dialects, suggested even before a dialect is loaded."""
    from mirage_xdsl.ir.context import DIALECTS

    return frozenset(op.name for load in DIALECTS.values() for op in load().operations)


Rule = Callable[[ParseFailure], "str | tuple[Span, str]"]

PARSE_REWORDING: list[tuple[re.Pattern[str], Rule]] = [
    (
        re.compile(r"^\s*in block definition$"),
        lambda f: _expectation(f, "an operation, a block label or '}'"),
    ),
    (
        re.compile(r"^Could not parse entire input!$"),
        lambda f: _expectation(f, "an operation"),
    ),
    (re.compile(r"^Expected region!$"), lambda f: _expectation(f, "a region '{'")),
    (
        re.compile(r"^Unexpected character"),
        lambda f: f"unexpected character {f.found}",
    ),
    (
        re.compile(r"^Expected suffix identifier after"),
        lambda f: f"expected a name after {show(f.span.input.content[f.span.start])}",
    ),
    (re.compile(r"^Operation (\S+) is not registered$"), _unknown_op),
    (
        re.compile(r"^End of file reached before closing string literal"),
        lambda f: "string literal is never closed",
    ),
    (
        re.compile(r"^(.*?),? got \S+$"),
        lambda f: _expectation(f, _lower(f.match.group(1)).removeprefix("expected ")),
    ),
    (
        re.compile(r"^(?i:expect(?:ed)?) ((?:(?!\bbut\b).)*?)[.!]?$"),
        lambda f: _expectation(f, f.match.group(1)),
    ),
    (
        re.compile(r"^(.*) expected$"),
        lambda f: _expectation(f, f.match.group(1)),
    ),
]
"""xDSL parse messages -> ours, first match wins; the rest are kept as they are."""


def _lower(message: str) -> str:
    """MLIR style: messages start in lower case (acronyms excepted)."""
    if len(message) > 1 and message[0].isupper() and message[1].islower():
        return message[0].lower() + message[1:]
    return message


def parse_error_line(error: ParseError, ctx: Context | None = None) -> str:
    """The one-line diagnostic for a parse error (``ctx``: ops to suggest)."""
    message = first_line(error.msg).strip()
    span = error.span
    for pattern, rule in PARSE_REWORDING:
        if match := pattern.search(message):
            result = rule(ParseFailure(ctx, span, match))
            span, message = result if isinstance(result, tuple) else (span, result)
            break
    else:
        message = _lower(message).rstrip("!.")
    return f"{span.get_location()}: error: {message}"


def decode(data: str | bytes, name: str) -> str:
    """Source text of an input, or a located error at its first non-UTF-8 byte."""
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        before = data[: e.start].decode("utf-8")
        line = before.count("\n") + 1
        col = len(before) - (before.rfind("\n") + 1) + 1
        where = Location(name, line, col)
        raise MirageError(
            f"{where}: error: input is not UTF-8 (byte 0x{data[e.start]:02x})"
        ) from None


def parse(ctx: Context, text: str | bytes, name: str) -> ModuleOp:
    """Parse a module, raising :class:`MirageError` with a located message.

    An input with no operations (empty, or only comments) is an empty module,
    as for ``mlir-opt``.
    """
    source = decode(text, name)
    parser: LocatingParser | None = None
    try:
        parser = LocatingParser(ctx, source, name)
        if parser._current_token.kind == MLIRTokenKind.EOF:
            return ModuleOp([])
        return parser.parse_module()
    except ParseError as e:
        undefined = parser and e.msg.startswith("values used but not defined")
        line = (undefined and undefined_use(parser)) or parse_error_line(e, ctx)
        raise MirageError(line) from None


def undefined_use(parser: Parser) -> str | None:
    """The diagnostic for a name used but never defined, at the op using it.

    xDSL reports these at the end of the input; the parser still knows the
    placeholder values, and their users carry locations.
    """
    for name, values in parser.forward_ssa_references.items():
        for value in values.values():
            for use in value.uses:
                return (
                    f"{where(use.operation)}: error: '{use.operation.name}' uses "
                    f"undefined value '%{name}'"
                )
    return None


def _post_order(op: Operation) -> Iterator[Operation]:
    for region in op.regions:
        for block in region.blocks:
            for inner in block.ops:
                yield from _post_order(inner)
    yield op


def _cause(op: Operation, error: Exception) -> str:
    """The verifier's sentence, naming the op if xDSL's wording does not."""
    text = str(error)
    marker = "Operation does not verify: "
    cause = first_line(text)
    for line in text.splitlines():
        if marker in line:
            cause = line.split(marker, 1)[1].strip()
            break
    cause = " ".join(cause.split())
    if f"'{op.name}'" not in cause:
        cause = f"'{op.name}': {_lower(cause)}"
    return cause


def _culprit(op: Operation, error: BaseException) -> Operation:
    """The op an error is about: an :class:`OpVerifyError`'s, else ``op``."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, OpVerifyError):
            return seen.op
        seen = seen.__cause__ or seen.__context__
    return op


NOT_TERMINATED = re.compile(
    r"operation (\S+) terminates block in single-block region but is not a "
    r"terminator",
    re.IGNORECASE,
)


def _reword(op: Operation, cause: str) -> tuple[Operation, str]:
    """Reword xDSL's structural findings to name the op that owns the fault."""
    if NOT_TERMINATED.search(cause) and (parent := op.parent_op()) is not None:
        return parent, (
            f"'{parent.name}' region must end in a terminator, but its last op "
            f"is '{op.name}'"
        )
    return op, cause


def check_scopes(op: Operation, visible: frozenset[SSAValue] = frozenset()) -> None:
    """Every operand is defined before its use and inside any isolated parent.

    xDSL's parser resolves names across a whole block (``%1 = kernel.mul %1,
    %1`` parses) and xDSL's verifier checks no dominance, so this walk does,
    in program order. Multi-block regions (none in our dialects) are checked
    only for isolation.
    """
    outer = frozenset() if op.has_trait(IsolatedFromAbove) else visible
    for region in op.regions:
        shared = _region_values(region) if len(region.blocks) > 1 else set()
        for block in region.blocks:
            seen = set(outer) | set(block.args) | shared
            for inner in block.ops:
                for index, value in enumerate(inner.operands):
                    if value not in seen:
                        raise MirageError(
                            f"{where(inner)}: error: {_scope_error(inner, index)}"
                        )
                check_scopes(inner, frozenset(seen))
                seen.update(inner.results)


def _region_values(region: Region) -> set[SSAValue]:
    return {
        value
        for block in region.blocks
        for value in (*block.args, *(r for op in block.ops for r in op.results))
    }


def _scope_error(op: Operation, index: int) -> str:
    isolated = op.parent_op()
    while isolated is not None and not isolated.has_trait(IsolatedFromAbove):
        isolated = isolated.parent_op()
    if isolated is not None and not defined_inside(op.operands[index], isolated):
        return (
            f"'{op.name}' uses operand #{index} from outside its "
            f"'{isolated.name}', which sees only its own arguments"
        )
    return f"'{op.name}' uses operand #{index} before it is defined"


def verify(module: ModuleOp) -> None:
    """Verify every op, raising :class:`MirageError` located at the first bad one."""
    check_scopes(module)
    for op in _post_order(module):
        try:
            op.verify(verify_nested_ops=False)
        except (VerifyException, DiagnosticException) as e:
            culprit = _culprit(op, e)
            culprit, cause = _reword(culprit, _cause(culprit, e))
            raise MirageError(f"{where(culprit)}: error: {cause}") from None
