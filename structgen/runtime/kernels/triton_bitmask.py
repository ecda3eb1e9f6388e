"""Triton kernel: mask logits with an int32 token bitmask in one launch for the whole batch.

Shapes: ``logits`` float (batch, vocab) on a CUDA device; ``bitmask`` int32
(rows, words) on the same device; optional ``indices`` int32 (rows,) naming the logits row
of each bitmask row. Token ``t`` is allowed when bit ``t % 32`` of word ``t // 32`` is set;
columns beyond ``32 * words`` are masked.

One program handles ``WORDS`` words (``32 * WORDS`` tokens) of one row as a 2-D tile
``(WORDS, 32)``: the words are one coalesced load and each is broadcast over its 32 bits in
registers, instead of every token re-loading its word. Two ways to write, chosen by
``FULL_STORE`` (bench/gpu_apply.py measures both):

- masked store: write ``-inf`` only where a token is forbidden; the logits are never read;
- full store: read the tile, write ``where(allowed, logit, -inf)`` back whole. It moves more
  bytes on paper, but every 32-byte sector is written whole, which DRAM prefers to sectors
  that are partly written by a scattered mask.

Launching through ``JITFunction.__getitem__`` costs tens of microseconds of Python per call
(argument binding, specialisation key); at batch 1 that is most of the cost. After the first
launch for a given specialisation we call the compiled kernel's launcher directly, keyed by
everything Triton specialises on for these arguments (dtypes, 16-byte alignment, values
equal to 1 or divisible by 16).
"""
from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

from ...errors import MatcherError

__all__ = ["apply_token_bitmask_triton"]

DEFAULT_WORDS = 128  # 4096 tokens a program
DEFAULT_FULL_STORE = True  # measured on an H200: at the bandwidth bound, masked stores 1.4-3x slower at batch 256


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
    WORDS: tl.constexpr,
    FULL_STORE: tl.constexpr,
):
    mask_row = tl.program_id(0)
    block = tl.program_id(1)
    if HAS_INDICES:
        row = tl.load(indices_ptr + mask_row).to(tl.int64)
    else:
        row = mask_row.to(tl.int64)
    word_offs = block * WORDS + tl.arange(0, WORDS)
    packed = tl.load(bitmask_ptr + mask_row.to(tl.int64) * bitmask_stride + word_offs, mask=word_offs < words, other=0)
    bit = tl.arange(0, 32)
    allowed = ((packed[:, None] >> bit[None, :]) & 1) != 0
    offs = word_offs[:, None] * 32 + bit[None, :]
    in_vocab = offs < vocab
    ptrs = logits_ptr + row * logits_stride + offs
    if FULL_STORE:
        vals = tl.load(ptrs, mask=in_vocab, other=0.0)
        tl.store(ptrs, tl.where(allowed, vals, float("-inf")), mask=in_vocab)
    else:
        tl.store(ptrs, float("-inf"), mask=in_vocab & ~allowed)


_LAUNCHERS: dict[tuple, Any] = {}


def _spec(x: Any) -> tuple:
    # what Triton specialises an argument on: pointers by dtype and 16-byte alignment,
    # integers by being 1 or a multiple of 16
    if hasattr(x, "data_ptr"):
        return (x.dtype, x.data_ptr() % 16 == 0)
    return (x == 1, x % 16 == 0)


def apply_token_bitmask_triton(logits: Any, bitmask: Any, indices: Any = None, *, words_per_program: int = DEFAULT_WORDS,
                               full_store: bool = DEFAULT_FULL_STORE) -> None:
    """Mask ``logits`` in place (see module docstring for shapes).

    Raises:
        MatcherError: ``bitmask`` is not a 2-D int32 tensor on the logits' device.
    """
    if str(bitmask.dtype) != "torch.int32" or bitmask.dim() != 2 or bitmask.device != logits.device:
        raise MatcherError(f"bitmask must be a 2-D torch.int32 tensor on {logits.device}, found "
                           f"{bitmask.dtype} of shape {tuple(bitmask.shape)} on {bitmask.device}")
    rows, words = bitmask.shape
    vocab = logits.shape[1]
    grid = (rows, triton.cdiv(vocab, 32 * words_per_program), 1)
    has_indices = indices is not None
    args = (logits, bitmask, indices if has_indices else bitmask, vocab, words, logits.stride(0), bitmask.stride(0),
            has_indices, words_per_program, full_store)
    key = (logits.device.index, *map(_spec, args[:7]), has_indices, words_per_program, full_store)
    kernel = _LAUNCHERS.get(key)
    if kernel is not None and kernel is not True:
        import torch

        # what JITFunction.run does once the kernel is compiled, minus the binding work;
        # the launch hooks (profilers) are passed on as it passes them
        runtime = triton.knobs.runtime
        stream = torch.cuda.current_stream(logits.device).cuda_stream
        try:
            kernel.run(grid[0], grid[1], grid[2], stream, kernel.function, kernel.packed_metadata,
                       kernel.launch_metadata(grid, stream, *args), runtime.launch_enter_hook, runtime.launch_exit_hook,
                       *args)
            return
        except TypeError:  # a launcher with another signature refuses the call before launching anything
            _LAUNCHERS.clear()
            _LAUNCHERS["disabled"] = True
    compiled = _mask_kernel[grid](*args[:7], HAS_INDICES=has_indices, WORDS=words_per_program, FULL_STORE=full_store)
    if _DIRECT_LAUNCH and "disabled" not in _LAUNCHERS and hasattr(compiled, "run") and hasattr(compiled, "packed_metadata"):
        _LAUNCHERS[key] = compiled


# the direct launch relies on the launcher signature of Triton 3.4 and later (triton.knobs);
# older releases take the ordinary path on every call
_DIRECT_LAUNCH = hasattr(getattr(getattr(triton, "knobs", None), "runtime", None), "launch_enter_hook")
