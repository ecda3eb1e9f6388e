"""Compile time of the largest MaskBench schemas, structgen against the peers.

    python bench/compile_large.py [--tokenizer smollm2] [--per-subset 12] [--top 8] [--repeats 3] [--runs 3]

The corpus is bench/masks.py's wide sample (``--per-subset`` schemas per MaskBench subset);
the ``--top`` largest by their JSON text are compiled, largest first, ``--repeats`` times each
in one worker process per engine (``bench/engines``, as bench/masks.py calls them: one
engine, its tokenizer prepared first, untimed). A repeat in the same process finds what the
engine keeps between compiles (structgen: its process-wide cache of rule automata, bounded
by the states it holds, which the largest schemas overflow), as a server compiling these
schemas one after another would. Each engine runs ``--runs`` times, alternating engines; a
schema's figure is its fastest compile over all of them. A schema an engine refuses reads
``-``. These are the schemas that set the per-request p99 of the wide sample (their compile is
most of their request). Prints a table; writes bench/results/compile_large.json.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.compile_mask import load_tokenizer  # noqa: E402
from bench.engines import load_engine  # noqa: E402
from bench.masks import build_corpus  # noqa: E402


def worker(engine_name: str, tok_name: str, shared: Path, cases_file: Path, repeats: int) -> dict:
    """Fastest compile (ms) of each case, ``None`` where the engine refuses it."""
    cases = json.loads(cases_file.read_text())
    tok = load_tokenizer(tok_name, shared)
    engine = load_engine(engine_name, tok, len(tok))
    out: dict[str, float | None] = {}
    for case in cases:
        best = None
        for _ in range(repeats):
            t = time.perf_counter()
            try:
                engine.compile(case["schema"])
            except Exception:  # noqa: BLE001 - a peer's refusal of a schema: reported as "-"
                best = None
                break
            dt = (time.perf_counter() - t) * 1e3
            best = dt if best is None else min(best, dt)
        out[case["id"]] = best
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokenizer", default="smollm2")
    ap.add_argument("--engines", default="structgen,xgrammar,llguidance")
    ap.add_argument("--per-subset", type=int, default=12)
    ap.add_argument("--top", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "compile_large.json")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--cases", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.tokenizer, args.shared, args.cases, args.repeats)))
        return
    corpus = build_corpus(args.shared, args.per_subset, 1)
    cases = sorted(corpus, key=lambda c: -len(json.dumps(c["schema"])))[: args.top]
    engines = [e for e in args.engines.split(",") if e]
    best: dict[str, dict[str, float | None]] = {e: {} for e in engines}
    with tempfile.TemporaryDirectory() as tmp:
        cases_file = Path(tmp) / "cases.json"
        cases_file.write_text(json.dumps([{"id": c["id"], "schema": c["schema"]} for c in cases]))
        for run in range(args.runs):
            order = engines[run % len(engines):] + engines[: run % len(engines)]  # each run starts elsewhere
            for e in order:
                cmd = [sys.executable, __file__, "--worker", e, "--cases", str(cases_file), "--tokenizer", args.tokenizer,
                       "--repeats", str(args.repeats), "--shared", str(args.shared)]
                done = subprocess.run(cmd, capture_output=True, text=True, check=False)
                if done.returncode != 0:
                    print(f"{e}: worker failed: {done.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
                    continue
                got = json.loads(done.stdout.strip().splitlines()[-1])
                for cid, ms in got.items():
                    old = best[e].get(cid)
                    best[e][cid] = ms if old is None else (old if ms is None else min(old, ms))
                print(f"run {run + 1}/{args.runs} {e} done", file=sys.stderr)
    rows = []
    for c in cases:
        row = {"id": c["id"], "schema_bytes": len(json.dumps(c["schema"]))}
        row.update({e: (None if best[e].get(c["id"]) is None else round(best[e][c["id"]], 2)) for e in engines})
        rows.append(row)
    peers = [e for e in engines if e != "structgen"]
    header = "| schema | JSON bytes | " + " | ".join(engines) + " | structgen ÷ each peer (" + " / ".join(peers) + ") |"
    lines = [f"largest {len(cases)} of the wide sample, compile ms (fastest of {args.repeats} x {args.runs}), "
             f"{args.tokenizer}", "", header, "|" + "---|" * (len(engines) + 3)]
    for r in rows:
        ratios = [f"{r['structgen'] / r[p]:.2f}" if r.get("structgen") and r.get(p) else "-" for p in peers]
        cells = [("-" if r[e] is None else f"{r[e]:.1f}") for e in engines]
        lines.append(f"| {r['id'].split('/')[-1]} | {r['schema_bytes']:,} | " + " | ".join(cells) + " | "
                     + " / ".join(ratios) + " |")
    print("\n".join(lines))
    args.out.write_text(json.dumps({
        "command": "python bench/compile_large.py " + " ".join(sys.argv[1:]),
        "tokenizer": args.tokenizer, "per_subset": args.per_subset, "top": args.top, "repeats": args.repeats,
        "runs": args.runs,
        "machine": {"python": platform.python_version(), "processor": platform.machine(), "cpus": os.cpu_count()},
        "rows": rows,
    }, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
