"""First fills inside common string shapes: one position each, structgen against the peers.

    python bench/string_fills.py [--tokenizer llama3] [--engines structgen,xgrammar,llguidance] [--repeats 7]

Each case is a small schema and a prefix of a valid value (a string's opening quote and a
few characters, a name's first bytes): the grammar is compiled afresh, the prefix accepted
token by token, and the one fill after it timed, so the mask is a first visit, what a
request with a new schema pays at that position. Fastest of ``--repeats`` compiles per case
and engine, all engines in this process, one after the other. The shapes are those of
real-world schemas that a corpus sample can miss: unanchored patterns, long and short
``maxLength`` bounds, ``.`` (which takes no U+2028 or U+2029), formats, names under
``patternProperties``. A case an engine refuses, or whose prefix it rejects, reads ``-``.
Prints a table; writes bench/results/string_fills.json.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.compile_mask import load_tokenizer  # noqa: E402
from bench.engines import load_engine  # noqa: E402


def _s(**kw) -> dict:
    return {"type": "string", **kw}


# (label, schema, prefix)
CASES: list[tuple[str, dict, str]] = [
    ("unanchored abc", _s(pattern="abc"), '"x'),
    ("unanchored [a-z]", _s(pattern="[a-z]"), '"'),
    ("unanchored [0-9a-fA-F]+", _s(pattern="[0-9a-fA-F]+"), '"'),
    ("unanchored \\S", _s(pattern="\\S"), '"a b'),
    ("^.*$", _s(pattern="^.*$"), '"ab'),
    ("^\\S+$", _s(pattern="^\\S+$"), '"ab'),
    ("^\\S+@\\S+\\.\\S+$", _s(pattern="^\\S+@\\S+\\.\\S+$"), '"a@b'),
    ("maxLength 12", _s(maxLength=12), '"ab'),
    ("maxLength 64", _s(maxLength=64), '"'),
    ("maxLength 255", _s(maxLength=255), '"ab'),
    ("minLength 1, maxLength 100", _s(minLength=1, maxLength=100), '"ab'),
    ("^[a-zA-Z0-9_-]+$, maxLength 64", _s(pattern="^[a-zA-Z0-9_-]+$", maxLength=64), '"ab'),
    ("format email", _s(format="email"), '"ab'),
    ("format uri", _s(format="uri"), '"http'),
    ("format hostname", _s(format="hostname"), '"ex'),
    ("format date-time", _s(format="date-time"), '"2024-'),
    ("format uuid", _s(format="uuid"), '"123e'),
    ("patternProperties ^x-, no others", {"type": "object", "patternProperties": {"^x-": _s()},
                                          "additionalProperties": False}, '{"x-'),
    ("additionalProperties string", {"type": "object", "additionalProperties": _s()}, '{"'),
]


def first_fill_us(engine, tok, schema: dict, prefix: str, repeats: int) -> float | None:
    ids = tok.encode(prefix, add_special_tokens=False)
    best = None
    for _ in range(repeats):
        try:
            compiled = engine.compile(schema)
        except Exception:  # noqa: BLE001 - a refusal reads "-"
            return None
        m = engine.matcher(compiled)
        bitmask = engine.new_bitmask()
        for t in ids:
            if not engine.accept(m, t):
                return None
        t0 = time.perf_counter_ns()
        engine.fill(m, bitmask)
        us = (time.perf_counter_ns() - t0) / 1e3
        best = us if best is None else min(best, us)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokenizer", default="llama3")
    ap.add_argument("--engines", default="structgen,xgrammar,llguidance")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--shared", default=str(ROOT.parent / "shared" / "data"))
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "string_fills.json"))
    args = ap.parse_args()
    tok = load_tokenizer(args.tokenizer, Path(args.shared))
    engines = {}
    for name in args.engines.split(","):
        try:
            engines[name] = load_engine(name, tok, len(tok))
        except Exception as e:  # noqa: BLE001 - a peer not installed is left out
            print(f"{name}: not available ({type(e).__name__}: {e})", file=sys.stderr)
    rows = []
    for label, schema, prefix in CASES:
        row = {"case": label, "schema": schema, "prefix": prefix}
        for name, engine in engines.items():
            row[name] = first_fill_us(engine, tok, schema, prefix, args.repeats)
        rows.append(row)
        print(f"{label}: " + ", ".join(f"{n} {row[n]}" for n in engines), file=sys.stderr)
    names = list(engines)
    out = {
        "command": "python bench/string_fills.py " + " ".join(sys.argv[1:]),
        "tokenizer": args.tokenizer,
        "vocab_size": len(tok),
        "repeats": args.repeats,
        "machine": {"python": platform.python_version(), "processor": platform.machine(), "cpus": os.cpu_count()},
        "versions": {n: getattr(e, "version", "") for n, e in engines.items()},
        "rows": rows,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")

    def cell(v: float | None) -> str:
        return "-" if v is None else f"{v:.1f}"

    print(f"\nfirst fill at one position, µs (fastest of {args.repeats} compiles), {args.tokenizer} "
          f"({len(tok)} tokens)\n")
    print("| case | prefix | " + " | ".join(names) + " |")
    print("|---|---|" + "---:|" * len(names))
    for r in rows:
        print(f"| {r['case']} | `{r['prefix']}` | " + " | ".join(cell(r[n]) for n in names) + " |")


if __name__ == "__main__":
    main()
