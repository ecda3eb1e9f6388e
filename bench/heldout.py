"""A few schemas at a time, each engine in a fresh process: the shape of an outside check.

    python bench/heldout.py [--tokenizer smollm2] [--schemas 8] [--draws 10]

Each draw takes ``--schemas`` MaskBench schemas at random (seeded by the draw's number) from
the wide sample (12 per subset) less the main benchmark corpus (``bench/masks.py``'s 3 per
subset), schemas every engine compiles. Each engine runs the draw in a fresh process (the
tokenizer loaded and the engine prepared first, then one full garbage collection): for each
schema in turn it compiles, then walks the schema's first valid instance filling the mask
before every token (the *first pass*), then walks it again (*warm*). Per engine and draw:

* compile: the median of the schemas' compile times;
* first pass: the median over the schemas of each schema's median fill;
* first-pass p99: the median over the schemas of each schema's 99th-percentile fill;
* worst: the largest first-pass fill of the draw;
* warm: the median of every warm fill.

A draw is one run of one process per engine, as an outside check on schemas it alone has
would measure; with few schemas its figures move with the draw and the machine, so the
table gives every draw's ratios of structgen to the best peer and how many draws each one
is at most 1. Writes bench/results/heldout.json.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ENGINES = ("structgen", "xgrammar", "llguidance")
STATS = ("compile_ms", "first_pass_us", "first_pass_p99_us", "worst_us", "warm_us")


def worker(engine_name: str, tok_name: str, shared: Path, cases_file: Path) -> None:
    from bench.compile_mask import load_tokenizer
    from bench.engines import load_engine

    cases = json.loads(cases_file.read_text())
    tok = load_tokenizer(tok_name, shared)
    engine = load_engine(engine_name, tok, len(tok))
    gc.collect()  # (the start-up's objects scanned here, not in the first timed compile)
    out = []
    for case in cases:
        rec: dict = {"id": case["id"]}
        try:
            t = time.perf_counter()
            compiled = engine.compile(case["schema"])
            rec["compile_ms"] = (time.perf_counter() - t) * 1e3
        except Exception as e:  # noqa: BLE001 - a refusal is recorded; the draw skips the schema
            rec["error"] = f"{type(e).__name__}: {str(e)[:120]}"
            out.append(rec)
            continue
        ids = tok.encode(case["texts"][0], add_special_tokens=False)
        for kind in ("first", "warm"):
            m = engine.matcher(compiled)
            bitmask = engine.new_bitmask()
            fills = []
            for token in ids:
                t0 = time.perf_counter_ns()
                engine.fill(m, bitmask)
                fills.append((time.perf_counter_ns() - t0) / 1e3)
                if not engine.accept(m, token):
                    rec["rejected"] = True
                    break
            rec[kind] = fills
        out.append(rec)
    print(json.dumps(out))


def p99(values: list[float]) -> float:
    v = sorted(values)
    return v[min(len(v) - 1, int(0.99 * len(v)))]


def stats(recs: list[dict]) -> dict[str, float]:
    return {
        "compile_ms": statistics.median(r["compile_ms"] for r in recs),
        "first_pass_us": statistics.median(statistics.median(r["first"]) for r in recs),
        "first_pass_p99_us": statistics.median(p99(r["first"]) for r in recs),
        "worst_us": max(max(r["first"]) for r in recs),
        "warm_us": statistics.median([f for r in recs for f in r["warm"]]),
    }


def run_engine(engine: str, args: argparse.Namespace, cases: list[dict], tmp: Path) -> dict[str, dict]:
    tmp.write_text(json.dumps(cases))
    proc = subprocess.run([sys.executable, __file__, "--worker", engine, "--tokenizer", args.tokenizer,
                           "--shared", args.shared, "--cases", str(tmp)], capture_output=True, text=True,
                          timeout=args.timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{engine} worker failed: {proc.stderr[-800:]}")
    return {r["id"]: r for r in json.loads(proc.stdout.strip().splitlines()[-1])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokenizer", default="smollm2")
    ap.add_argument("--schemas", type=int, default=8)
    ap.add_argument("--draws", type=int, default=10)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--shared", default=str(ROOT.parent / "shared" / "data"))
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "heldout.json"))
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--cases", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.tokenizer, Path(args.shared), Path(args.cases))
        return

    from bench.masks import build_corpus

    shared = Path(args.shared)
    main_ids = {c["id"] for c in build_corpus(shared, 3, 2)}
    pool = [c for c in build_corpus(shared, 12, 1) if c["id"] not in main_ids]
    tmp = Path(args.out).with_suffix(".cases.tmp")
    draws = []
    for draw in range(args.draws):
        rng = random.Random(draw)
        picked = rng.sample(pool, min(len(pool), args.schemas + 6))  # spares for refusals
        res = {e: run_engine(e, args, picked, tmp) for e in ENGINES}
        kept = [c["id"] for c in picked
                if all("error" not in res[e][c["id"]] and "rejected" not in res[e][c["id"]] for e in ENGINES)]
        kept = kept[: args.schemas]
        figures = {e: stats([res[e][i] for i in kept]) for e in ENGINES}
        ratios = {s: figures["structgen"][s] / min(figures[e][s] for e in ENGINES if e != "structgen")
                  for s in STATS}
        draws.append({"draw": draw, "schemas": kept, "figures": figures, "ratio_to_best_peer": ratios})
        print(f"draw {draw + 1}/{args.draws}: " + ", ".join(f"{s} {ratios[s]:.2f}" for s in STATS), flush=True)
    tmp.unlink(missing_ok=True)
    held = {s: sum(d["ratio_to_best_peer"][s] <= 1 for d in draws) for s in STATS}
    median = {s: statistics.median(d["ratio_to_best_peer"][s] for d in draws) for s in STATS}
    result = {
        "command": "python bench/heldout.py " + " ".join(sys.argv[1:]),
        "tokenizer": args.tokenizer, "schemas_per_draw": args.schemas, "draws": draws,
        "draws_at_most_1": held, "median_ratio": median,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                    "load_1min": os.getloadavg()[0]},
    }
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(f"\n{args.draws} draws of {args.schemas} schemas, {args.tokenizer}, each engine in a fresh process; "
          f"structgen ÷ best peer\n")
    print("| figure | " + " | ".join(f"draw {d['draw'] + 1}" for d in draws) + " | median | draws ≤ 1 |")
    print("|---|" + "---:|" * (len(draws) + 2))
    for s in STATS:
        print(f"| {s} | " + " | ".join(f"{d['ratio_to_best_peer'][s]:.2f}" for d in draws)
              + f" | {median[s]:.2f} | {held[s]} of {len(draws)} |")
    print("\nmedians of the draws' own figures:")
    for e in ENGINES:
        print(f"  {e:11s} " + ", ".join(f"{s} {statistics.median(d['figures'][e][s] for d in draws):.2f}"
                                        for s in STATS))


if __name__ == "__main__":
    main()
