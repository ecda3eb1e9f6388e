"""Tasks of the token-waste comparison: a prompt plus a JSON Schema or a BFCL tool set.

Two record shapes are read, one per JSONL line (optionally gzipped):

* BFCL: ``{"id", "category", "messages", "functions", "ground_truth"}`` (``messages`` is a
  list of turns, the first of which is used, as in ``bench/bfcl.py``);
* schema: ``{"schema", "prompt"?, "id"?, "category"?, "reference"?, "ground_truth"?}``.
"""
from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import TaskError
from .bfcl_match import sample_tasks

__all__ = ["Task", "TaskError", "adhoc_task", "data_dir", "load_tasks", "read_jsonl", "task_from_record"]


@dataclass(frozen=True)
class Task:
    """One comparison task.

    Attributes:
        id: unique name.
        family: ``"bfcl"`` (function calling) or ``"schema"`` (a JSON object under a schema).
        category: finer grouping (BFCL category, schema source).
        messages: the user's conversation (BFCL) or the instruction (schema tasks; may be empty).
        schema: the JSON Schema of the answer (schema tasks).
        functions: BFCL function definitions (BFCL tasks).
        ground_truth: BFCL's accepted calls, or an exact expected value for schema tasks; None: no accuracy.
        reference: one valid answer, used to size the token budget.
    """

    id: str
    family: str
    category: str
    messages: list[dict[str, Any]] = field(default_factory=list)
    schema: Any = None
    functions: list[dict[str, Any]] = field(default_factory=list)
    ground_truth: Any = None
    reference: Any = None

    @property
    def parallel(self) -> bool:
        """A BFCL task whose answer has several calls."""
        return "parallel" in self.category


def data_dir() -> Path:
    """The folder of the shipped task data (``structgen/data/compare``)."""
    return Path(__file__).resolve().parent.parent / "data" / "compare"


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Records of a JSONL file, gzipped when the name ends in ``.gz``."""
    p = Path(path)
    opener = gzip.open if p.suffix == ".gz" else open
    records = []
    try:
        with opener(p, "rt", encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if line.strip():
                    try:
                        records.append(json.loads(line))
                    except json.JSONDecodeError as exc:  # located in the file, not in the line alone
                        raise TaskError(f"{p}:{number}:{exc.colno}: not JSON: {exc.msg}") from None
    except (OSError, UnicodeDecodeError, EOFError) as exc:
        raise TaskError(f"cannot read tasks from {p}: {exc}") from None
    return records


def task_from_record(rec: dict[str, Any], default_id: str) -> Task:
    """A :class:`Task` from one JSONL record (BFCL or schema shape)."""
    if not isinstance(rec, dict):
        raise TaskError(f"{default_id}: a task must be a JSON object, not {type(rec).__name__}")
    tid = str(rec.get("id", default_id))
    if "functions" in rec:
        turns = rec.get("messages") or []
        first = turns[0] if turns and isinstance(turns[0], list) else turns
        if not first:
            raise TaskError(f"{tid}: a BFCL task needs 'messages'")
        gt = rec.get("ground_truth")
        return Task(tid, "bfcl", str(rec.get("category", "bfcl")), [dict(m) for m in first],
                    functions=list(rec["functions"]), ground_truth=gt, reference=_reference_calls(gt))
    if "schema" in rec:
        prompt = rec.get("prompt") or ""
        return Task(tid, "schema", str(rec.get("category", "schema")),
                    [{"role": "user", "content": prompt}] if prompt else [], schema=rec["schema"],
                    ground_truth=rec.get("ground_truth"), reference=rec.get("reference", rec.get("ground_truth")))
    raise TaskError(f"{tid}: a task needs 'functions' (BFCL shape) or 'schema' (schema shape); keys: {sorted(rec)}")


def _reference_calls(ground_truth: Any) -> Any:
    """One concrete answer from BFCL's ground truth (first accepted value of each argument)."""
    if not isinstance(ground_truth, list):
        return None
    calls = []
    for entry in ground_truth:
        if not isinstance(entry, dict) or len(entry) != 1:
            return None
        (name, params), = entry.items()
        args = {p: next((v for v in vals if v != ""), None) for p, vals in params.items()
                if isinstance(vals, list) and any(v != "" for v in vals)}
        calls.append({"name": name, "arguments": args})
    return calls


def adhoc_task(schema: Any, prompt: str) -> Task:
    """One ad hoc schema task (``structgen compare --schema S.json --prompt TEXT``)."""
    return task_from_record({"id": "adhoc", "category": "adhoc", "schema": schema, "prompt": prompt}, "adhoc")


def _split_count(spec: str) -> tuple[str, int | None]:
    head, sep, tail = spec.rpartition(":")
    if sep and tail.isdigit() and head:
        return head, int(tail)
    return spec, None


def load_tasks(spec: str, *, shared_data: Path | None = None, seed: int = 0) -> list[Task]:
    """Tasks named by a ``--tasks`` value.

    * ``default``: the shipped set (6 BFCL tasks, 6 JSONSchemaBench schema prompts);
    * ``bfcl[:N]``: BFCL v4 from ``shared_data/bfcl/tasks.jsonl.gz``, ``N`` sampled
      round-robin over the categories with ``seed`` (all tasks without ``N``);
    * ``PATH[:N]``: the first ``N`` records of a JSONL(.gz) file.

    Raises:
        TaskError: unknown name, missing file, malformed record.
    """
    name, count = _split_count(spec)
    if name == "default":
        records = read_jsonl(data_dir() / "default_tasks.jsonl")
    elif name == "bfcl":
        path = (shared_data or Path("../shared/data")) / "bfcl" / "tasks.jsonl.gz"
        if not path.is_file():
            raise TaskError(f"BFCL tasks not found at {path}; pass --data DIR (the folder holding bfcl/tasks.jsonl.gz)")
        records = read_jsonl(path)
        records = sample_tasks(records, count if count is not None else len(records), seed)
        count = None
    else:
        path = Path(name)
        if not path.is_file():
            raise TaskError(f"--tasks {spec!r}: expected 'default', 'bfcl[:N]' or a JSONL file; {path} does not exist")
        records = read_jsonl(path)
    if count is not None:
        records = records[:count]
    return [task_from_record(r, f"{Path(name).name}#{i}") for i, r in enumerate(records)]
