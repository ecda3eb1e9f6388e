"""Compile time and per-token mask time, structgen vs XGrammar, llguidance and outlines-core.

    python bench/masks.py [--tokenizers smollm2,llama3] [--per-subset 8] [--engines ...] [--rounds 3]

Corpus: the first ``--per-subset`` schemas (with a valid instance) of every MaskBench subset
in ``../shared/data/maskbench``; each valid instance (up to ``--paths``) is written as
compact JSON in the schema's property order (``structgen.schema.canonical.canonical_json``) and
tokenized by the tokenizer under test. Every engine compiles the same schemas (compact
separators, no free whitespace) and, along every path, fills the next-token bitmask before
each token and then accepts the token, as a decoding loop does. Mask figures are per fill,
the first visit of a state included (that is what a user's first request pays). Fills during which
CPython ran a full garbage collection are counted and reported beside the raw figures.

Passes are reported apart: the *first pass* is the first path walked right after the schema
compiled (every state is new: what one request with a new schema pays), *later* passes walk
the other paths, and the *warm* pass walks the first path again (every state seen). The
*per-request total* is compile + every fill and accept of the first pass.

Each engine runs in its own worker process (``--worker``), one engine at a time, so that one
engine's caches, threads and memory do not touch another's; a schema that does not compile
within ``--timeout`` seconds is recorded as a timeout and the worker is restarted after it.
Peak RSS is the worker's (tokenizer + all compiled grammars of the corpus).

``--rounds N`` runs every engine N times, each round in fresh processes and starting with
another engine; each figure is then its median over the rounds (one round's figures move by
tens of percent on a shared machine) and the rounds' own ratios are kept beside it.

Ratios compare structgen with the best peer on the schemas every engine compiled. Writes
bench/results/masks.json and prints a markdown table naming the machine.
"""
from __future__ import annotations

import argparse
import gc
import gzip
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.compile_mask import load_tokenizer  # noqa: E402
from bench.engines import ENGINES, load_engine  # noqa: E402


def build_corpus(shared: Path, per_subset: int, paths: int) -> list[dict]:
    from structgen.schema.canonical import canonical_json

    corpus = []
    for file in sorted((shared / "maskbench").glob("*.jsonl.gz")):
        taken = 0
        with gzip.open(file, "rt") as f:
            for line in f:
                if taken >= per_subset:
                    break
                rec = json.loads(line)
                texts = []
                for test in rec["tests"]:
                    if test["valid"] and len(texts) < paths:
                        try:
                            texts.append(canonical_json(test["data"], rec["schema"]))
                        except Exception:  # noqa: BLE001 - canonical order is best effort; plain compact JSON then
                            texts.append(json.dumps(test["data"], ensure_ascii=False, separators=(",", ":")))
                if texts and isinstance(rec["schema"], dict):
                    corpus.append({"id": f"{file.name.split('.')[0]}/{rec['id']}", "schema": rec["schema"], "texts": texts})
                    taken += 1
    return corpus


# ---------------------------------------------------------------- worker (one engine)

def worker(engine_name: str, tok_name: str, shared: Path, corpus_file: Path, start: int, out: Path) -> None:
    corpus = json.loads(corpus_file.read_text())
    tok = load_tokenizer(tok_name, shared)
    vocab = len(tok)

    def emit(rec: dict) -> None:
        with out.open("a") as f:
            f.write(json.dumps(rec) + "\n")

    # CPython's full collections (generation 2) scan every tracked object of the process:
    # with torch and transformers imported ~224K objects, ~100 ms. Heap growth triggers one
    # wherever an allocation trips the threshold, a fill included; they are recorded so that
    # the tables can say which fills held one (the raw figures keep them).
    full_gc_ns: list[int] = []
    gc_started = [0]

    def on_gc(phase: str, info: dict) -> None:
        if info.get("generation") == 2:
            if phase == "start":
                gc_started[0] = time.perf_counter_ns()
            else:
                full_gc_ns.append(time.perf_counter_ns() - gc_started[0])

    gc.callbacks.append(on_gc)
    t0 = time.perf_counter()
    engine = load_engine(engine_name, tok, vocab)
    emit({"event": "ready", "prep_s": time.perf_counter() - t0, "version": engine.version,
          "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024})
    # The first full collection after start-up scans the objects the imports and the
    # tokenizer made (about 100 ms); it runs here, in every engine's worker alike, not inside
    # whichever timed compile or fill next trips the threshold. Later ones stay in the figures.
    gc.collect()
    for i in range(start, len(corpus)):
        case = corpus[i]
        emit({"event": "start", "i": i})
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        rec = {"event": "case", "i": i, "id": case["id"]}
        try:
            t = time.perf_counter()
            compiled = engine.compile(case["schema"])
            rec["compile_s"] = time.perf_counter() - t
        except Exception as e:  # noqa: BLE001 - any refusal of a peer is recorded, not raised
            rec["error"] = f"{type(e).__name__}: {str(e)[:160]}"
            emit(rec)
            continue
        masks, rejected, gc_fills = [], [], []
        passes = {"first": [], "later": [], "warm": []}
        first_total_us = rec["compile_s"] * 1e6
        bitmask = engine.new_bitmask()
        walks = [("first", case["texts"][0])] + [("later", t) for t in case["texts"][1:]] + [("warm", case["texts"][0])]
        for kind, text in walks:
            m = engine.matcher(compiled)
            ids = tok.encode(text, add_special_tokens=False)
            for step, token in enumerate(ids):
                n_gc = len(full_gc_ns)
                t = time.perf_counter_ns()
                engine.fill(m, bitmask)
                fill_us = (time.perf_counter_ns() - t) / 1e3
                passes[kind].append(fill_us)
                if kind != "warm":
                    masks.append(fill_us)
                    if len(full_gc_ns) > n_gc:
                        gc_fills.append([len(masks) - 1, sum(full_gc_ns[n_gc:]) / 1e3])
                t = time.perf_counter_ns()
                ok = engine.accept(m, token)
                if kind == "first":
                    first_total_us += fill_us + (time.perf_counter_ns() - t) / 1e3
                if not ok:
                    if kind != "warm":
                        rejected.append(step)
                    break
        rec.update(mask_us=masks, rejected=rejected, full_gc_fills=gc_fills, first_pass_mask_us=passes["first"],
                   later_mask_us=passes["later"], warm_mask_us=passes["warm"], request_total_us=first_total_us,
                   rss_growth_mb=(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) / 1024)
        emit(rec)
    emit({"event": "done", "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024})


def _complete_lines(path: Path) -> list[str]:
    """The lines the worker has finished writing (a record being written has no newline yet)."""
    text = path.read_text()
    return text[:text.rfind("\n") + 1].splitlines()


def run_engine(engine: str, tok_name: str, shared: Path, corpus_file: Path, n: int, timeout: float) -> dict:
    """Runs the worker, restarting it past any schema that outlives ``timeout``."""
    out = Path(tempfile.mkstemp(suffix=f".{engine}.jsonl")[1])
    start, records, ready, peak = 0, [], None, 0.0
    while start < n:
        cmd = [sys.executable, __file__, "--worker", engine, "--tokenizer-name", tok_name, "--shared", str(shared),
               "--corpus", str(corpus_file), "--start", str(start), "--out", str(out)]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        seen, last_change, current = 0, time.monotonic(), None
        while proc.poll() is None:
            time.sleep(0.05)
            lines = _complete_lines(out)
            if len(lines) != seen:
                for line in lines[seen:]:
                    rec = json.loads(line)
                    if rec["event"] == "start":
                        current = rec["i"]
                    elif rec["event"] == "case":
                        records.append(rec)
                        current = None
                    elif rec["event"] == "ready":
                        ready = ready or rec
                    elif rec["event"] == "done":
                        peak = max(peak, rec["rss_mb"])
                seen, last_change = len(lines), time.monotonic()
            elif current is not None and time.monotonic() - last_change > timeout:
                proc.kill()
                proc.wait()
                records.append({"event": "case", "i": current, "error": f"timeout: no result in {timeout:.0f} s"})
                break
        lines = _complete_lines(out)
        for line in lines[seen:]:
            rec = json.loads(line)
            if rec["event"] == "case":
                records.append(rec)
            elif rec["event"] == "done":
                peak = max(peak, rec["rss_mb"])
            elif rec["event"] == "ready":
                ready = ready or rec
        if ready is None:
            err = proc.stderr.read() if proc.stderr else ""
            return {"skipped": (err.strip().splitlines() or ["worker failed"])[-1]}
        out.write_text("")
        done = {r["i"] for r in records}
        start = max(done) + 1 if done else n
        if proc.returncode not in (0, None, -9):
            err = proc.stderr.read() if proc.stderr else ""
            records.append({"event": "case", "i": start, "error": f"crash: {err.strip()[-160:]}"})
            start += 1
    out.unlink(missing_ok=True)
    return {"version": ready["version"], "prep_s": ready["prep_s"], "peak_rss_mb": peak,
            "cases": {r["i"]: r for r in records}}


# ---------------------------------------------------------------- aggregation

def pct(xs, qs=(50, 90, 99, 100)) -> dict:
    if not len(xs):
        return {}
    return {("max" if q == 100 else f"p{q}"): round(float(np.percentile(xs, q)), 3) for q in qs}


def _median_of_schemas(per_schema: list[list[float]]) -> dict:
    """Each quantile of each schema's fills, then the median of that quantile over schemas."""
    rows = [pct(xs) for xs in per_schema if xs]
    if not rows:
        return {}
    return {q: round(float(np.median([r[q] for r in rows])), 2) for q in rows[0]}


def summarise(results: dict, corpus: list[dict]) -> dict:
    engines = [e for e in results if "cases" in results[e]]
    common = [i for i in range(len(corpus))
              if all("compile_s" in results[e]["cases"].get(i, {}) and not results[e]["cases"][i]["rejected"]
                     for e in engines)]
    out = {}
    for e in engines:
        cases = results[e]["cases"]
        compiled = [c for c in cases.values() if "compile_s" in c]
        out[e] = {
            "version": results[e]["version"],
            "tokenizer_prep_s": round(results[e]["prep_s"], 3),
            "peak_rss_mb": round(results[e]["peak_rss_mb"], 1),
            "max_rss_growth_one_schema_mb": round(max((c.get("rss_growth_mb", 0) for c in compiled), default=0), 1),
            "compiled": len(compiled),
            "failed": {c.get("id", str(i)): c["error"] for i, c in cases.items() if "error" in c},
            "valid_path_rejected": sorted(c["id"] for c in compiled if c["rejected"]),
            "compile_ms_common": pct([cases[i]["compile_s"] * 1e3 for i in common]),
            "mask_us_common": pct([x for i in common for x in cases[i]["mask_us"]]),
            # fills during which CPython ran a full collection: [µs of the fill, µs of the collection]
            "full_gc_fills_common": [[cases[i]["mask_us"][k], g] for i in common
                                     for k, g in cases[i].get("full_gc_fills", [])],
            "mask_us_common_without_full_gc": pct([x for i in common for k, x in enumerate(cases[i]["mask_us"])
                                                   if k not in {f for f, _ in cases[i].get("full_gc_fills", [])}]),
            # the first path after compiling (all states new), the other paths, the first path again
            "first_pass_mask_us_common": pct([x for i in common for x in cases[i]["first_pass_mask_us"]]),
            # per schema, then the median over schemas: every schema counts once, however long
            # its path (the pooled figures above weigh a schema by its number of fills)
            "first_pass_per_schema_us_common": _median_of_schemas([cases[i]["first_pass_mask_us"] for i in common]),
            "later_mask_us_common": pct([x for i in common for x in cases[i]["later_mask_us"]]),
            "warm_mask_us_common": pct([x for i in common for x in cases[i]["warm_mask_us"]]),
            # compile + every fill and accept of the first pass: what one request with a new schema waits
            "request_total_ms_common": pct([cases[i]["request_total_us"] / 1e3 for i in common]),
            "compile_ms_own": pct([c["compile_s"] * 1e3 for c in compiled]),
            "mask_us_own": pct([x for c in compiled for x in c["mask_us"]]),
        }
    ratios = _ratios(out)
    if ratios:
        out["ratio_structgen_to_best_peer"] = ratios
    out["common_schemas"] = len(common)
    return out


_RATIO_METRICS = ("compile_ms_common", "mask_us_common", "first_pass_mask_us_common",
                  "first_pass_per_schema_us_common", "warm_mask_us_common", "request_total_ms_common")


def _ratios(out: dict) -> dict:
    """structgen ÷ the best peer, per metric and quantile."""
    peers = [e for e in out if e != "structgen" and isinstance(out[e], dict) and "compiled" in out[e]]
    if "structgen" not in out or not peers:
        return {}
    ratios = {}
    for metric in _RATIO_METRICS:
        for q in ("p50", "p90", "p99", "max"):
            best = min(out[p][metric].get(q, float("inf")) for p in peers)
            mine = out["structgen"][metric].get(q)
            ratios[f"{metric}.{q}"] = round(mine / best, 2) if mine is not None and best > 0 else None
    return ratios


def combine_rounds(rounds: list[dict]) -> dict:
    """One summary from several rounds of the same run: each figure (engine, metric,
    quantile) is its median over the rounds, and the ratios are taken between those medians.
    A round's figures move by tens of percent on a shared machine, every engine's alike or
    not; the median of three rounds is steadier than any one of them. The rounds' own
    ratios are kept (``ratio_per_round``) to show the spread."""
    if len(rounds) == 1:
        return rounds[0]
    out = {}
    for e, first in rounds[0].items():
        if not isinstance(first, dict) or "compiled" not in first:
            continue
        merged = dict(first)
        for key, val in first.items():
            if isinstance(val, dict) and val and set(val) <= {"p50", "p90", "p99", "max"}:  # a pct() figure
                merged[key] = {q: round(float(np.median([r[e][key][q] for r in rounds if q in r[e].get(key, {})])), 3)
                               for q in val}
        merged["tokenizer_prep_s"] = round(float(np.median([r[e]["tokenizer_prep_s"] for r in rounds])), 3)
        merged["peak_rss_mb"] = max(r[e]["peak_rss_mb"] for r in rounds)
        merged["full_gc_fills_common"] = [f for r in rounds for f in r[e]["full_gc_fills_common"]]
        out[e] = merged
    ratios = _ratios(out)
    if ratios:
        out["ratio_structgen_to_best_peer"] = ratios
        out["ratio_per_round"] = [_ratios(r) for r in rounds]
    out["common_schemas"] = rounds[0]["common_schemas"]
    out["rounds"] = len(rounds)
    return out


def table(tok_name: str, summary: dict) -> str:
    rounds = summary.get("rounds", 1)
    rows = [f"### {tok_name}: {summary['common_schemas']} schemas compiled by every engine"
            + (f"; each figure the median of {rounds} rounds" if rounds > 1 else ""),
            "| engine | compiled | prep s | compile ms p50/p90/p99/max | mask µs p50/p90/p99/max | "
            "first-pass mask µs p50/p90/p99/max | warm mask µs p50/p90/p99/max | request total ms p50/p90/p99/max | "
            "fills with a full GC (ms of GC) | mask max without them µs | peak RSS MB |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    for e, s in summary.items():
        if not isinstance(s, dict) or "compiled" not in s:
            continue
        c, m = s["compile_ms_common"], s["mask_us_common"]
        fmt = lambda d: "/".join(f"{d.get(q, float('nan')):.3g}" for q in ("p50", "p90", "p99", "max"))  # noqa: E731
        gcs = ", ".join(f"{g / 1e3:.0f}" for _, g in s["full_gc_fills_common"]) or "none"
        rows.append(f"| {e} {s['version']} | {s['compiled']} | {s['tokenizer_prep_s']:.2f} | {fmt(c)} | {fmt(m)} | "
                    f"{fmt(s['first_pass_mask_us_common'])} | {fmt(s['warm_mask_us_common'])} | "
                    f"{fmt(s['request_total_ms_common'])} | "
                    f"{len(s['full_gc_fills_common'])} ({gcs}) | {s['mask_us_common_without_full_gc'].get('max', float('nan')):.3g} | "
                    f"{s['peak_rss_mb']:.0f} |")
    if "ratio_structgen_to_best_peer" in summary:
        rows.append("")
        rows.append("structgen ÷ best peer: " + ", ".join(f"{k} {v}" for k, v in summary["ratio_structgen_to_best_peer"].items()))
        for k, r in enumerate(summary.get("ratio_per_round", [])):
            keys = ("compile_ms_common.p50", "first_pass_mask_us_common.p50", "request_total_ms_common.p50",
                    "request_total_ms_common.p99")
            rows.append(f"round {k + 1}: " + ", ".join(f"{key} {r.get(key)}" for key in keys))
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizers", default="smollm2,llama3")
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--per-subset", type=int, default=8)
    ap.add_argument("--paths", type=int, default=2, help="valid instances walked per schema")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds one schema may take before it counts as a timeout")
    ap.add_argument("--rounds", type=int, default=1,
                    help="run every engine this many times (fresh processes); figures are medians over the rounds")
    ap.add_argument("--shared", default=str(ROOT.parent / "shared" / "data"))
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "masks.json"))
    ap.add_argument("--worker")
    ap.add_argument("--tokenizer-name")
    ap.add_argument("--corpus")
    ap.add_argument("--start", type=int, default=0)
    args = ap.parse_args()
    shared = Path(args.shared)
    if args.worker:
        worker(args.worker, args.tokenizer_name, shared, Path(args.corpus), args.start, Path(args.out))
        return
    if not (shared / "maskbench").is_dir():
        print(f"masks: {shared / 'maskbench'} not found; this bench needs the MaskBench corpus")
        return
    corpus = build_corpus(shared, args.per_subset, args.paths)
    corpus_file = Path(tempfile.mkstemp(suffix=".corpus.json")[1])
    corpus_file.write_text(json.dumps(corpus))
    report = {"machine": {"processor": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                          "python": platform.python_version(), "platform": platform.platform()},
              "corpus": {"schemas": len(corpus), "per_subset": args.per_subset, "paths_per_schema": args.paths,
                         "ids": [c["id"] for c in corpus]},
              "timeout_s": args.timeout, "rounds": args.rounds, "tokenizers": {}}
    tables = []
    engines = args.engines.split(",")
    for tok_name in args.tokenizers.split(","):
        rounds = []
        for rnd in range(args.rounds):
            results = {}
            # each round starts with another engine, so that a slow stretch of the machine
            # does not always fall on the same one (the summary lists engines in --engines order)
            for engine in engines[rnd % len(engines):] + engines[:rnd % len(engines)]:
                t0 = time.perf_counter()
                results[engine] = run_engine(engine, tok_name, shared, corpus_file, len(corpus), args.timeout)
                note = results[engine].get("skipped", f"{time.perf_counter() - t0:.0f} s")
                print(f"[{tok_name}] round {rnd + 1}/{args.rounds} {engine}: {note}", flush=True)
            results = {e: results[e] for e in engines}
            rounds.append(summarise(results, corpus))
        summary = combine_rounds(rounds)
        summary["skipped"] = {e: r["skipped"] for e, r in results.items() if "skipped" in r}
        report["tokenizers"][tok_name] = summary
        tables.append(table(tok_name, summary))
        print(tables[-1], flush=True)
    corpus_file.unlink(missing_ok=True)
    report["table_md"] = f"Machine: {report['machine']}\n\n" + "\n\n".join(tables)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
