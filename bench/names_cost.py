"""What keeping member names distinct costs per token (src/core/names.cpp).

    python bench/names_cost.py [--repeat 5] [--first-tokenizer llama3]

For the core schemas whose grammar leaves member names free (``compiled.free_names``), a
few larger free-name instances, and JSON mode: walk the token path of each valid instance
(canonical JSON, SmolLM2 tokenization) and time, per step, ``fill_next_token_bitmask``
and ``accept_token`` warm (masks memoised), with the name tracking on and with it off
(the matcher's name state removed: what the code did before). Runs alternate on/off to
share noise. Then the first visits: with ``--first-tokenizer`` (a folder under
../shared/data/tokenizers, Llama-3 by default; ``none`` skips it), each grammar compiled
afresh (new index, empty memos) and filled along the same instances, on and off
alternating, best of ``--repeat`` rounds. Prints a table; writes bench/results/names_cost.json.
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from structgen import GrammarCompiler, GrammarMatcher, TokenizerInfo  # noqa: E402
from structgen.schema.canonical import canonical_json  # noqa: E402


def cases() -> list[tuple[str, object, list]]:
    core = json.loads((ROOT / "tests" / "data" / "core_schemas.json").read_text())
    out = [(c["name"], c["schema"], c["valid"]) for c in core]
    many = {f"field_{i}": (i if i % 3 else f"value {i}") for i in range(40)}
    out.append(("object_40_free_members", {"type": "object"}, [many]))
    out.append(("object_min_properties_3", {"type": "object", "minProperties": 3},
                [{"alpha": 1, "beta": [1, 2], "gamma": {"x": 1, "y": "z"}}]))
    out.append(("pattern_properties", {"type": "object", "patternProperties": {"^x_": {"type": "integer"}},
                                       "additionalProperties": {"type": "string"}},
                [{"x_a": 1, "x_b": 2, "name": "n", "other": "o"}]))
    return out


def time_path(compiled, ids: list[int], tracking: bool, bm: np.ndarray) -> tuple[list[float], list[float]]:
    m = GrammarMatcher(compiled)
    if not tracking:
        m._names = None  # noqa: SLF001 - the "before" arm: no name state, as before the feature
    fill, accept = [], []
    for t in ids:
        t0 = time.perf_counter()
        m.fill_next_token_bitmask(bm)
        t1 = time.perf_counter()
        ok = m.accept_token(t)
        t2 = time.perf_counter()
        assert ok, "instance token rejected"
        fill.append(t1 - t0)
        accept.append(t2 - t1)
    return fill, accept


def first_pass(name: str, repeat: int) -> dict:
    """Fill times of never-visited (configuration, names) pairs: fresh grammars per round."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(ROOT.parent / "shared" / "data" / "tokenizers" / name), local_files_only=True)
    info = TokenizerInfo.from_huggingface(tok)
    bm = np.zeros((1, (info.vocab_size + 31) // 32), np.int32)
    work = []
    for _, schema, valid in cases():
        if GrammarCompiler(info, cache_size=0).compile_json_schema(schema).free_names:
            work += [(schema, tok.encode(canonical_json(v, schema), add_special_tokens=False)) for v in valid]

    def one_round(tracking: bool) -> np.ndarray:
        compiler = GrammarCompiler(info, cache_size=0)
        fills: list[float] = []
        for schema, ids in work:
            f, _ = time_path(compiler.compile_json_schema(schema), ids, tracking, bm)
            fills += f
        return np.array(fills)

    t0 = time.perf_counter()
    one_round(True)  # the matcher's per-tokenizer tables, made once
    tables_s = time.perf_counter() - t0
    rounds = {True: [], False: []}
    for _ in range(repeat):
        for tracking in (True, False):
            rounds[tracking].append(one_round(tracking))
    out = {"tokenizer": name, "fills": len(rounds[True][0]), "first_round_s": tables_s}
    for tracking, arm in ((False, "off"), (True, "on")):
        best = min(rounds[tracking], key=np.sum)
        out[f"mean_us_{arm}"] = 1e6 * float(best.mean())
        out[f"p90_us_{arm}"] = 1e6 * float(np.percentile(best, 90))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--first-tokenizer", default="llama3")
    args = ap.parse_args()
    from structgen.models import load_default_tokenizer

    tok = load_default_tokenizer()
    info = TokenizerInfo.from_huggingface(tok)
    compiler = GrammarCompiler(info)
    bm = np.zeros((1, (info.vocab_size + 31) // 32), np.int32)
    rows = []
    for name, schema, valid in cases() + [("json_mode", None, [{"a": 1, "b": [{"c": "d", "e": None}], "f": "g"}])]:
        compiled = compiler.compile_builtin_json(whitespace="compact") if schema is None else compiler.compile_json_schema(schema)
        if not compiled.free_names:
            continue
        paths = [tok.encode(canonical_json(v, schema) if schema is not None else json.dumps(v, separators=(",", ":")),
                          add_special_tokens=False) for v in valid]
        for ids in paths:  # warm the masks (and the per-tokenizer quote tables) first
            time_path(compiled, ids, True, bm)
            time_path(compiled, ids, False, bm)
        on_f, on_a, off_f, off_a = [], [], [], []
        for _ in range(args.repeat):
            for ids in paths:
                f, a = time_path(compiled, ids, True, bm)
                on_f += f
                on_a += a
                f, a = time_path(compiled, ids, False, bm)
                off_f += f
                off_a += a
        rows.append({"schema": name, "steps": len(on_f),
                     "fill_us_off": 1e6 * float(np.median(off_f)), "fill_us_on": 1e6 * float(np.median(on_f)),
                     "fill_p90_us_on": 1e6 * float(np.percentile(on_f, 90)),
                     "accept_us_off": 1e6 * float(np.median(off_a)), "accept_us_on": 1e6 * float(np.median(on_a))})
    print(f"{'schema':42} {'steps':>5} {'fill off':>9} {'fill on':>9} {'p90 on':>9} {'acc off':>8} {'acc on':>8}  (us, median)")
    for r in rows:
        print(f"{r['schema'][:42]:42} {r['steps']:5d} {r['fill_us_off']:9.1f} {r['fill_us_on']:9.1f} "
              f"{r['fill_p90_us_on']:9.1f} {r['accept_us_off']:8.1f} {r['accept_us_on']:8.1f}")
    allon = np.median([r["fill_us_on"] for r in rows])
    alloff = np.median([r["fill_us_off"] for r in rows])
    print(f"median over schemas: fill {alloff:.1f} -> {allon:.1f} us")
    first = None
    if args.first_tokenizer != "none":
        first = first_pass(args.first_tokenizer, args.repeat)
        print(f"first visits ({first['tokenizer']}, {first['fills']} fills, fresh grammars, best of {args.repeat}): "
              f"fill mean {first['mean_us_off']:.0f} -> {first['mean_us_on']:.0f} us, "
              f"p90 {first['p90_us_off']:.0f} -> {first['p90_us_on']:.0f} us")
    out = ROOT / "bench" / "results" / "names_cost.json"
    out.write_text(json.dumps({"command": "python bench/names_cost.py --repeat %d" % args.repeat,
                               "machine": platform.platform(), "rows": rows, "first_pass": first}, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
