"""The warp-collective ops of the emulator, with their PTX ISA semantics.

``ldmatrix`` takes one row address from each lane and hands out the 8x8
matrices in the fragment layout the PTX ISA gives (transposed or not);
``mma.m16n8k16`` rebuilds A, B and C from the lanes' registers by the same
layouts, multiplies, and scatters D back; ``shfl_xor`` (``shfl.sync.bfly``)
hands each lane the value of the lane whose id differs by the mask. A wrong index in the generated code
therefore shows up as a wrong number. Each op needs its whole warp active,
as on the GPU.
"""

from __future__ import annotations

import numpy as np

from mirage_xdsl.dialects import gpux
from mirage_xdsl.lowering.emulate_state import EmulationError, LaneEnv, as_lanes

WARP = 32


def whole_warps(mask: np.ndarray) -> None:
    """Raise unless every warp is active on all of its lanes or on none."""
    m = mask.reshape(-1, WARP)
    if np.any(m.any(1) & ~m.all(1)):
        raise EmulationError("a warp-collective op ran with part of the warp inactive")


def ldmatrix(e: LaneEnv, op: gpux.LdmatrixOp, mask) -> None:
    whole_warps(mask)
    ref = e[op.src]
    num = op.num.value.data
    rows = e.state.read(ref, e.linear(ref, op.indices), mask, 8, collective=True)
    rows = rows.reshape(-1, WARP, 8)  # (warp, lane-provided row, col)
    lane = np.arange(WARP)
    out = np.zeros((rows.shape[0], WARP, 2 * num), rows.dtype)
    for j in range(num):
        mat = rows[:, 8 * j : 8 * j + 8, :]  # (warp, row, col)
        for half in range(2):
            if op.trans.value.data:
                out[:, :, 2 * j + half] = mat[:, 2 * (lane % 4) + half, lane // 4]
            else:
                out[:, :, 2 * j + half] = mat[:, lane // 4, 2 * (lane % 4) + half]
    e.set(op, out.reshape(-1, 2 * num))


def mma(e: LaneEnv, op: gpux.MmaOp, mask) -> None:
    whole_warps(mask)
    a = np.asarray(e[op.a], np.float32).reshape(-1, WARP, 8)
    b = np.asarray(e[op.b], np.float32).reshape(-1, WARP, 4)
    c = np.asarray(as_lanes(e, e[op.c]), np.float32).reshape(-1, WARP, 4)
    w = a.shape[0]
    lane = np.arange(WARP)
    g, t = lane // 4, lane % 4
    A = np.zeros((w, 16, 16), np.float32)
    B = np.zeros((w, 16, 8), np.float32)
    C = np.zeros((w, 16, 8), np.float32)
    for e_ in range(2):
        A[:, g, 2 * t + e_] = a[:, :, e_]
        A[:, g + 8, 2 * t + e_] = a[:, :, 2 + e_]
        A[:, g, 2 * t + 8 + e_] = a[:, :, 4 + e_]
        A[:, g + 8, 2 * t + 8 + e_] = a[:, :, 6 + e_]
        B[:, 2 * t + e_, g] = b[:, :, e_]
        B[:, 2 * t + 8 + e_, g] = b[:, :, 2 + e_]
        C[:, g, 2 * t + e_] = c[:, :, e_]
        C[:, g + 8, 2 * t + e_] = c[:, :, 2 + e_]
    D = A @ B + C
    d = np.zeros((w, WARP, 4), np.float32)
    for e_ in range(2):
        d[:, :, e_] = D[:, g, 2 * t + e_]
        d[:, :, 2 + e_] = D[:, g + 8, 2 * t + e_]
    e.set(op, d.reshape(-1, 4))


def shfl_xor(e: LaneEnv, op: gpux.ShflXorOp, mask) -> None:
    whole_warps(mask)
    x = as_lanes(e, e[op.value]).reshape(-1, WARP)
    lane = np.arange(WARP) ^ op.mask.value.data
    e.set(op, x[:, lane].reshape(-1))
