"""Applying bitmasks to logits: torch path on CPU, the Triton kernel in interpreter mode."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from structgen import MatcherError, allocate_token_bitmask, apply_token_bitmask_inplace  # noqa: E402


def reference(logits, allowed_rows, indices=None):
    out = logits.clone()
    rows = range(logits.shape[0]) if indices is None else indices
    for k, r in enumerate(rows):
        allowed = allowed_rows[k]
        col = np.zeros(logits.shape[1], bool)
        col[: min(len(allowed), logits.shape[1])] = allowed[: logits.shape[1]]
        out[r, ~torch.from_numpy(col)] = float("-inf")
    return out


def random_case(rng, batch, vocab, mask_vocab):
    allowed = rng.random((batch, mask_vocab)) < 0.3
    words = (mask_vocab + 31) // 32
    padded = np.zeros((batch, words * 32), bool)
    padded[:, :mask_vocab] = allowed
    bm = np.packbits(padded, axis=1, bitorder="little").view("<i4").copy()
    logits = torch.from_numpy(rng.standard_normal((batch, vocab)).astype(np.float32))
    return logits, torch.from_numpy(bm), padded


@pytest.mark.parametrize("batch,vocab,mask_vocab", [(1, 100, 100), (3, 49152, 49152), (2, 1000, 961), (4, 257, 300)])
def test_torch_path_matches_reference(batch, vocab, mask_vocab):
    rng = np.random.default_rng(0)
    logits, bm, allowed = random_case(rng, batch, vocab, mask_vocab)
    expected = reference(logits, allowed)
    apply_token_bitmask_inplace(logits, bm)
    assert torch.equal(torch.isinf(logits), torch.isinf(expected))
    assert torch.equal(logits[~torch.isinf(logits)], expected[~torch.isinf(expected)])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("layout", ["contiguous", "strided", "transposed"])
def test_cpu_apply_every_float_width_and_layout(dtype, layout):
    # the native CPU apply writes -inf through an integer view of the logits: every width,
    # bfloat16 included, and logits that are views of a larger tensor
    rng = np.random.default_rng(7)
    logits32, bm, allowed = random_case(rng, 3, 1000, 961)
    allowed[:, 5:37] = False  # an all-blocked word
    allowed[:, 64:96] = True  # an all-allowed word
    bm = torch.from_numpy(np.packbits(allowed, axis=1, bitorder="little").view("<i4").copy())
    expected = reference(logits32, allowed).to(dtype)
    if layout == "contiguous":
        logits = logits32.to(dtype)
    elif layout == "strided":
        logits = torch.zeros(3, 2000, dtype=dtype)[:, ::2]
        logits.copy_(logits32.to(dtype))
    else:
        logits = logits32.to(dtype).t().contiguous().t()
    apply_token_bitmask_inplace(logits, bm)
    assert torch.equal(torch.isinf(logits), torch.isinf(expected))
    assert bool((logits[torch.isinf(logits)] < 0).all())
    assert torch.equal(logits[~torch.isinf(logits)], expected[~torch.isinf(expected)])


def test_cpu_apply_indices_as_tensor_and_wide_bitmask():
    rng = np.random.default_rng(3)
    logits, bm, allowed = random_case(rng, 2, 100, 200)  # the bitmask covers more than the vocabulary
    full = torch.cat([logits, logits, logits])
    expected = reference(full, allowed, indices=[2, 0])
    apply_token_bitmask_inplace(full, bm, indices=torch.tensor([2, 0]))
    assert torch.equal(torch.isinf(full), torch.isinf(expected))
    assert torch.equal(full[~torch.isinf(full)], expected[~torch.isinf(expected)])


def test_indices_and_shape_errors():
    rng = np.random.default_rng(1)
    logits, bm, allowed = random_case(rng, 2, 64, 64)
    full = torch.cat([logits, logits])
    expected = reference(full, allowed, indices=[1, 3])
    apply_token_bitmask_inplace(full, bm, indices=[1, 3])
    assert torch.equal(torch.isinf(full), torch.isinf(expected))
    with pytest.raises(MatcherError, match="rows"):
        apply_token_bitmask_inplace(torch.zeros(3, 64), bm)
    with pytest.raises(MatcherError, match="2-D"):
        apply_token_bitmask_inplace(torch.zeros(64), bm)


def test_allocate_is_all_allowed():
    bm = allocate_token_bitmask(2, 70)
    assert bm.shape == (2, 3) and bm.dtype == torch.int32 and (bm == -1).all()


TRITON_CHECK = r"""
import numpy as np, torch
from structgen.runtime.kernels.triton_bitmask import apply_token_bitmask_triton
from tests.test_bitmask import random_case, reference
rng = np.random.default_rng(2)
for batch, vocab, mask_vocab in [(1, 100, 100), (3, 5000, 5000), (2, 1000, 961), (2, 257, 300)]:
    logits, bm, allowed = random_case(rng, batch, vocab, mask_vocab)
    expected = reference(logits, allowed)
    apply_token_bitmask_triton(logits, bm, words_per_program=8, full_store=batch % 2 == 0)
    assert torch.equal(torch.isinf(logits), torch.isinf(expected)), (batch, vocab)
full = torch.zeros(4, 64)
logits, bm, allowed = random_case(rng, 2, 64, 64)
apply_token_bitmask_triton(full, bm, torch.tensor([1, 3], dtype=torch.int32), words_per_program=2)
assert torch.equal(torch.isinf(full), torch.isinf(reference(torch.zeros(4, 64), allowed, indices=[1, 3])))
print("ok")
"""


def test_triton_kernel_in_interpreter_mode():
    pytest.importorskip("triton")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, "-c", TRITON_CHECK], capture_output=True, text=True, env=env, cwd=root,
                          timeout=600)
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-4000:]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run on the device machine)")
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("batch,vocab,mask_vocab", [(1, 49152, 49152), (8, 128256, 128256), (64, 151936, 151665),
                                                    (3, 1000, 961), (2, 257, 300)])
def test_cuda_kernel_matches_reference(batch, vocab, mask_vocab, dtype):

    # the real kernel on a real GPU (padded vocabularies both ways), via the public entry point
    rng = np.random.default_rng(batch + vocab)
    logits, bm, allowed = random_case(rng, batch, vocab, mask_vocab)
    logits = logits.to(getattr(torch, dtype))
    expected = reference(logits, allowed)
    apply_token_bitmask_inplace(logits.cuda(), bm.pin_memory())  # first call compiles and caches the launcher
    on_gpu = logits.cuda()
    apply_token_bitmask_inplace(on_gpu, bm.pin_memory())
    assert torch.equal(torch.isinf(on_gpu.cpu()), torch.isinf(expected))
    assert torch.equal(on_gpu.cpu()[~torch.isinf(expected)], expected[~torch.isinf(expected)])
    rows = [batch - 1] if batch > 1 else [0]
    sub = logits.cuda()
    expected_rows = reference(logits, allowed[: len(rows)], indices=rows)
    apply_token_bitmask_inplace(sub, bm[: len(rows)].cuda(), indices=rows)
    assert torch.equal(torch.isinf(sub.cpu()), torch.isinf(expected_rows))
    sub = logits.cuda()
    apply_token_bitmask_inplace(sub, bm[: len(rows)].cuda(), indices=rows)
    from structgen.runtime.kernels import triton_bitmask

    assert "disabled" not in triton_bitmask._LAUNCHERS, "this Triton's launcher refused the direct call"
    assert triton_bitmask._LAUNCHERS, "the direct launcher was never used"
    assert torch.equal(torch.isinf(sub.cpu()), torch.isinf(expected_rows))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run on the device machine)")
@pytest.mark.parametrize("full_store", [False, True])
@pytest.mark.parametrize("words_per_program", [32, 128, 256])
def test_cuda_kernel_variants(full_store, words_per_program):
    from structgen.runtime.kernels.triton_bitmask import apply_token_bitmask_triton

    rng = np.random.default_rng(words_per_program)
    for batch, vocab, mask_vocab in [(2, 128256, 128000), (5, 4099, 4200)]:
        logits, bm, allowed = random_case(rng, batch, vocab, mask_vocab)
        expected = reference(logits, allowed)
        for _ in range(2):  # the second call goes through the cached launcher
            on_gpu = logits.cuda()
            apply_token_bitmask_triton(on_gpu, bm.cuda(), words_per_program=words_per_program, full_store=full_store)
            assert torch.equal(on_gpu.cpu().isinf(), expected.isinf())
            assert torch.equal(on_gpu.cpu()[~expected.isinf()], expected[~expected.isinf()])
