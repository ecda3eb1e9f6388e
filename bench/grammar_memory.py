"""Memory per compiled grammar and tokenizer preparation time, structgen vs XGrammar.

    python bench/grammar_memory.py [--tokenizer llama3] [--grammars 32]

Each arm runs in its own process: it prepares the tokenizer (timed: for structgen
``TokenizerInfo.from_huggingface`` plus the vocabulary trie, read from the disk cache after
the first run; for XGrammar ``TokenizerInfo.from_huggingface`` and its compiler), then
compiles ``--grammars`` MaskBench schemas and walks one valid instance of each (a fill and
an accept per token), keeping every grammar and matcher alive. Memory per grammar is the
growth of the resident set over that work divided by the grammars (the process-wide figure
that a server pays, allocator slack included); the peak is the growth of the peak RSS.

Arms: ``structgen`` (lazy masks: the masks the walk needed), ``structgen-background``
(``precompute="background"``, after every grammar's background precompute finished), and
``xgrammar`` (masks precomputed at compile, one thread). Writes
bench/results/grammar_memory.json and prints a table.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ARMS = ("structgen", "structgen-background", "xgrammar")


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def arm(name: str, tok_name: str, shared: Path, n: int) -> dict:
    from bench.batch import pick
    from bench.compile_mask import load_tokenizer

    cases = pick(shared, n * 2)
    tok = load_tokenizer(tok_name, shared)
    paths = [tok.encode(c["texts"][0], add_special_tokens=False) for c in cases]
    vocab = len(tok)
    gc.collect()
    t0 = time.perf_counter()
    if name.startswith("structgen"):
        import numpy as np

        from structgen import GrammarCompiler, TokenizerInfo

        info = TokenizerInfo.from_huggingface(tok, vocab_size=vocab)
        compiler = GrammarCompiler(info, cache_size=0,
                                   precompute="background" if name.endswith("background") else "lazy")
        _ = compiler.trie
        prep = time.perf_counter() - t0
        compile_ = compiler.compile_json_schema
        bitmask = np.zeros((1, (info.vocab_size + 31) // 32), np.int32)
    else:
        import xgrammar as xgr

        info = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=vocab)
        compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
        prep = time.perf_counter() - t0

        def compile_(schema):
            return compiler.compile_json_schema(json.dumps(schema), any_whitespace=False, separators=(",", ":"))

        bitmask = xgr.allocate_token_bitmask(1, vocab)
    gc.collect()
    rss0, peak0 = rss_bytes(), peak_bytes()
    kept = []
    for case, path in zip(cases, paths):
        if len(kept) == n:
            break
        try:
            g = compile_(case["schema"])
        except Exception:  # noqa: BLE001 - schemas an engine refuses are skipped
            continue
        m = g.matcher() if name.startswith("structgen") else xgr.GrammarMatcher(g)
        for t in path:
            m.fill_next_token_bitmask(bitmask)
            if not m.accept_token(t):
                break
        kept.append((g, m))
    if name.endswith("background"):
        for g, _ in kept:
            g.background.wait()
    gc.collect()
    rss1, peak1 = rss_bytes(), peak_bytes()
    out = {"arm": name, "grammars": len(kept), "prep_s": prep,
           "rss_per_grammar_mb": (rss1 - rss0) / len(kept) / 2**20,
           "peak_growth_per_grammar_mb": (peak1 - peak0) / len(kept) / 2**20}
    if name.startswith("structgen"):
        # configurations with a mask, and the distinct masks stored for them (equal masks
        # of one grammar are stored once; a mask with few set 64-byte chunks keeps those
        # alone), plus the memoised token groups of name starts (as large as a mask each)
        stats = [g.index.stats() for g, _ in kept]
        masks = sum(s["masks"] for s in stats)
        run_masks = sum(s["run_masks"] for s in stats)
        mask_bytes = sum(s["mask_bytes"] for s in stats)
        out["mask_configs_per_grammar"] = sum(s["mask_configs"] for s in stats) / len(kept)
        out["masks_per_grammar"] = masks / len(kept)
        out["run_masks_per_grammar"] = run_masks / len(kept)
        run_bytes = run_masks * ((info.vocab_size + 31) // 32 * 4)
        out["mask_mb_per_grammar"] = (mask_bytes + run_bytes) / len(kept) / 2**20
    else:
        out["memory_size_bytes_per_grammar_mb"] = sum(g.memory_size_bytes for g, _ in kept) / len(kept) / 2**20
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokenizer", default="llama3")
    ap.add_argument("--grammars", type=int, default=32)
    ap.add_argument("--arms", default=",".join(ARMS))
    ap.add_argument("--shared", default=str(ROOT.parent / "shared" / "data"))
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "grammar_memory.json"))
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(arm(args.worker, args.tokenizer, Path(args.shared), args.grammars)))
        return
    rows = []
    for name in args.arms.split(","):
        # twice: the first run may build the disk cache; the second is what a restart pays
        for _ in range(2):
            proc = subprocess.run([sys.executable, __file__, "--worker", name, "--tokenizer", args.tokenizer,
                                   "--grammars", str(args.grammars), "--shared", args.shared],
                                  capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
            if proc.returncode:
                raise SystemExit(f"{name} failed:\n{proc.stderr[-3000:]}")
        rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    out = {"command": "python bench/grammar_memory.py " + " ".join(sys.argv[1:]), "tokenizer": args.tokenizer,
           "rows": rows, "load_1min": os.getloadavg()[0]}
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(f"\n{args.tokenizer}: {rows[0]['grammars']} MaskBench grammars, each walked along one valid instance\n")
    print("| arm | tokenizer prep (s, cached) | RSS per grammar (MB) | peak growth per grammar (MB) | masks / grammar |")
    print("|---|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['arm']} | {r['prep_s']:.3f} | {r['rss_per_grammar_mb']:.2f} | "
              f"{r['peak_growth_per_grammar_mb']:.2f} | {r.get('masks_per_grammar', float('nan')):.0f} |")


if __name__ == "__main__":
    main()
