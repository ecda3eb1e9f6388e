"""A batch of distinct grammars filled in one call: 1 thread vs 2, first visit and warm.

    python bench/batch.py [--tokenizer smollm2|llama3] [--batch 64] [--repeats 3]

Corpus: ``--batch`` distinct MaskBench schemas (the first of each subset, then the second,
...; each with a valid instance written as compact JSON in property order and tokenized).
One decoding step of the batch is one ``fill_next_token_bitmasks`` call over every row,
then each row accepts its next token (not timed); a row whose text has ended accepts a stop
token and fills stop-token rows from then on, as a serving batch does.

Arms, on the same grammars:

* ``first visit``: the grammars are compiled afresh (lazy masks) before the walk, so every
  configuration's mask is computed during the walk: the fill time of a new request;
* ``warm``: the same walk again: every mask is memoised, the fill is lookups and copies;
* ``loop``: the same steps with ``GrammarMatcher.fill_next_token_bitmask`` row by row;
* ``first request``: one request at a time, each compiled afresh, ``--prefill-ms`` of
  pause after compiling (the model's prefill), then its path: the summed fill time of all
  requests with ``precompute="lazy"`` against ``precompute="background"``;
* ``two processes`` (``--control-rounds``, 0 to skip): the machine's own ceiling for the
  first visit's speedup. Two processes each compile the batch and walk it first visit on one
  thread, in rounds: both at once, or one alone while the other waits (alternately). A walk
  that takes ``a`` alone and ``b`` beside the other gives two cores doing this work at once
  ``2a/b`` times one core's throughput, with no thread of either process waiting for the
  other: what two threads sharing one walk could reach at best.

Each arm runs ``--repeats`` times alternating 1 and 2 threads (fresh grammars for each
first-visit run, garbage collected before each walk); the median of the summed fill time of
the walk is reported, and the speedup of 2 threads over 1, both as the ratio of those medians
and as the ratio of the step times' medians summed over the steps (each step's median over
the runs: robust to another job stalling a thread in part of a run). Writes bench/results/batch.json and prints a table.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Literal

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.compile_mask import load_tokenizer  # noqa: E402
from bench.masks import build_corpus  # noqa: E402
from structgen import CompiledGrammar, GrammarCompiler, TokenizerInfo, fill_next_token_bitmasks  # noqa: E402
from structgen.runtime.bitmask import bitmask_words  # noqa: E402


def pick(shared: Path, batch: int) -> list[dict]:
    """``batch`` schemas, spread over the MaskBench subsets (round robin)."""
    per = 1
    while True:
        corpus = build_corpus(shared, per, 1)
        by_subset: dict[str, list[dict]] = {}
        for case in corpus:
            by_subset.setdefault(case["id"].split("/")[0], []).append(case)
        ordered = [c for k in range(per) for cases in by_subset.values() if k < len(cases) for c in [cases[k]]]
        if len(ordered) >= batch or per > 64:
            return ordered[:batch]
        per *= 2


def compile_all(info: TokenizerInfo, trie, cases: list[dict]) -> list[CompiledGrammar | None]:
    compiler = GrammarCompiler(info, cache_size=0)
    compiler._trie = trie  # the vocabulary trie is per tokenizer: built once for all arms
    out: list[CompiledGrammar | None] = []
    for case in cases:
        try:
            out.append(compiler.compile_json_schema(case["schema"]))
        except Exception:  # noqa: BLE001 - schemas structgen refuses are left out of the batch
            out.append(None)
    return out


def walk(grammars: list, paths: list[list[int]], words: int, stop: int, *, threads: int, loop: bool,
         max_steps: int) -> list[float]:
    """One batch decoding walk of at most ``max_steps`` steps: the seconds of each step's fill."""
    # the garbage of earlier repeats (64 compiled grammars each) is collected before the walk:
    # otherwise a full collection, hundreds of milliseconds with that heap, falls into
    # whichever timed step happens to trip it
    gc.collect()
    matchers = [g.matcher() for g in grammars]
    bitmask = np.zeros((len(matchers), words), np.int32)
    steps = min(max(len(p) for p in paths) + 1, max_steps)
    spent = []
    for step in range(steps):
        t0 = time.perf_counter()
        if loop:
            for r, m in enumerate(matchers):
                m.fill_next_token_bitmask(bitmask, r)
        else:
            fill_next_token_bitmasks(matchers, bitmask, threads=threads)
        spent.append(time.perf_counter() - t0)
        for m, path in zip(matchers, paths):
            tok = path[step] if step < len(path) else stop
            if not m.is_terminated():
                ok = m.accept_token(tok)
                assert ok, f"token {tok} rejected at step {step}"
    return spent


def first_requests(info: TokenizerInfo, trie, cases: list[dict], paths: list[list[int]], words: int,
                   *, precompute: Literal["lazy", "background"], prefill_s: float,
                   max_steps: int) -> list[float]:
    """One request at a time: compile, wait ``prefill_s`` (the model's prefill), then walk the
    path filling one row per step. Returns each request's summed fill time."""
    gc.collect()  # (as in walk)
    compiler = GrammarCompiler(info, cache_size=0, precompute=precompute)
    compiler._trie = trie
    out = []
    bitmask = np.zeros((1, words), np.int32)
    for case, path in zip(cases, paths):
        g = compiler.compile_json_schema(case["schema"])
        time.sleep(prefill_s)
        m = g.matcher()
        spent = 0.0
        for tok in path[:max_steps]:
            t0 = time.perf_counter()
            m.fill_next_token_bitmask(bitmask, 0)
            spent += time.perf_counter() - t0
            assert m.accept_token(tok)
        out.append(spent)
        if g.background is not None:
            g.background.cancel()  # the next request's grammar gets the worker
    return out


def _control_worker(me: int, tok_name: str, shared: str, batch: int, rounds: int, max_steps: int,
                    barrier, out) -> None:
    """One process of the two-process control: per round, compile the batch afresh, wait for
    the other, walk it first visit on one thread (unless it is the other's round alone), wait
    again; puts (round, walked together, seconds) per walk on ``out``."""
    tok = load_tokenizer(tok_name, Path(shared))
    info = TokenizerInfo.from_huggingface(tok)
    trie = GrammarCompiler(info).trie
    cases = pick(Path(shared), batch * 2)
    kept = [(c, g) for c, g in zip(cases, compile_all(info, trie, cases)) if g is not None][:batch]
    cases = [c for c, _ in kept]
    paths = [tok.encode(c["texts"][0], add_special_tokens=False) for c in cases]
    words, stop = bitmask_words(info.vocab_size), info.stop_token_ids[0]
    for r in range(rounds):
        fresh = compile_all(info, trie, cases)
        walks, together = control_round(me, r)
        barrier.wait()
        if walks:
            spent = sum(walk(fresh, paths, words, stop, threads=1, loop=False, max_steps=max_steps))
            out.put((r, together, spent))
        barrier.wait()


def control_round(me: int, r: int) -> tuple[bool, bool]:
    """Whether process ``me`` (0 or 1) walks in round ``r`` of the two-process control, and
    whether both do: even rounds both at once, odd rounds one alone, the two taking turns."""
    if r % 2 == 0:
        return True, True
    return (r // 2) % 2 == me, False


def control_summary(walks: list[tuple[int, bool, float]]) -> dict:
    """The two-process control's figures from its walks ``(round, together, seconds)``: the
    median walk alone ``a`` and beside the other ``b``, and two cores' throughput ``2a/b``
    (in units of one core's)."""
    alone = [s for _, together, s in walks if not together]
    together = [s for _, t, s in walks if t]
    a, b = statistics.median(alone), statistics.median(together)
    return {"alone_s": alone, "together_s": together, "alone_s_median": a, "together_s_median": b,
            "two_core_throughput": 2 * a / b}


def two_process_control(args: argparse.Namespace) -> dict:
    """The ``two processes`` arm (see the module's docstring)."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")  # (a fork would share the parent's pool and tokenizer threads)
    barrier, out = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_control_worker, args=(k, args.tokenizer, args.shared, args.batch,
                                                       args.control_rounds, args.max_steps, barrier, out))
             for k in range(2)]
    for p in procs:
        p.start()
    expected = sum(control_round(k, r)[0] for r in range(args.control_rounds) for k in range(2))
    walks = [out.get(timeout=600) for _ in range(expected)]
    for p in procs:
        p.join()
    return {"rounds": args.control_rounds, **control_summary(walks)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokenizer", default="smollm2")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-steps", type=int, default=128,
                    help="steps walked (longer texts stop there; shorter ones end with a stop token)")
    ap.add_argument("--prefill-ms", type=float, default=50.0,
                    help="background arm: pause between compiling a request's grammar and its first mask")
    ap.add_argument("--control-rounds", type=int, default=12,
                    help="rounds of the two-process control (half of them both processes walking); 0: skip it")
    ap.add_argument("--shared", default=str(ROOT.parent / "shared" / "data"))
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "batch.json"))
    args = ap.parse_args()
    shared = Path(args.shared)
    tok = load_tokenizer(args.tokenizer, shared)
    info = TokenizerInfo.from_huggingface(tok)
    trie = GrammarCompiler(info).trie
    cases = pick(shared, args.batch * 2)  # spares for schemas that fail to compile
    grammars = compile_all(info, trie, cases)
    kept = [(c, g) for c, g in zip(cases, grammars) if g is not None][: args.batch]
    cases = [c for c, _ in kept]
    paths = [tok.encode(c["texts"][0], add_special_tokens=False) for c in cases]
    words = bitmask_words(info.vocab_size)
    stop = info.stop_token_ids[0]
    # per arm and thread count, one list of step times per run
    results: dict[str, dict[int, list[list[float]]]] = {"first_visit": {1: [], 2: []}, "warm": {1: [], 2: []},
                                                         "loop_warm": {1: []}}
    for rep in range(args.repeats):
        for threads in ((1, 2) if rep % 2 == 0 else (2, 1)):
            fresh = compile_all(info, trie, cases)
            results["first_visit"][threads].append(
                walk(fresh, paths, words, stop, threads=threads, loop=False, max_steps=args.max_steps))
            results["warm"][threads].append(
                walk(fresh, paths, words, stop, threads=threads, loop=False, max_steps=args.max_steps))
        results["loop_warm"][1].append(walk(fresh, paths, words, stop, threads=1, loop=True, max_steps=args.max_steps))
        print(f"repeat {rep + 1}/{args.repeats} done", file=sys.stderr)

    requests: dict[str, list[float]] = {"lazy": [], "background": []}
    orders: tuple[tuple[Literal["lazy", "background"], ...], ...] = (("lazy", "background"), ("background", "lazy"))
    for rep in range(args.repeats):
        for precompute in orders[rep % 2]:
            requests[precompute].append(sum(first_requests(
                info, trie, cases, paths, words, precompute=precompute, prefill_s=args.prefill_ms / 1e3,
                max_steps=args.max_steps)))

    control = two_process_control(args) if args.control_rounds >= 2 else None
    steps = len(results["warm"][1][0])

    def run_median(runs: list[list[float]]) -> float:
        return statistics.median(sum(run) for run in runs)

    # Each step's median over the runs, summed: on a shared 2-core machine another job's time
    # slice stalls whichever thread it lands on, which costs a 2-thread step its whole second
    # half but a 1-thread step nothing when it lands on the idle core; per-step medians drop
    # those stalls where whole-run medians keep any that hit most runs.
    def step_medians(runs: list[list[float]]) -> float:
        return sum(statistics.median(run[s] for run in runs) for s in range(steps))

    rows = []
    for arm, per in results.items():
        for threads, runs in per.items():
            med = run_median(runs)
            rows.append({"arm": arm, "threads": threads, "fill_s_median": med,
                         "fill_s_runs": [sum(run) for run in runs], "fill_s_step_medians": step_medians(runs),
                         "per_step_ms": med / steps * 1e3, "per_row_us": med / steps / len(cases) * 1e6})
    speedup = {arm: run_median(results[arm][1]) / run_median(results[arm][2]) for arm in ("first_visit", "warm")}
    speedup_steps = {arm: step_medians(results[arm][1]) / step_medians(results[arm][2])
                     for arm in ("first_visit", "warm")}
    out = {
        "command": "python bench/batch.py " + " ".join(sys.argv[1:]),
        "tokenizer": args.tokenizer,
        "vocab_size": info.vocab_size,
        "batch": len(cases),
        "steps": steps,
        "tokens": sum(len(p) for p in paths),
        "schemas": [c["id"] for c in cases],
        "machine": {"python": platform.python_version(), "processor": platform.processor(),
                    "cpus": os.cpu_count(), "load_1min": os.getloadavg()[0]},
        "rows": rows,
        "speedup_2_threads_over_1": speedup,
        "speedup_2_threads_over_1_step_medians": speedup_steps,
        "first_request_fill_s": {k: {"median": statistics.median(v), "runs": v} for k, v in requests.items()},
        "prefill_ms": args.prefill_ms,
        "two_process_control": control,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(f"\nbatch of {len(cases)} distinct grammars, {args.tokenizer} ({info.vocab_size} tokens), "
          f"{steps} steps, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}\n")
    print("| arm | threads | fill per step (ms) | per row (µs) |")
    print("|---|---:|---:|---:|")
    for r in rows:
        print(f"| {r['arm']} | {r['threads']} | {r['per_step_ms']:.3f} | {r['per_row_us']:.2f} |")
    print(f"\n2 threads over 1 (medians of whole runs): first visit {speedup['first_visit']:.2f}x, "
          f"warm {speedup['warm']:.2f}x")
    print(f"2 threads over 1 (each step's median over the runs, summed): first visit "
          f"{speedup_steps['first_visit']:.2f}x, warm {speedup_steps['warm']:.2f}x")
    if control is not None:
        print(f"two processes, each one thread walking the batch first visit: "
              f"{control['alone_s_median'] * 1e3:.1f} ms alone, {control['together_s_median'] * 1e3:.1f} ms "
              f"at once: two cores give {control['two_core_throughput']:.2f}x one core's throughput here")
    lazy, bg = (statistics.median(requests[k]) for k in ("lazy", "background"))
    print(f"\none request at a time, {args.prefill_ms:.0f} ms prefill after compiling: fills of all {len(cases)} "
          f"first requests {lazy * 1e3:.1f} ms lazy, {bg * 1e3:.1f} ms with precompute=\"background\"")


if __name__ == "__main__":
    main()
