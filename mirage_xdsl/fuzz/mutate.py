"""Corruptions of valid IR text, for fuzzing the parser and the verifiers.

Each mutator takes the bytes of a valid module and a numpy ``Generator`` and
returns corrupted bytes (not always UTF-8: the driver reads bytes too). Token-level mutators keep the text lexically close
to IR, so the corruption reaches deep into the parser and, when the result
still parses, into the verifiers (a changed number becomes a bad shape, map
or grid); byte-level mutators exercise the lexer and the error reporting on
arbitrary input. :data:`MUTATORS` names them all, so drivers can report
counts per kind.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

TOKEN = re.compile(
    r'"[^"\n]*"|%[\w$.-]+|@[\w$.-]+|\^[\w$.-]+|-?\d+|[A-Za-z_][\w$.]*|->|\S'
)
"""A rough MLIR tokenizer: strings, SSA names, symbols, block labels, numbers,
identifiers (``kernel.matmul``, ``tensor``), ``->`` and single characters."""

INTERESTING_NUMBERS = (0, 1, -1, 2, 3, 4, 5, 7, 8, 64, 1000, -2, 2**31, 2**63)
"""Replacement numbers: edge cases of sizes, dims, map entries and ranges."""

Mutator = Callable[[bytes, np.random.Generator], bytes]
TextMutator = Callable[[str, np.random.Generator], str]


def on_text(mutator: TextMutator) -> Mutator:
    """Lift a mutator of text to bytes; undecodable bytes pass through intact."""

    def run(data: bytes, rng: np.random.Generator) -> bytes:
        text = data.decode("utf-8", errors="surrogateescape")
        return mutator(text, rng).encode("utf-8", errors="surrogateescape")

    run.__doc__ = mutator.__doc__
    return run


def tokens(text: str) -> list[re.Match[str]]:
    return list(TOKEN.finditer(text))


def _pick(rng: np.random.Generator, n: int) -> int:
    return int(rng.integers(n))


def _replace(text: str, m: re.Match[str], new: str) -> str:
    return text[: m.start()] + new + text[m.end() :]


def delete_token(text: str, rng: np.random.Generator) -> str:
    toks = tokens(text)
    return _replace(text, toks[_pick(rng, len(toks))], "") if toks else text


def duplicate_token(text: str, rng: np.random.Generator) -> str:
    toks = tokens(text)
    if not toks:
        return text
    m = toks[_pick(rng, len(toks))]
    return _replace(text, m, f"{m.group()} {m.group()}")


def swap_tokens(text: str, rng: np.random.Generator) -> str:
    """Swap two tokens: neighbours half of the time, any two otherwise."""
    toks = tokens(text)
    if len(toks) < 2:
        return text
    i = _pick(rng, len(toks) - 1)
    j = i + 1 if rng.random() < 0.5 else _pick(rng, len(toks))
    a, b = sorted((toks[i], toks[j]), key=lambda m: m.start())
    if a.start() == b.start():
        return text
    return (
        text[: a.start()]
        + b.group()
        + text[a.end() : b.start()]
        + a.group()
        + text[b.end() :]
    )


def replace_token(text: str, rng: np.random.Generator) -> str:
    """Put another token of the text in one token's place."""
    toks = tokens(text)
    if not toks:
        return text
    return _replace(
        text, toks[_pick(rng, len(toks))], toks[_pick(rng, len(toks))].group()
    )


def change_number(text: str, rng: np.random.Generator) -> str:
    """Change one number (a size, a dim, a map entry, a range) or shape size."""
    sites = [
        m
        for m in re.finditer(r"-?\d+", text)
        if not text[: m.start()].endswith(("%", "^bb"))
    ]
    if not sites:
        return text
    m = sites[_pick(rng, len(sites))]
    if rng.random() < 0.5:
        new = INTERESTING_NUMBERS[_pick(rng, len(INTERESTING_NUMBERS))]
    else:
        new = int(m.group()) + int(rng.choice([-1, 1]))
    return _replace(text, m, str(new))


def flip_byte(data: bytes, rng: np.random.Generator) -> bytes:
    if not data:
        return data
    out = bytearray(data)
    out[_pick(rng, len(out))] ^= 1 << _pick(rng, 8)
    return bytes(out)


def insert_byte(data: bytes, rng: np.random.Generator) -> bytes:
    """Insert a printable character mostly, any byte sometimes."""
    i = _pick(rng, len(data) + 1)
    byte = int(rng.integers(32, 127)) if rng.random() < 0.8 else int(rng.integers(256))
    return data[:i] + bytes([byte]) + data[i:]


def delete_byte(data: bytes, rng: np.random.Generator) -> bytes:
    if not data:
        return data
    i = _pick(rng, len(data))
    return data[:i] + data[i + 1 :]


def truncate(data: bytes, rng: np.random.Generator) -> bytes:
    return data[: _pick(rng, len(data) + 1)]


MUTATORS: dict[str, Mutator] = {
    "delete-token": on_text(delete_token),
    "duplicate-token": on_text(duplicate_token),
    "swap-tokens": on_text(swap_tokens),
    "replace-token": on_text(replace_token),
    "change-number": on_text(change_number),
    "flip-byte": flip_byte,
    "insert-byte": insert_byte,
    "delete-byte": delete_byte,
    "truncate": truncate,
}


def mutate(data: bytes, rng: np.random.Generator, rounds: int = 1) -> tuple[bytes, str]:
    """Apply ``rounds`` random mutators; returns the bytes and their names."""
    names = []
    for _ in range(rounds):
        name = list(MUTATORS)[_pick(rng, len(MUTATORS))]
        data = MUTATORS[name](data, rng)
        names.append(name)
    return data, "+".join(names)
