"""Compile time and per-token mask time on real vocabularies.

    python bench/compile_mask.py [--tokenizers smollm2,llama3] [--shared ../shared/data]

For every schema of tests/data/core_schemas.json (and examples/schemas/*.json, with no
instances), compile with a fresh compiler cache and fill the next-token bitmask at every
step of the token path of each valid instance (canonical JSON, tokenized by the same
tokenizer). The first pass over a grammar is "cold" (masks computed on first visit), the
second "warm" (memoised). Prints a table; writes bench/results/compile_mask.json.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from structgen import GrammarCompiler, StructgenError, TokenizerInfo  # noqa: E402
from structgen.schema.canonical import canonical_json  # noqa: E402


def load_tokenizer(name: str, shared: Path):
    if name == "smollm2":
        from structgen.models import load_default_tokenizer

        return load_default_tokenizer()
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(shared / "tokenizers" / name), local_files_only=True)


def pct(xs, q):
    return float(np.percentile(xs, q)) if len(xs) else float("nan")


def run(name: str, shared: Path, cases: list[dict]) -> dict:
    tok = load_tokenizer(name, shared)
    t0 = time.perf_counter()
    info = TokenizerInfo.from_huggingface(tok)
    compiler = GrammarCompiler(info, cache_size=0)
    _ = compiler.trie
    prep = time.perf_counter() - t0
    compile_s, cold, warm, failed = [], [], [], []
    bm = np.zeros((1, (info.vocab_size + 31) // 32), np.int32)
    for case in cases:
        try:
            t = time.perf_counter()
            compiled = compiler.compile_json_schema(case["schema"])
            compile_s.append(time.perf_counter() - t)
        except StructgenError as e:
            failed.append((case["name"], type(e).__name__))
            continue
        paths = [tok.encode(canonical_json(v, case["schema"]), add_special_tokens=False) for v in case.get("valid", [])]
        for bucket in (cold, warm):
            for ids in paths:
                m = compiled.matcher()
                for t_id in ids + [None]:
                    t = time.perf_counter()
                    m.fill_next_token_bitmask(bm)
                    bucket.append(time.perf_counter() - t)
                    if t_id is not None:
                        assert m.accept_token(t_id), (case["name"], t_id)
    us = lambda xs: {q: round(pct(xs, v) * 1e6, 1) for q, v in (("p50", 50), ("p90", 90), ("p99", 99), ("max", 100))}  # noqa: E731
    return {
        "tokenizer": name,
        "tokens": len(info),
        "prepare_s": round(prep, 3),
        "schemas": len(cases),
        "compiled": len(compile_s),
        "refused": failed,
        "compile_ms": {q: round(pct(compile_s, v) * 1e3, 2) for q, v in (("p50", 50), ("p90", 90), ("p99", 99), ("max", 100))},
        "mask_cold_us": us(cold),
        "mask_warm_us": us(warm),
        "mask_steps": len(cold),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokenizers", default="smollm2,llama3")
    ap.add_argument("--shared", default=str(ROOT.parent / "shared" / "data"))
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "compile_mask.json"))
    args = ap.parse_args()
    shared = Path(args.shared)
    cases = json.loads((ROOT / "tests" / "data" / "core_schemas.json").read_text())
    cases += [{"name": p.stem, "schema": json.loads(p.read_text()), "valid": []} for p in sorted((ROOT / "examples" / "schemas").glob("*.json"))]
    results = []
    for name in args.tokenizers.split(","):
        if name != "smollm2" and not (shared / "tokenizers" / name).exists():
            print(f"skipping {name}: {shared / 'tokenizers' / name} not found")
            continue
        results.append(run(name, shared, cases))
    hw = {"machine": platform.machine(), "processor": platform.processor(), "cpus": os.cpu_count(),
          "python": platform.python_version(), "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}
    Path(args.out).write_text(json.dumps({"hardware": hw, "results": results}, indent=2))
    print(f"hardware: {hw}")
    print("| tokenizer | tokens | prepare s | compiled | compile ms p50/p99/max | mask cold µs p50/p99/max | mask warm µs p50/p99/max |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        c, k, w = r["compile_ms"], r["mask_cold_us"], r["mask_warm_us"]
        print(f"| {r['tokenizer']} | {r['tokens']} | {r['prepare_s']} | {r['compiled']}/{r['schemas']} | "
              f"{c['p50']}/{c['p99']}/{c['max']} | {k['p50']}/{k['p99']}/{k['max']} | {w['p50']}/{w['p99']}/{w['max']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
