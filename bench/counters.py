"""Counted repetition: large maxLength/maxItems against the unbounded form.

    python bench/counters.py [--chars 20000]

For each bounded schema and its unbounded twin (same schema without the bound), with
SmolLM2's vocabulary: compile time (median of 5, rule caches cleared), Python memory
allocated by the compile (tracemalloc peak), automaton states; then a decode walk of ``--chars`` characters (string schemas) or
items (array schemas), filling the next-token mask before every character, with the
per-step time (mask + advance), the distinct masks, the configurations created and, in
a second walk under tracemalloc, the memory the walk added per character. Prints a table; writes bench/results/counters.json.
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from structgen import GrammarCompiler, TokenizerInfo  # noqa: E402
from structgen.models import load_default_tokenizer  # noqa: E402

SCHEMAS = {
    "maxLength 100000": ({"type": "string", "maxLength": 100000}, {"type": "string"}),
    "minLength 100000": ({"type": "string", "minLength": 100000}, {"type": "string"}),
    "maxLength 1000": ({"type": "string", "maxLength": 1000}, {"type": "string"}),
    "pattern + maxLength 100000": ({"type": "string", "pattern": "^[a-z ]+$", "maxLength": 100000},
                                   {"type": "string", "pattern": "^[a-z ]+$"}),
    "maxItems 1000 (integers)": ({"type": "array", "items": {"type": "integer"}, "maxItems": 1000},
                                 {"type": "array", "items": {"type": "integer"}}),
    "maxItems 1000 (objects)": ({"type": "array", "maxItems": 1000, "items": {
        "type": "object", "properties": {"id": {"type": "integer"}, "name": {"type": "string", "maxLength": 200}},
        "required": ["id", "name"], "additionalProperties": False}},
        {"type": "array", "items": {"type": "object", "properties": {"id": {"type": "integer"}, "name": {"type": "string"}},
                                    "required": ["id", "name"], "additionalProperties": False}}),
}


def compile_cost(compiler: GrammarCompiler, schema: dict, *, traced: bool = True) -> tuple[object, float, int]:
    if not traced:
        t = time.perf_counter()
        compiled = compiler.compile_json_schema(schema)
        return compiled, time.perf_counter() - t, 0
    tracemalloc.start()
    t = time.perf_counter()
    compiled = compiler.compile_json_schema(schema)
    seconds = time.perf_counter() - t
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return compiled, seconds, peak


def walk(compiled, schema: dict, n: int, *, traced: bool) -> dict:
    """Fill the mask before every character of an instance of ``n`` characters/items."""
    if schema["type"] == "string":
        text = json.dumps(("lorem ipsum " * (n // 12 + 1))[:n])[:-1]  # open: the bound is far
    else:
        item = '{"id":7,"name":"x"}' if schema["items"].get("type") == "object" else "12"
        text = "[" + ",".join([item] * n)
    index = compiled.index
    m = compiled.matcher()
    if traced:
        tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    configs0 = index.num_configs
    masks, steps = set(), []
    for ch in text:
        t = time.perf_counter()
        masks.add(id(index.mask(m.state)))
        ok = m.accept_string(ch)
        steps.append(time.perf_counter() - t)
        assert ok, "the walk left the grammar"
    if traced:
        added = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
        return {"walk_bytes_per_char": added / len(text)}
    us = np.array(steps) * 1e6
    return {"chars": len(text), "step_us_p50": float(np.median(us)), "step_us_p99": float(np.percentile(us, 99)),
            "step_us_max": float(us.max()), "distinct_masks": len(masks), "configs_added": index.num_configs - configs0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chars", type=int, default=20000)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "counters.json"))
    args = ap.parse_args()
    info = TokenizerInfo.from_huggingface(load_default_tokenizer())
    compiler = GrammarCompiler(info, cache_size=0)
    _ = compiler.trie  # per-tokenizer work is not part of a schema's compile
    compiler.compile_json_schema({"type": "string"})  # warm imports and lazy tables
    rows = []
    for name, (bounded, unbounded) in SCHEMAS.items():
        for kind, schema in (("bounded", bounded), ("unbounded", unbounded)):
            times = [compile_cost(compiler, schema, traced=False)[1] for _ in range(5)]
            compiled, _, peak = compile_cost(compiler, schema)
            n = args.chars if schema["type"] == "string" else max(args.chars // 20, 1)
            n = min(n, bounded.get("maxLength", n + 1) - 1, bounded.get("maxItems", n + 1) - 1)  # stay below the bound
            row = {"schema": name, "form": kind, "compile_ms": float(np.median(times)) * 1e3,
                   "compile_peak_mb": peak / 2**20, "automaton_states": compiled.stats.automaton_states,
                   **walk(compiled, schema, n, traced=False),
                   **walk(compile_cost(compiler, schema, traced=False)[0], schema, n, traced=True)}
            rows.append(row)
    head = ("schema", "form", "compile ms", "compile MB", "states", "walk", "step p50 µs", "p99 µs",
            "masks", "configs", "B/char")
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for r in rows:
        print(f"| {r['schema']} | {r['form']} | {r['compile_ms']:.1f} | {r['compile_peak_mb']:.2f} | "
              f"{r['automaton_states']} | {r['chars']} | {r['step_us_p50']:.0f} | {r['step_us_p99']:.0f} | "
              f"{r['distinct_masks']} | {r['configs_added']} | {r['walk_bytes_per_char']:.0f} |")
    out = {"machine": f"{platform.processor() or platform.machine()}, {platform.python_version()}",
           "command": "python bench/counters.py " + " ".join(sys.argv[1:]), "tokenizer": "SmolLM2-135M (49,152)",
           "rows": rows}
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
