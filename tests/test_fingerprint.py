"""Numeric fingerprints of the search's tensors (``search/fingerprint.py``)."""

from __future__ import annotations

import numpy as np

from mirage_xdsl.search.fingerprint import CHUNK, DIGITS, fingerprint


def test_equal_values_have_equal_fingerprints_whatever_their_layout() -> None:
    """A value and a copy with another memory order, and one computed in
    another order within the rounding, fingerprint alike."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 5000))
    assert fingerprint(x) == fingerprint(np.asfortranarray(x))
    assert fingerprint(x) == fingerprint(x.T.copy().T)
    assert fingerprint(x) == fingerprint(x * (1 + 1e-12))


def test_values_that_differ_anywhere_differ() -> None:
    """One element changed beyond the rounding, in the first chunk, the last
    whole chunk or the tail, changes the fingerprint; so do the shape and the
    scale."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal(2 * CHUNK + 100)
    base = fingerprint(x)
    step = np.abs(x).max() * 10.0 ** (2 - DIGITS)
    for i in (0, CHUNK + 7, 2 * CHUNK + 99):
        y = x.copy()
        y[i] += step
        assert fingerprint(y) != base, i
    assert fingerprint(x.reshape(1, -1)) != base
    assert fingerprint(2 * x) != base


def test_zero_and_empty_values() -> None:
    assert fingerprint(np.zeros((4, 4))) == fingerprint(np.zeros((4, 4)))
    assert fingerprint(np.zeros((4, 4))) != fingerprint(np.zeros((2, 8)))
    assert fingerprint(np.zeros((0, 3))) != fingerprint(np.zeros((3, 0)))
