"""Convolutions as the matmuls and layout ops that compute them, written in
torch, for :mod:`mirage_xdsl.torch.decompositions` to trace in place of the
convolution: a 2-d one whose windows tile its input (a vision transformer's
patch embedding) and a 1-d one, dense or depthwise. Each raises
:class:`Kept` where its operands are outside what it covers, and the
convolution stays as it is.
"""

from __future__ import annotations

from typing import Any

import torch


class Kept(Exception):
    """The op's operands are outside what its decomposition covers: the op
    stays as it is."""


def _pair(v: Any) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else (int(v[0]), int(v[1]))


def patch_matmul(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> torch.Tensor:
    """``conv2d`` as a matmul, where its windows tile the input: each
    ``[C, kh, kw]`` patch is a row, times the kernel flattened to ``[O, C kh
    kw]``. Rows and columns past the last whole patch are not read, as the
    convolution does not read them. Raises :class:`Kept` otherwise."""
    out, channels, kh, kw = weight.shape
    if (
        x.dim() != 4
        or groups != 1
        or _pair(stride) != (kh, kw)
        or padding not in (0, "valid", (0, 0), [0, 0])
        or _pair(dilation) != (1, 1)
    ):
        raise Kept
    batch, _, height, width = x.shape
    h, w = height // kh, width // kw
    x = x[:, :, : h * kh, : w * kw]
    rows = x.reshape(batch, channels, h, kh, w, kw).permute(0, 2, 4, 1, 3, 5)
    rows = rows.reshape(batch, h * w, channels * kh * kw)
    y = rows @ weight.reshape(out, channels * kh * kw).t()
    if bias is not None:
        y = y + bias
    return y.reshape(batch, h, w, out).permute(0, 3, 1, 2)


def _single(v: Any) -> int:
    return int(v) if isinstance(v, int) else int(v[0])


def shifted_matmul(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> torch.Tensor:
    """``conv1d`` of a batch ``[B, C, T]`` as the padded input read at each
    of the kernel's ``K`` offsets (``[B, C, K, T_out]``, a slice per offset,
    one with a step where the stride is above 1), then a matmul by the
    kernel flattened to ``[O, C K]``; depthwise (``groups = C = O``), a
    product by each channel's taps summed over the offsets. Raises
    :class:`Kept` for other groups, an unbatched input and ``"same"``
    padding with a stride."""
    out, per_group, taps = weight.shape
    stride, dilation = _single(stride), _single(dilation)
    if x.dim() != 3:
        raise Kept
    batch, channels, length = x.shape
    if padding == "valid":
        left = right = 0
    elif padding == "same":
        if stride != 1:
            raise Kept
        left = dilation * (taps - 1) // 2
        right = dilation * (taps - 1) - left
    else:
        left = right = _single(padding)
    depthwise = groups == channels == out and per_group == 1
    if groups != 1 and not depthwise:
        raise Kept
    x = torch.nn.functional.pad(x, (left, right))
    span = length + left + right - dilation * (taps - 1)
    steps = (span - 1) // stride + 1
    shifted = [
        x[:, :, k * dilation : k * dilation + (steps - 1) * stride + 1 : stride]
        for k in range(taps)
    ]
    cols = torch.stack(shifted, dim=2)
    if depthwise:
        y = (cols * weight.reshape(channels, taps, 1)).sum(dim=2)
    else:
        y = weight.reshape(out, per_group * taps) @ cols.reshape(
            batch, channels * taps, steps
        )
    return y if bias is None else y + bias.reshape(out, 1)
