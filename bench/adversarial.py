"""Adversarial schemas: time and memory until a result or a limit error.

    python bench/adversarial.py [--root PATH] [--timeout 60] [--out bench/results/adversarial.json]

Each case runs in a fresh subprocess (so peak memory is its own) against the structgen
checkout at ``--root`` (default: this one; point it at an older checkout for a before/after
comparison), with SmolLM2's vocabulary: compile the schema, then, where the case has a
text, accept it token by token filling the next-token mask every 64 tokens. Reports wall
seconds, the growth of the process's peak resident memory (VmHWM, reset after the tokenizer
load) over its size then, and the outcome: ``ok`` or the exception class and the start of its message; a case
still running after ``--timeout`` seconds is killed and reported as ``timeout``. Prints a
table; writes JSON (with the hardware) to ``--out``.
"""
from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CASES: dict[str, tuple[dict, str | None]] = {
    "pattern b{5000} + 5000 b": ({"type": "string", "pattern": "b{5000}"}, '"' + "b" * 5000 + '"'),
    "pattern (ab){3000} + text": ({"type": "string", "pattern": "(ab){3000}"}, '"' + "ab" * 3000 + '"'),
    "pattern b{5000}$ + 5000 b": ({"type": "string", "pattern": "b{5000}$"}, '"' + "b" * 5000 + '"'),
    "pattern (ab){3000}$ + text": ({"type": "string", "pattern": "(ab){3000}$"}, '"' + "ab" * 3000 + '"'),
    "pattern ^((a|b|c){1000}){1000}$": ({"type": "string", "pattern": "^((a|b|c){1000}){1000}$"}, '"' + "abc" * 2000),
    "maxProperties 10**6": ({"type": "object", "maxProperties": 10**6}, '{"a":1,"b":2}'),
    "maxProperties 10**9": ({"type": "object", "maxProperties": 10**9}, '{"a":1,"b":2}'),
    "minProperties 10**9": ({"type": "object", "minProperties": 10**9}, None),
    "maxItems 10**18": ({"type": "array", "maxItems": 10**18}, "[1,2]"),
    "minLength 10**18": ({"type": "string", "minLength": 10**18}, None),
    "maxContains 10**9": ({"type": "array", "contains": {"type": "integer"}, "maxContains": 10**9}, "[1,2]"),
    "enum of 20,000 strings": ({"enum": [f"value{i}" for i in range(20000)]}, None),
    "pattern of 20,000 alternatives": ({"type": "string", "pattern": "^(" + "|".join(f"w{i}x" for i in range(20000)) + ")$"}, None),
    "not anyOf 10 consts": ({"not": {"anyOf": [{"const": f"v{i}"} for i in range(10)]}}, '"abc"'),
    "not anyOf 15 consts": ({"not": {"anyOf": [{"const": f"v{i}"} for i in range(15)]}}, '"abc"'),
    "not anyOf 15 integer ranges": ({"not": {"anyOf": [{"type": "integer", "minimum": 10 * i, "maximum": 10 * i + 5}
                                                       for i in range(15)]}}, "7"),
    "allOf of 14 anyOf x3": ({"allOf": [{"anyOf": [{"minLength": i}, {"maxLength": 100 + i}, {"minItems": i}]}
                                        for i in range(14)]}, None),
    "two patternProperties": ({"type": "object", "patternProperties": {"^[a-z]{2,40}$": {"type": "integer"},
                                                                       "^x.*y$": {"type": "string"}}}, '{"ab":1}'),
    "400 properties + maxProperties 300": ({"type": "object", "maxProperties": 300,
                                            "properties": {f"p{i}": {"type": "integer"} for i in range(400)}}, None),
    "array nesting 10,000 levels": ("nest", None),
    "$ref chain of 3,000": ("refchain", None),
}

_CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from structgen import GrammarCompiler, TokenizerInfo
from structgen.models import load_default_tokenizer
import numpy as np
spec = json.loads(sys.stdin.read())
schema, text = spec["schema"], spec["text"]
if schema == "nest":
    schema = {"type": "integer"}
    for _ in range(10000):
        schema = {"type": "array", "items": schema}
elif schema == "refchain":
    defs = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(3000)}
    defs["d3000"] = {"type": "integer"}
    schema = {"$ref": "#/$defs/d0", "$defs": defs}
tok = load_default_tokenizer()
info = TokenizerInfo.from_huggingface(tok)
compiler = GrammarCompiler(info)
_ = compiler.trie
def rss_kb(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1])
base = rss_kb("VmRSS:")
with open("/proc/self/clear_refs", "w") as f:  # reset the peak (VmHWM) to the current size
    f.write("5")
t = time.perf_counter()
try:
    g = compiler.compile_json_schema(schema)
    outcome = f"ok, {g.automaton.num_states} states"
    if text:
        m = g.matcher()
        bm = np.zeros((1, g.index.words), np.int32)
        ids = tok.encode(text, add_special_tokens=False)
        for i, tid in enumerate(ids):
            if i % 64 == 0:
                m.fill_next_token_bitmask(bm)
            if not m.accept_token(tid):
                outcome += f"; token {i} rejected"
                break
        else:
            outcome += f"; {len(ids)} tokens accepted"
except Exception as exc:
    outcome = f"{type(exc).__name__}: {str(exc)[:90]}"
seconds = time.perf_counter() - t
grown = rss_kb("VmHWM:") - base
print(json.dumps({"seconds": seconds, "peak_mb": grown / 1024, "outcome": outcome}))
"""


def run_case(root: Path, schema, text, timeout: float) -> dict:
    try:
        proc = subprocess.run([sys.executable, "-c", _CHILD, str(root)], input=json.dumps({"schema": schema, "text": text}),
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"seconds": None, "peak_mb": None, "outcome": f"timeout (> {timeout:g} s)"}
    if proc.returncode != 0 or not proc.stdout.strip():
        return {"seconds": None, "peak_mb": None, "outcome": f"crashed: {proc.stderr.strip().splitlines()[-1:]}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=ROOT)
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--only", nargs="*", help="case names to run (default: all)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "adversarial.json")
    args = ap.parse_args()
    rows = []
    print(f"{'case':38} {'seconds':>8} {'peak MB':>8}  outcome")
    for name, (schema, text) in CASES.items():
        if args.only and name not in args.only:
            continue
        r = run_case(args.root.resolve(), schema, text, args.timeout)
        rows.append({"case": name, **r})
        sec = "-" if r["seconds"] is None else f"{r['seconds']:.2f}"
        mb = "-" if r["peak_mb"] is None else f"{r['peak_mb']:.0f}"
        print(f"{name:38} {sec:>8} {mb:>8}  {r['outcome']}", flush=True)
    result = {"command": "python bench/adversarial.py " + " ".join(sys.argv[1:]), "root": str(args.root),
              "timeout_s": args.timeout, "machine": platform.platform(), "processor": platform.processor(),
              "python": platform.python_version(), "cases": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
