"""Running every arm on every task, with one token budget per task shared by all arms."""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..errors import StructgenError
from .arms import ARMS, Arm, ArmSettings, Backend
from .judge import Judge, minimal_json
from .tasks import Task

__all__ = ["run_compare", "token_budget"]

AUTO_MIN, AUTO_MAX, AUTO_NO_REFERENCE = 48, 256, 128


def token_budget(task: Task, backend: Backend, fixed: int | None = None) -> int:
    """Tokens per attempt: ``fixed``, or twice the reference answer's compact JSON plus 32.

    The automatic budget leaves room for pretty-printed JSON and a fence, clamped to
    [48, 256]; a task without a reference answer gets 128. Every arm of a task gets the same.
    """
    if fixed:
        return fixed
    ref = task.reference
    if ref is None:
        return AUTO_NO_REFERENCE
    if task.family == "bfcl" and isinstance(ref, list) and len(ref) == 1:
        ref = ref[0]
    return max(AUTO_MIN, min(AUTO_MAX, 2 * backend.count_tokens(minimal_json(ref)) + 32))


def run_compare(backend: Backend, tasks: Iterable[Task], *, arms: Iterable[str] | None = None,
                arm_functions: Mapping[str, Arm] | None = None, max_retries: int = 3,
                max_new_tokens: int | None = None, done: Iterable[str] = (),
                on_task: Callable[[Task, list[dict[str, Any]]], None] | None = None,
                on_step: Callable[[Task, str], None] | None = None,
                skipped: list[dict[str, str]] | None = None) -> list[dict[str, Any]]:
    """Run ``arms`` (default: all four) on each task; returns the result rows.

    Args:
        backend: the model (:class:`~structgen.compare.HFBackend` or a fake).
        arm_functions: name → arm; default :data:`~structgen.compare.arms.ARMS`.
        max_new_tokens: a fixed budget per attempt; None: :func:`token_budget`.
        done: ids of tasks to skip (resuming a run).
        on_task: called with each task's rows once all its arms ran (to save progress).
        on_step: called before each arm runs (progress display).
        skipped: receives ``{"task", "reason"}`` for tasks an arm could not run (a schema
            structgen refuses); none of their rows are kept, so arms compare on equal tasks.
    """
    functions = dict(ARMS if arm_functions is None else arm_functions)
    names = list(functions if arms is None else arms)
    unknown = [a for a in names if a not in functions]
    if unknown:
        raise StructgenError(f"unknown arm {unknown[0]!r}; arms: {sorted(functions)}")
    done = set(done)
    rows: list[dict[str, Any]] = []
    for task in tasks:
        if task.id in done:
            continue
        task_rows = []
        try:
            judge = Judge(task)
            settings = ArmSettings(token_budget(task, backend, max_new_tokens), max_retries)
            for name in names:
                if on_step:
                    on_step(task, name)
                row = functions[name](backend, task, judge, settings)
                row["arm"] = name
                row["max_new_tokens"] = settings.max_new_tokens
                task_rows.append(row)
        except StructgenError as exc:
            if skipped is not None:
                skipped.append({"task": task.id, "reason": f"{type(exc).__name__}: {exc}"})
            continue
        rows.extend(task_rows)
        if on_task:
            on_task(task, task_rows)
    return rows
