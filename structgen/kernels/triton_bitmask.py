"""Triton kernel: mask logits with an int32 token bitmask in one launch for the whole batch.

Shapes: ``logits`` float (batch, vocab) on a CUDA device; ``bitmask`` int32
(rows, words) on the same device; optional ``indices`` int32 (rows,) naming the logits row
of each bitmask row. Token ``t`` is allowed when bit ``t % 32`` of word ``t // 32`` is set;
columns beyond ``32 * words`` are masked. One program handles ``BLOCK`` tokens of one row, so
the launch reads each logit once and writes only the masked ones (bandwidth-bound).
"""
from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

__all__ = ["apply_token_bitmask_triton"]


@triton.jit
def _mask_kernel(
    logits_ptr,
    bitmask_ptr,
    indices_ptr,
    vocab,
    words,
    logits_stride,
    bitmask_stride,
    HAS_INDICES: tl.constexpr,
    BLOCK: tl.constexpr,
):
    mask_row = tl.program_id(0)
    block = tl.program_id(1)
    if HAS_INDICES:
        row = tl.load(indices_ptr + mask_row)
    else:
        row = mask_row
    offs = block * BLOCK + tl.arange(0, BLOCK)
    in_vocab = offs < vocab
    word_idx = offs // 32
    packed = tl.load(bitmask_ptr + mask_row * bitmask_stride + word_idx, mask=in_vocab & (word_idx < words), other=0)
    allowed = ((packed >> (offs % 32)) & 1) != 0
    tl.store(logits_ptr + row * logits_stride + offs, float("-inf"), mask=in_vocab & ~allowed)


def apply_token_bitmask_triton(logits: Any, bitmask: Any, indices: Any = None, *, block: int = 4096) -> None:
    """Mask ``logits`` in place (see module docstring for shapes)."""
    rows = bitmask.shape[0]
    vocab = logits.shape[1]
    grid = (rows, triton.cdiv(vocab, block))
    _mask_kernel[grid](
        logits,
        bitmask,
        indices if indices is not None else bitmask,
        vocab,
        bitmask.shape[1],
        logits.stride(0),
        bitmask.stride(0),
        HAS_INDICES=indices is not None,
        BLOCK=block,
    )
