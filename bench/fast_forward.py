"""Fast-forward decoding vs token-by-token constrained generation, SmolLM2 on CPU.

    python bench/fast_forward.py [--data ../shared/data] [--bfcl 20] [--maskbench 0] [--seed 0] [--max-new-tokens 96] [--repeats 2]

Tasks: the three example schemas (``examples/schemas``, the prompts of
``examples/hf_generate_json.py``) and a seeded sample of BFCL function-calling tasks
(round-robin over the categories, SmolLM2's ``<tool_call>`` format, strict tool sets where
they compile, lenient otherwise). Each task runs greedily on two paths:

* ``hf``: ``model.generate`` with the grammar's logits processor, one forward pass per token
  (what ``generate_json`` and ``ToolSet.generate`` run);
* ``ff``: ``structgen.generate`` (fast-forward: forced tokens ride in the pass of the token
  before them).

Each path runs *cold* (a fresh compile: masks and forced-token plans are computed as
decoding meets them, as on a first request), then ``--repeats`` times *warm* (the same
compiled grammar; paths alternated, the fastest run kept, since the CPU is shared). Reported: output tokens, forced share, forward passes, wall time,
validity (schema outputs: ``jsonschema``; calls: ``ToolSet.parse``), and whether the greedy
outputs equal (text, and token ids). Where the texts differ, the first differing token is classified: *forced* (``ff``
appended the canonical tokenization of forced text where the model, token by token, spelled
it differently: a different context from there on) or *sampled* (identical context, so
the float rounding of a multi-token pass flipped an argmax).

Writes ``bench/results/fast_forward.json`` and prints a markdown table.
"""
from __future__ import annotations

import argparse
import collections
import gzip
import json
import os
import platform
import random
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import jsonschema

import structgen
from structgen.errors import StructgenError
from structgen.integrations.hf import JSONSchemaLogitsProcessor, ToolCallLogitsProcessor, compiler_for
from structgen.integrations.hf_generate import chat_inputs, generate_constrained
from structgen.tools import SMOLLM2, ToolSet

DEFAULT_DATA = ROOT.parent / "shared" / "data"
SCHEMA_TASKS = [
    ("person.json", "Describe a fictional software engineer as a JSON object."),
    ("weather_call.json", "Call the weather tool for Paris in celsius for the next 3 days."),
    ("todo_list.json", "Make a short todo list for moving to a new flat."),
]


def bfcl_sample(data: Path, n: int, seed: int) -> list[dict[str, Any]]:
    with gzip.open(data / "bfcl" / "tasks.jsonl.gz", "rt", encoding="utf-8") as f:
        tasks = [json.loads(line) for line in f]
    by_cat: dict[str, list] = collections.defaultdict(list)
    for t in tasks:
        by_cat[t["category"]].append(t)
    rng = random.Random(seed)
    for v in by_cat.values():
        rng.shuffle(v)
    out, cats = [], sorted(by_cat)
    while len(out) < n and any(by_cat.values()):
        for c in cats:
            if by_cat[c] and len(out) < n:
                out.append(by_cat[c].pop())
    return out


def maskbench_sample(data: Path, n: int, compiler: Any) -> list[dict[str, Any]]:
    """The first ``n`` schemas of MaskBench's JME and Glaiveai2K subsets that compile, each with
    JSONSchemaBench's style of prompt (the schema in the request)."""
    out: list[dict[str, Any]] = []
    for subset in ("JME", "Glaiveai2K"):
        taken = 0
        with gzip.open(data / "maskbench" / f"{subset}.jsonl.gz", "rt", encoding="utf-8") as f:
            for line in f:
                if taken >= n:
                    break
                rec = json.loads(line)
                try:
                    compiler.compile_json_schema(rec["schema"])
                except StructgenError:
                    continue
                prompt = ("Give a JSON object that satisfies this JSON Schema, nothing else:\n"
                          + json.dumps(rec["schema"], ensure_ascii=False))
                out.append({"id": f"{subset}/{rec['id']}", "kind": "schema", "prompt": prompt, "schema": rec["schema"]})
                taken += 1
    return out


def toolset_for(task: dict[str, Any]) -> ToolSet:
    try:
        return ToolSet.from_bfcl(task["functions"])
    except StructgenError:
        return ToolSet.from_bfcl(task["functions"], lenient=True)


def first_difference(ff: Any, hf_ids: list[int]) -> str | None:
    """Why greedy outputs differ: ``forced`` or ``sampled`` at the first differing token."""
    for i, t in enumerate(ff.token_ids):
        if i >= len(hf_ids) or t != hf_ids[i]:
            return "forced" if ff.forced_flags[i] else "sampled"
    # equal up to ff's end: hf also sampled EOS where ff ended by the grammar
    return None


def hf_run(model: Any, tok: Any, task: dict[str, Any], max_new: int) -> tuple[str, list[int], bool]:
    """``model.generate`` with the grammar's logits processor: (text, token ids, complete)."""
    if task["kind"] == "schema":
        inputs = chat_inputs(tok, task["prompt"]).to(model.device)
        proc = JSONSchemaLogitsProcessor(task["schema"], tok, vocab_size=model.config.vocab_size)
    else:
        tools = task["tools"]
        prompt = tools.chat_prompt(tok, task["prompt"], format=SMOLLM2)
        inputs = tok(prompt, return_tensors="pt", add_special_tokens=False).to(model.device)
        proc = ToolCallLogitsProcessor(tools, tok, parallel=task["parallel"], format=SMOLLM2, max_whitespace=2,
                                       vocab_size=model.config.vocab_size)
    run = generate_constrained(model, tok, inputs, proc, max_new_tokens=max_new)
    info = proc.compiled.tokenizer_info
    text = b"".join(info.token_bytes[t] or b"" for t in run.body).decode("utf-8", errors="replace")
    return text, run.new, run.matcher.is_completed()


def run_task(model: Any, tok: Any, task: dict[str, Any], max_new: int, repeats: int) -> dict[str, Any]:
    row: dict[str, Any] = {"id": task["id"], "kind": task["kind"]}
    compiler = compiler_for(tok, vocab_size=model.config.vocab_size)
    kw = {"schema": task["schema"]} if task["kind"] == "schema" else {
        "tools": task["tools"], "parallel": task["parallel"]}
    times: dict[str, list[float]] = {"hf": [], "ff": []}
    # cold: a fresh compile per path; warm: the same grammar again, paths alternated and
    # the fastest of `repeats` kept (the CPU is shared: the minimum is the least disturbed)
    for rep in range(1 + repeats):
        for path in ("hf", "ff"):
            if rep == 0:
                compiler.clear_cache()
            t0 = time.perf_counter()
            if path == "hf":
                hf_text, hf_ids, hf_complete = hf_run(model, tok, task, max_new)
            else:
                ff = structgen.generate(model, tok, task["prompt"], max_new_tokens=max_new, **kw)
            times[path].append(time.perf_counter() - t0)
    for path in ("hf", "ff"):
        row[f"{path}_cold_s"] = round(times[path][0], 3)
        row[f"{path}_warm_s"] = round(min(times[path][1:] or times[path]), 3)  # --repeats 0: cold only
    valid = ff.status == "complete"
    if valid and task["kind"] == "schema":
        valid = jsonschema.Draft202012Validator(task["schema"]).is_valid(ff.value)
    row.update(
        hf_tokens=len(hf_ids), hf_passes=len(hf_ids), hf_complete=hf_complete,
        ff_tokens=ff.total_tokens, ff_sampled=ff.sampled_tokens, ff_forced=ff.forced_tokens,
        ff_passes=ff.forward_passes, ff_status=ff.status, ff_valid=valid,
        ff_ttft_s=round(ff.ttft, 3), ff_tpot_s=round(ff.tpot, 4),
        same_text=ff.text == hf_text, same_tokens=ff.token_ids == hf_ids[: len(ff.token_ids)],
        first_difference=None if ff.text == hf_text else first_difference(ff, hf_ids), hf_text=hf_text,
        ff_text=ff.text,
    )
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--bfcl", type=int, default=20, help="BFCL tasks to sample")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-new-tokens", type=int, default=96)
    ap.add_argument("--repeats", type=int, default=2, help="warm runs per path (the fastest is kept)")
    ap.add_argument("--maskbench", type=int, default=0,
                    help="schemas from each of MaskBench's JME and Glaiveai2K subsets (those structgen compiles)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "fast_forward.json")
    args = ap.parse_args()

    from structgen.models import load_default

    model, tok = load_default()
    tasks = [{"id": f, "kind": "schema", "prompt": p, "schema": json.loads((ROOT / "examples" / "schemas" / f).read_text())}
             for f, p in SCHEMA_TASKS]
    for t in bfcl_sample(args.data, args.bfcl, args.seed):
        tasks.append({"id": t["id"], "kind": "bfcl", "prompt": t["messages"][0], "tools": toolset_for(t),
                      "parallel": "parallel" in t["category"]})
    tasks.extend(maskbench_sample(args.data, args.maskbench, compiler_for(tok, vocab_size=model.config.vocab_size)))
    structgen.generate(model, tok, "Hi", schema={"type": "boolean"}, max_new_tokens=4)  # torch warm-up
    rows = []
    for i, task in enumerate(tasks):
        row = run_task(model, tok, task, args.max_new_tokens, args.repeats)
        rows.append(row)
        print(f"[{i + 1}/{len(tasks)}] {row['id']}: forced {row['ff_forced']}/{row['ff_tokens']}, passes "
              f"{row['ff_passes']} vs {row['hf_passes']}, warm {row['ff_warm_s']:.2f}s vs {row['hf_warm_s']:.2f}s, "
              f"same={row['same_text']}", flush=True)
        summary = write(args, rows, done=len(rows) == len(tasks))  # after every task: a stopped run keeps its rows
    print(table(summary))
    return 0


def write(args: argparse.Namespace, rows: list[dict[str, Any]], *, done: bool) -> dict[str, Any]:
    summary = {kind: summarise([r for r in rows if kind == "all" or r["kind"] == kind])
               for kind in ("schema", "bfcl", "all")}
    result = {
        "benchmark": "fast_forward",
        "command": "python bench/fast_forward.py " + " ".join(sys.argv[1:]),
        "complete_run": done,
        "hardware": {"machine": platform.machine(), "processor": platform.processor() or platform.machine(),
                     "cpus": os.cpu_count(), "torch_threads": __import__("torch").get_num_threads(),
                     "note": "shared 2-core CPU; other jobs ran at the same time, so wall times are noisy"},
        "model": "SmolLM2-135M-Instruct (Q4_1 GGUF dequantized to float32), greedy",
        "max_new_tokens": args.max_new_tokens,
        "summary": summary,
        "tasks": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return summary


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    if not rows:
        return {}
    tot = lambda k: sum(r[k] for r in rows)
    return {
        "tasks": len(rows),
        "valid_pct": round(100 * sum(r["ff_valid"] for r in rows) / len(rows), 1),
        "complete_pct": round(100 * sum(r["ff_status"] == "complete" for r in rows) / len(rows), 1),
        "valid_of_complete_pct": round(100 * sum(r["ff_valid"] for r in rows)
                                       / max(sum(r["ff_status"] == "complete" for r in rows), 1), 1),
        "hf_complete_pct": round(100 * sum(r["hf_complete"] for r in rows) / len(rows), 1),
        "ff_tokens": tot("ff_tokens"), "ff_forced": tot("ff_forced"),
        "forced_share_pct": round(100 * tot("ff_forced") / max(tot("ff_tokens"), 1), 1),
        "ff_passes": tot("ff_passes"), "hf_passes": tot("hf_passes"),
        "passes_saved_pct": round(100 * (1 - tot("ff_passes") / max(tot("hf_passes"), 1)), 1),
        "hf_cold_s": round(tot("hf_cold_s"), 2), "ff_cold_s": round(tot("ff_cold_s"), 2),
        "hf_warm_s": round(tot("hf_warm_s"), 2), "ff_warm_s": round(tot("ff_warm_s"), 2),
        "wall_saved_cold_pct": round(100 * (1 - tot("ff_cold_s") / max(tot("hf_cold_s"), 1e-9)), 1),
        "wall_saved_warm_pct": round(100 * (1 - tot("ff_warm_s") / max(tot("hf_warm_s"), 1e-9)), 1),
        "same_text_pct": round(100 * sum(r["same_text"] for r in rows) / len(rows), 1),
        "same_text_other_tokens": sum(r["same_text"] and not r["same_tokens"] for r in rows),
        "first_difference": dict(collections.Counter(r["first_difference"] or "none" for r in rows)),
    }


def table(summary: dict[str, Any]) -> str:
    cols = ["tasks", "valid_pct", "forced_share_pct", "ff_passes", "hf_passes", "passes_saved_pct",
            "ff_cold_s", "hf_cold_s", "wall_saved_cold_pct", "ff_warm_s", "hf_warm_s", "wall_saved_warm_pct",
            "same_text_pct"]
    lines = ["| tasks | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for kind, s in summary.items():
        if s:
            lines.append(f"| {kind} | " + " | ".join(str(s[c]) for c in cols) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
