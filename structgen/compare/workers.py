"""Running the comparison's tasks in several processes, one model per process.

On a CPU, one decoding step of a small model is bound by one core's memory latency, not
by the machine's bandwidth: two processes on two cores each run at the single-process speed
(SmolLM2 on this project's 2-core machine: 60 ms per token alone, 60 ms each side by side),
while two torch threads in one process gain nothing on decoding. So ``structgen compare``
spreads whole tasks over ``--workers`` processes (each loads the model once, uses one
thread, and times its own attempts); results come back per task and are saved as they
arrive. A task's arms stay in one process, so the arms of a task see the same machine.
"""
from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from typing import Any

from ..models import load_model
from .backend import HFBackend
from .runner import run_compare
from .tasks import Task

__all__ = ["default_workers", "run_in_workers"]

_STATE: dict[str, Any] = {}


def _init(model: str | None, device: str, threads: int, fast_forward: bool, options: dict[str, Any]) -> None:
    import torch

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    m, tok = load_model(model, device=device)
    _STATE["backend"] = HFBackend(m, tok, fast_forward=fast_forward)
    _STATE["options"] = options


def _run(item: tuple[int, Task]) -> tuple[int, list[dict[str, Any]], list[dict[str, str]]]:
    index, task = item
    skipped: list[dict[str, str]] = []
    rows = run_compare(_STATE["backend"], [task], skipped=skipped, **_STATE["options"])
    return index, rows, skipped


def run_in_workers(tasks: list[Task], *, workers: int, model: str | None, device: str, threads: int,
                   fast_forward: bool, options: dict[str, Any],
                   on_task: Callable[[Task, list[dict[str, Any]]], None] | None = None,
                   on_done: Callable[[Task], None] | None = None,
                   skipped: list[dict[str, str]] | None = None) -> list[dict[str, Any]]:
    """Run ``tasks`` in ``workers`` processes; rows in task order.

    ``options`` are :func:`~structgen.compare.run_compare`'s keyword arguments (arms,
    retries, budget); ``on_task`` gets each task's rows as it finishes (to save progress),
    ``on_done`` each finished task (progress display).
    """
    ctx = multiprocessing.get_context("spawn")  # torch and fork do not mix
    results: dict[int, list[dict[str, Any]]] = {}
    with ctx.Pool(workers, initializer=_init, initargs=(model, device, threads, fast_forward, options)) as pool:
        for index, rows, skips in pool.imap_unordered(_run, list(enumerate(tasks)), chunksize=1):
            results[index] = rows
            if skipped is not None:
                skipped.extend(skips)
            if rows and on_task:
                on_task(tasks[index], rows)
            if on_done:
                on_done(tasks[index])
        pool.close()  # let the workers exit on their own (terminate() leaks a semaphore warning)
        pool.join()
    return [r for i in sorted(results) for r in results[i]]


def default_workers(device: str, cpu_count: int | None) -> int:
    """Two processes on a CPU with at least two cores (see the module docstring), else one."""
    return 1 if device.startswith("cuda") else max(1, min(2, cpu_count or 1))

