"""GPU apply: mask logits (B, V) in place with an int32 token bitmask, structgen vs XGrammar.

    python bench/gpu_apply.py [--batches 1,8,64,256] [--vocabs 49152,128256,151936]

Needs a CUDA GPU (exits with a note otherwise). For every batch size, vocabulary width and
logits dtype it times, with CUDA events through ``triton.testing.do_bench`` (which flushes
the L2 cache between calls and reports the median):

- ``structgen``: the public ``structgen.apply_token_bitmask_inplace`` (Python wrapper + kernel);
- ``kernel_<store>_w<words>``: the Triton kernel alone, in each variant (masked or full store,
  words per program), to choose the default from;
- ``xgrammar``: ``xgrammar.apply_token_bitmask_inplace`` (its default backend), when installed;
- ``torch_ref``: unpack the bits and ``masked_fill_`` with plain torch ops, for scale.

``<engine>_us`` is do_bench's figure: GPU time of one call (launch cost mostly hidden behind
the cache flush). ``<engine>_call_us`` times 200 calls back to back with warm L2, so at small
batches it is the launch rate (the CPU cost of one call), which a decoding loop also pays. The bandwidth bound is
``(read + write of the logits + the bitmask) / measured device-to-device copy bandwidth``,
the convention of the figure quoted in the issue (62 µs for 256 x 128K float32 on an H200).
Masks are random with a given share of allowed tokens: 50% (the usual kernel benchmark)
and 1% (JSON grammars forbid most tokens, so the kernel writes almost every logit).
Every kernel's output is checked against the reference before it is timed.
Writes bench/results/gpu_apply.json and prints a table.
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def packed_random_mask(torch, batch: int, vocab: int, allowed_share: float, gen):
    allowed = torch.rand((batch, vocab), generator=gen, device="cuda") < allowed_share
    words = (vocab + 31) // 32
    padded = torch.zeros((batch, words * 32), dtype=torch.bool, device="cuda")
    padded[:, :vocab] = allowed
    weights = (1 << torch.arange(32, device="cuda", dtype=torch.int64))
    packed = (padded.view(batch, words, 32).to(torch.int64) * weights).sum(-1)
    packed = torch.where(packed >= 2**31, packed - 2**32, packed).to(torch.int32)
    return packed, allowed


def copy_bandwidth(torch, do_bench) -> float:
    """Bytes per second of a device-to-device copy (read + write counted), 1 GiB buffers."""
    src = torch.empty(1 << 28, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    ms = do_bench(lambda: dst.copy_(src), warmup=25, rep=200)
    return 2 * src.numel() * 4 / (ms * 1e-3)


def back_to_back_us(torch, fn, calls: int = 200) -> float:
    """Microseconds per call of ``calls`` launches in a row, L2 warm: max(launch cost, GPU time)."""
    for _ in range(10):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e3 / calls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", default="1,8,64,256")
    ap.add_argument("--vocabs", default="49152,128256,151936")
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--shares", default="0.5,0.01", help="shares of allowed tokens in the random masks")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "gpu_apply.json"))
    args = ap.parse_args()

    import torch

    if not torch.cuda.is_available():
        print("gpu_apply: no CUDA GPU here; nothing measured (run it on a machine with one)")
        return
    from triton.testing import do_bench

    from structgen import apply_token_bitmask_inplace
    from structgen.runtime.kernels.triton_bitmask import apply_token_bitmask_triton

    try:
        import xgrammar

        xgr_apply = xgrammar.apply_token_bitmask_inplace
        from importlib.metadata import version

        xgr_version = version("xgrammar")
    except ImportError as e:
        xgr_apply, xgr_version = None, f"not installed ({e})"

    def torch_ref(logits, bitmask):
        shifts = torch.arange(32, device=logits.device, dtype=torch.int32)
        bits = ((bitmask.unsqueeze(-1) >> shifts) & 1).reshape(bitmask.shape[0], -1)[:, : logits.shape[1]]
        logits.masked_fill_(bits == 0, float("-inf"))

    engines = {
        "structgen": lambda lg, bm: apply_token_bitmask_inplace(lg, bm),
        "torch_ref": torch_ref,
    }
    for words, full in ((128, False), (32, True), (128, True)):  # kernel variants, to choose the default from
        engines[f"kernel_{'full' if full else 'masked'}_w{words}"] = (
            lambda lg, bm, words=words, full=full: apply_token_bitmask_triton(lg, bm, words_per_program=words,
                                                                              full_store=full))
    if xgr_apply is not None:
        engines["xgrammar"] = lambda lg, bm: xgr_apply(lg, bm)

    bandwidth = copy_bandwidth(torch, do_bench)
    gen = torch.Generator(device="cuda").manual_seed(0)
    rows = []
    for dtype_name in args.dtypes.split(","):
        dtype = getattr(torch, dtype_name)
        for vocab in map(int, args.vocabs.split(",")):
            for batch in map(int, args.batches.split(",")):
                for share in map(float, args.shares.split(",")):
                    bitmask, allowed = packed_random_mask(torch, batch, vocab, share, gen)
                    base = torch.randn((batch, vocab), generator=gen, device="cuda").to(dtype)
                    expected = base.masked_fill(~allowed, float("-inf"))
                    moved = 2 * batch * vocab * base.element_size() + bitmask.numel() * 4
                    row = {"dtype": dtype_name, "vocab": vocab, "batch": batch, "allowed_share": share,
                           "bound_us": moved / bandwidth * 1e6}
                    for name, fn in engines.items():
                        check = base.clone()
                        fn(check, bitmask)
                        torch.cuda.synchronize()
                        if not torch.equal(check, expected):
                            row[name + "_us"] = None
                            row[name + "_error"] = "output differs from the reference"
                            continue
                        work = base.clone()

                        def call(fn=fn, work=work, bitmask=bitmask):
                            fn(work, bitmask)

                        row[name + "_us"] = do_bench(call, warmup=25, rep=100) * 1e3
                        row[name + "_call_us"] = back_to_back_us(torch, call)
                    rows.append(row)
                    print(json.dumps(row), flush=True)

    table = ["| dtype | V | B | allowed | bound µs | " + " | ".join(f"{n} µs (per call)" for n in engines) + " |",
             "|---|---|---|---|---|" + "---|" * len(engines)]
    for r in rows:
        cells = [f"{r[n + '_us']:.1f} ({r[n + '_call_us']:.1f})" if r.get(n + "_us") is not None else "WRONG"
                 for n in engines]
        table.append(f"| {r['dtype']} | {r['vocab']} | {r['batch']} | {r['allowed_share']:.0%} | "
                     f"{r['bound_us']:.1f} | " + " | ".join(cells) + " |")
    print("\n".join(table))
    result = {
        "machine": {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                    "cuda": torch.version.cuda, "python": platform.python_version(),
                    "triton": __import__("triton").__version__, "xgrammar": xgr_version},
        "copy_bandwidth_GBps": bandwidth / 1e9,
        "method": "triton.testing.do_bench median (CUDA events, L2 flushed), calls back to back; "
                  "bound = (2*B*V*elem + bitmask bytes) / copy bandwidth",
        "rows": rows,
        "table_md": "\n".join(table),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
