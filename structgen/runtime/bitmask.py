"""Token bitmasks: allocate, fill targets, apply to logits.

The contract the ecosystem shares (XGrammar, llguidance): int32, shape
``(batch, ceil(vocab_size / 32))``, bit ``i % 32`` of word ``i // 32`` set when token ``i``
is allowed. This module imports torch lazily, so ``import structgen`` stays light.
"""
from __future__ import annotations

import functools
import importlib.util
import sys
from typing import Any

import numpy as np

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

    return torch.full(shape, -1, dtype=torch.int32)


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


_NUMPY_FLOATS: set = set()


def _apply_numpy(logits: np.ndarray, bitmask: np.ndarray, covered: int, indices: Any) -> None:
    # numpy's unpackbits reads the little-endian words bit by bit in one C pass and copyto
    # writes -inf single-threaded: torch's shift-unpack plus masked_fill cost milliseconds a
    # step here (and torch's thread pool stalls when other processes hold the cores)
    blocked = np.unpackbits(np.invert(bitmask).view(np.uint8), axis=1, count=covered, bitorder="little").view(np.bool_)
    rows = range(logits.shape[0]) if indices is None else [int(i) for i in indices]
    for k, r in enumerate(rows):
        np.copyto(logits[r, :covered], -np.inf, where=blocked[k])
        logits[r, covered:] = -np.inf


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
            installed a single Triton kernel applies it; elsewhere torch ops do.
        indices: optional rows of ``logits`` the bitmask rows apply to.

    Raises:
        MatcherError: a tensor of the wrong kind, dtype, dimension or shape; the message
            names the expected and the found values. (An int64 bitmask would otherwise be
            read as pairs of words, allowing tokens the grammar forbids.)
    """
    import torch

    _check_apply_args(torch, logits, bitmask, indices)
    if not _NUMPY_FLOATS:
        _NUMPY_FLOATS.update((torch.float32, torch.float64, torch.float16))
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
    if logits.device.type == "cpu" and sys.byteorder == "little" and logits.dtype in _NUMPY_FLOATS:
        _apply_numpy(logits.numpy(), bitmask.numpy(), covered, indices)
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
