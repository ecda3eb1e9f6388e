"""What keeping member names distinct costs per token (structgen/runtime/names.py).

    python bench/names_cost.py [--repeat 5]

For the core schemas whose grammar leaves member names free (``compiled.free_names``), a
few larger free-name instances, and JSON mode: walk the token path of each valid instance
(canonical JSON, SmolLM2 tokenization) and time, per step, ``fill_next_token_bitmask``
and ``accept_token`` warm (masks memoised), with the name tracking on and with it off
(the matcher's name state removed: what the code did before). Runs alternate on/off to
share noise. Prints a table; writes bench/results/names_cost.json.
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
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
    out = ROOT / "bench" / "results" / "names_cost.json"
    out.write_text(json.dumps({"command": "python bench/names_cost.py --repeat %d" % args.repeat,
                               "machine": platform.platform(), "rows": rows}, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
