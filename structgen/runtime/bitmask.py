"""Token bitmasks: allocate, fill targets, apply to logits.

The contract the ecosystem shares (XGrammar, llguidance): int32, shape
``(batch, ceil(vocab_size / 32))``, bit ``i % 32`` of word ``i // 32`` set when token ``i``
is allowed. This module imports torch lazily, so ``import structgen`` stays light.
"""
from __future__ import annotations

import functools
import importlib.util
from typing import Any

import numpy as np

from .. import _core
from ..errors import MatcherError

__all__ = ["allocate_token_bitmask", "apply_token_bitmask_inplace", "bitmask_words", "unpack_bitmask"]


def bitmask_words(vocab_size: int) -> int:
    """Number of int32 words needed for ``vocab_size`` tokens."""
    return (vocab_size + 31) // 32


def allocate_token_bitmask(batch_size: int, vocab_size: int, *, backend: str = "torch") -> Any:
    """A bitmask with every token allowed: a CPU torch int32 tensor (or numpy with ``backend="numpy"``).

    Shape ``(batch_size, ceil(vocab_size / 32))``. Pin it (``.pin_memory()``) to copy it to
    a GPU asynchronously.
    """
    shape = (batch_size, bitmask_words(vocab_size))
    if backend == "numpy":
        return np.full(shape, -1, dtype=np.int32)
    import torch

    bitmask = torch.full(shape, -1, dtype=torch.int32)
    # Its numpy view made now and its rows remembered natively (see
    # GrammarMatcher.fill_next_token_bitmask): the fills find them from the first one on, and
    # the view's cost (5-10 us, about 0.1 ms the first time in a process) is paid here, once.
    _core.remember_tensor(bitmask, bitmask.numpy())
    return bitmask


def as_numpy_row(bitmask: Any, index: int) -> np.ndarray:
    """A writable numpy view of row ``index`` of a CPU bitmask (numpy array or torch tensor)."""
    if isinstance(bitmask, np.ndarray):
        arr = bitmask
    else:
        if getattr(bitmask, "device", None) is not None and bitmask.device.type != "cpu":
            raise MatcherError(
                f"fill the bitmask on the CPU and copy it to {bitmask.device} afterwards "
                f"(apply_token_bitmask_inplace accepts a CPU bitmask and moves it)"
            )
        arr = bitmask.numpy()
    if arr.dtype != np.int32 or arr.ndim not in (1, 2):
        raise MatcherError(f"bitmask must be int32 of shape (batch, words) or (words,), "
                           f"found {arr.dtype} of shape {arr.shape}")
    if not arr.flags.writeable:
        raise MatcherError("bitmask is read-only")
    if arr.ndim == 1:
        if index != 0:
            raise MatcherError(f"index {index} given for a 1-D bitmask")
        return arr
    if not 0 <= index < arr.shape[0]:
        raise MatcherError(f"index {index} is outside the bitmask's batch of {arr.shape[0]}")
    return arr[index]


def unpack_bitmask(bitmask: Any, vocab_size: int) -> Any:
    """Boolean ``(batch, vocab_size)`` allowed-token matrix from a torch bitmask (any device)."""
    import torch

    shifts = torch.arange(32, device=bitmask.device, dtype=torch.int32)
    bits = (bitmask.unsqueeze(-1) >> shifts) & 1
    return bits.reshape(bitmask.shape[0], -1)[:, :vocab_size].bool()


@functools.cache
def _triton_available() -> bool:
    # cached: find_spec costs microseconds, and at batch 1 the whole kernel costs a few
    return importlib.util.find_spec("triton") is not None


# dtype -> bit pattern of -inf in that float format: the native apply writes it through an
# integer of the same width, so bfloat16 (which numpy lacks) is served like the others
_NEG_INF: dict = {}
_torch: Any = None


def _load_torch() -> Any:
    global _torch
    import torch

    _NEG_INF.update({torch.float32: 0xFF800000, torch.float64: 0xFFF0000000000000,
                     torch.float16: 0xFC00, torch.bfloat16: 0xFF80})
    _torch = torch
    return torch


def _apply_cpu(logits: Any, bitmask: Any, indices: Any, neg: int) -> None:
    # checked by the caller: CPU tensors, bitmask int32 2-D with contiguous words, logits 2-D of
    # a dtype in _NEG_INF. Addresses and strides go to the native core as integers (converting
    # the tensors to numpy costs more than the apply itself at batch 1).
    rows, vocab = logits.shape
    brows, words = bitmask.shape
    ls0, ls1 = logits.stride()
    item = logits.element_size()
    _core.apply_bitmask(logits.data_ptr(), rows, vocab, ls0 * item, ls1 * item, item,
                        bitmask.data_ptr(), brows, words, bitmask.stride(0) * 4, indices, neg)


def _check_apply_args(torch: Any, logits: Any, bitmask: Any, indices: Any) -> None:
    for name, t in (("logits", logits), ("bitmask", bitmask)):
        if not isinstance(t, torch.Tensor):
            raise MatcherError(f"{name} must be a torch.Tensor, found {type(t).__name__}"
                               + (" (convert with torch.from_numpy)" if isinstance(t, np.ndarray) else ""))
    if bitmask.dtype != torch.int32:
        raise MatcherError(f"bitmask must have dtype torch.int32, found {bitmask.dtype}")
    if bitmask.dim() not in (1, 2):
        raise MatcherError(f"bitmask must be 2-D (batch, words) or 1-D (words,), found shape {tuple(bitmask.shape)}")
    if not logits.is_floating_point():
        raise MatcherError(f"logits must be a floating-point tensor, found {logits.dtype}")
    if bitmask.shape[-1] == 0:
        raise MatcherError(f"bitmask has no words (shape {tuple(bitmask.shape)})")
    if indices is not None:
        n = logits.shape[0] if logits.dim() else 0
        if isinstance(indices, torch.Tensor):  # values not read: that would sync a GPU
            if indices.is_floating_point() or indices.dtype == torch.bool:
                raise MatcherError(f"indices must be an integer tensor, found {indices.dtype}")
        else:
            bad = [i for i in indices if isinstance(i, bool) or not isinstance(i, (int, np.integer)) or not 0 <= i < n]
            if bad:
                raise MatcherError(f"indices must be row numbers 0..{n - 1} of logits, found {bad[:5]!r}")


def apply_token_bitmask_inplace(logits: Any, bitmask: Any, *, indices: Any = None) -> None:
    """Set disallowed logits to ``-inf`` in place, for the whole batch in one pass.

    Args:
        logits: float tensor ``(batch, vocab)`` on any device. Columns beyond the bitmask's
            ``32 * words`` are masked (padded vocabulary rows the tokenizer never produces).
        bitmask: int32 ``(batch, words)`` (or ``(len(indices), words)``), on any device; it is
            moved to the logits' device (non-blocking when pinned). On CUDA with Triton
            installed a single Triton kernel applies it; on the CPU the native core does
            (one pass, the GIL released; float16/32/64 and bfloat16); elsewhere torch ops do.
        indices: optional rows of ``logits`` the bitmask rows apply to.

    Raises:
        MatcherError: a tensor of the wrong kind, dtype, dimension or shape; the message
            names the expected and the found values. (An int64 bitmask would otherwise be
            read as pairs of words, allowing tokens the grammar forbids.)
    """
    torch = _torch or _load_torch()
    if (indices is None and type(logits) is torch.Tensor and type(bitmask) is torch.Tensor and logits.is_cpu
            and bitmask.is_cpu and bitmask.dtype is torch.int32 and not logits.requires_grad
            and logits.dim() == 2 and bitmask.dim() == 2):
        # the decoding loop's call, checked in a few attribute reads
        neg = _NEG_INF.get(logits.dtype)
        if neg is not None and bitmask.shape[0] == logits.shape[0] and bitmask.shape[1] and bitmask.stride(1) == 1:
            _apply_cpu(logits, bitmask, None, neg)
            return
    _check_apply_args(torch, logits, bitmask, indices)
    if logits.dim() != 2:
        raise MatcherError(f"logits must be 2-D (batch, vocab), got shape {tuple(logits.shape)}")
    if bitmask.dim() == 1:
        bitmask = bitmask.unsqueeze(0)
    rows = logits.shape[0] if indices is None else len(indices)
    if bitmask.shape[0] != rows:
        raise MatcherError(f"bitmask has {bitmask.shape[0]} rows for {rows} logits rows")
    vocab = logits.shape[1]
    if bitmask.device != logits.device:
        bitmask = bitmask.to(logits.device, non_blocking=True)
    if logits.device.type == "cuda" and _triton_available() and logits.stride(1) == 1:
        from .kernels.triton_bitmask import apply_token_bitmask_triton

        idx = None if indices is None else torch.as_tensor(indices, device=logits.device, dtype=torch.int32)
        apply_token_bitmask_triton(logits, bitmask if bitmask.is_contiguous() else bitmask.contiguous(), idx)
        return
    covered = min(vocab, bitmask.shape[1] * 32)
    neg = _NEG_INF.get(logits.dtype)
    if logits.device.type == "cpu" and neg is not None and not logits.requires_grad:
        idx = None if indices is None else np.asarray(
            indices.cpu().numpy() if isinstance(indices, torch.Tensor) else indices, dtype=np.int64)
        _apply_cpu(logits, bitmask if bitmask.stride(1) == 1 else bitmask.contiguous(), idx, neg)
        return
    allowed = unpack_bitmask(bitmask, covered)
    target = logits if indices is None else logits[indices]
    neg_inf = torch.tensor(float("-inf"), dtype=logits.dtype, device=logits.device)
    masked = torch.where(allowed, target[:, :covered], neg_inf)
    if indices is None:
        logits[:, :covered] = masked
        if covered < vocab:
            logits[:, covered:] = float("-inf")
    else:
        idx = torch.as_tensor(indices, device=logits.device)
        logits[idx, :covered] = masked
        if covered < vocab:
            logits[idx, covered:] = float("-inf")
