"""Token economy: takes tasks and a model, gives tokens, retries, validity and accuracy per arm (constrained calls vs free-form JSON and YAML vs JSON mode).

For each task (a prompt plus a JSON Schema or a BFCL tool set) every arm asks the same model
with the same chat template; arms that can fail re-ask with the error appended, up to
``max_retries`` times, and every completion token of every attempt counts. Beside the model
run, :mod:`~structgen.compare.format_cost` counts the same reference answers in each format
with every shipped tokenizer (no model). Layout:

* :mod:`~structgen.compare.tasks`: task records, the default set, BFCL and JSONL loaders;
* :mod:`~structgen.compare.bfcl_match`: BFCL answer checking and category-balanced task sampling;
* :mod:`~structgen.compare.judge`: fences, JSON/YAML parsing, validation, failure classes, accuracy;
* :mod:`~structgen.compare.arms`: prompts (few-shot examples too), the retry loop, the six arms (pluggable);
* :mod:`~structgen.compare.format_cost`: tokens of each format under each tokenizer;
* :mod:`~structgen.compare.backend`: ``transformers`` generation, timing, NVML energy;
* :mod:`~structgen.compare.runner`, :mod:`~structgen.compare.metrics`,
  :mod:`~structgen.compare.report`, :mod:`~structgen.compare.command` (``structgen compare``).

Importing this package loads neither torch nor transformers, rich nor matplotlib.
"""
from __future__ import annotations

from .arms import ARMS, ArmSettings, Backend, Constraint, Generation, cut_retries, fewshot_examples, prompt_messages, run_arm
from .backend import HFBackend
from .format_cost import FORMATS, format_cost, format_texts
from .judge import FAILURE_CLASSES, Check, Judge, minimal_json, parse_answer, strip_fence
from .metrics import findings, summarise, summarise_rows
from .runner import run_compare, token_budget
from .tasks import Task, TaskError, adhoc_task, load_tasks

__all__ = [
    "ARMS",
    "FAILURE_CLASSES",
    "FORMATS",
    "ArmSettings",
    "Backend",
    "Check",
    "Constraint",
    "Generation",
    "HFBackend",
    "Judge",
    "Task",
    "TaskError",
    "adhoc_task",
    "cut_retries",
    "fewshot_examples",
    "findings",
    "format_cost",
    "format_texts",
    "load_tasks",
    "minimal_json",
    "parse_answer",
    "prompt_messages",
    "run_arm",
    "run_compare",
    "strip_fence",
    "summarise",
    "summarise_rows",
    "token_budget",
]


def __getattr__(name: str):  # HFBackend lazily: its module is light, but keep the door shut on torch
    if name == "HFBackend":
        return HFBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
