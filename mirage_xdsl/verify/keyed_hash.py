"""Keyed 53-bit hashes of residues, and keyed digests of whole rows.

splitmix64's finaliser on int64 words, written with operators numpy and torch
share, so the same functions hash numpy arrays and torch tensors: a residue
pair (:func:`keyed_hash`), a 64-bit word (:func:`keyed_word`), and every row
along an axis in order (:func:`row_digest`), which the finite-field domain
(``finite_field.py``) uses to compare values without comparing every residue.
"""

from __future__ import annotations

from typing import Any

_M1 = 0xBF58476D1CE4E5B9 - (1 << 64)
_M2 = 0x94D049BB133111EB - (1 << 64)


def _shr(z: Any, s: int) -> Any:
    """Logical right shift of 64-bit words held as int64 (numpy or torch)."""
    return (z >> s) & ((1 << (64 - s)) - 1)


def _mix(z: Any) -> Any:
    """splitmix64's finaliser on int64 words (products wrap, as in uint64)."""
    z = z ^ _shr(z, 30)
    z = z * _M1
    z = z ^ _shr(z, 27)
    z = z * _M2
    return z ^ _shr(z, 31)


def keyed_hash(p_part: Any, q_part: Any, key: int) -> Any:
    """A keyed 53-bit hash of the pair (x_p, x_q), as non-negative int64.

    The pair is packed injectively (``x_p * 2^25 + x_q``, < 2^51), then mixed
    in two rounds.
    """
    packed = (p_part << 25) | q_part
    return _shr(_mix(_mix(packed ^ key) + key), 11)


def keyed_word(word: Any, key: int) -> Any:
    """A keyed 53-bit hash of a 64-bit word (int64), as non-negative int64."""
    return _shr(_mix(_mix(word ^ key) + key), 11)


ROW_DIGEST_COLLISION = 2.0**-53
"""Probability (random-oracle model) that two different rows get one digest."""
_POSITION = 0x9E3779B97F4A7C15 - (1 << 64)
"""The golden-ratio increment of splitmix64, as an int64: spreads positions."""


def row_digest(p_part: Any, q_part: Any, axis: int, key: int, arith: Any) -> Any:
    """A keyed 53-bit digest of every row along ``axis`` (negative), as int64.

    Each element's pair ``(x_p, x_q)`` is hashed with :func:`keyed_hash`, mixed
    with its position in the row, and the row's words are added (wrapping, as
    uint64): a function of the whole row in order, so two rows with different
    residues anywhere get independent digests (a collision has probability
    about ``2^-53`` under the random-oracle model). The row axis is kept with
    size 1.
    """
    positions = arith.positions(tuple(p_part.shape), axis)
    words = _mix(keyed_hash(p_part, q_part, key) ^ (positions * _POSITION))
    return _shr(_mix(arith.index_sum(words, axis) ^ key), 11)
