"""The arms of the comparison and the retry loop they share.

An arm is a function ``(backend, task, judge, settings) -> dict`` (one result row); the
registry :data:`ARMS` maps names to arms, so a different constrained decoder (fast-forward
decoding, another engine) plugs in by replacing ``ARMS["constrained"]`` or passing its own
mapping to :func:`structgen.compare.run_compare`.

Prompts: BFCL tasks list the tools in the system prompt exactly as ``ToolSet.chat_prompt``
does for plain-JSON calls, so the constrained, free-form JSON and JSON-mode arms see the
very same prompt; the YAML arm's system prompt says YAML instead of JSON. Schema tasks use
JSONSchemaBench's system prompt, one example (schema → answer, the answer written in the
arm's format) and then the task's schema.

Few-shot arms (``json_fewshot``, ``yaml_fewshot``) give the free-form formats their best fair
chance: the same system prompt, then two worked examples taken from *other* tasks of the
same family (a question or schema, and the exact expected answer written in the arm's format,
as a list when the asked task is a parallel one), then the task itself. See
:func:`fewshot_examples`.
"""
from __future__ import annotations

import json
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal, Protocol

from .bfcl_match import toolset_for
from ..tools.formats import JSON, tools_system_prompt
from .judge import Format, Judge, minimal_json
from .tasks import Task, data_dir, load_tasks

__all__ = ["ARMS", "Arm", "ArmSettings", "Backend", "Constraint", "Generation", "cut_retries", "fewshot_examples",
           "prompt_messages", "run_arm"]


@dataclass(frozen=True)
class Constraint:
    """What a backend must constrain the output to.

    ``kind="task"``: the task's own grammar (the call schema of its tools, or its JSON
    Schema), strict; ``kind="json"``: any JSON value (``grammars/json.lark``), no schema;
    ``kind="json_object"``: JSON mode as APIs offer it, any JSON object (for a parallel
    BFCL task, whose answer is a list of calls, any array of objects).
    ``close_truncated``: when the budget runs out, append the shortest text that completes
    the grammar (what ``ToolSet.generate`` does).
    """

    kind: Literal["task", "json", "json_object"]
    close_truncated: bool = False


@dataclass(frozen=True)
class Generation:
    """One model call.

    Attributes:
        text: the completion (special tokens removed).
        tokens: completion tokens generated (the stop token included: it costs a step too).
        finished: stopped by itself (EOS, or a complete value of the grammar); False: budget.
        seconds: wall time of the generate call.
        ttft: seconds from the call to the first generated token (prompt processing included).
        setup_seconds: grammar compilation before the call (0 when cached or unconstrained).
        joules: GPU energy of the call (CUDA with NVML only).
        closed: truncated, and completed with the grammar's shortest completion.
        forced_tokens: tokens the decoder forced without a model step (fast-forward
            decoding); None when the decoder does not report it.
        prompt_tokens: tokens of the prompt (the conversation so far, retries included).
        forward_passes: model calls of the generation (fast-forward decoding reports them).
    """

    text: str
    tokens: int
    finished: bool
    seconds: float
    ttft: float | None = None
    setup_seconds: float = 0.0
    joules: float | None = None
    closed: bool = False
    forced_tokens: int | None = None
    prompt_tokens: int | None = None
    forward_passes: int | None = None


class Backend(Protocol):
    """A model that can be prompted with chat messages (see :class:`structgen.compare.HFBackend`)."""

    def generate(self, task: Task, messages: list[dict[str, Any]], *, max_new_tokens: int,
                 constraint: Constraint | None) -> Generation: ...

    def count_tokens(self, text: str) -> int: ...


@dataclass(frozen=True)
class ArmSettings:
    """Budget of one arm on one task: tokens per attempt, retries after a failed attempt."""

    max_new_tokens: int
    max_retries: int = 3


Arm = Callable[[Backend, Task, Judge, ArmSettings], dict[str, Any]]

# --------------------------------------------------------------------------- prompts

_YAML_TOOLS = (
    "You can call the following tools (JSON Schema of their arguments):\n{tools}\n"
    "To call a tool, answer ONLY with YAML: a mapping with the keys name (the tool name) and arguments "
    "(a mapping of the arguments), or a YAML list of such mappings to make several calls."
)
_YAML_SYSTEM = "You need to generate a YAML document that matches the JSON Schema below."


@lru_cache(maxsize=1)
def _schema_prompt() -> dict[str, Any]:
    return json.loads((data_dir() / "schema_prompt.json").read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def _default_pool() -> list[Task]:
    return load_tasks("default")


def _dump(value: Any, fmt: Format) -> str:
    if fmt == "json":
        return json.dumps(value, ensure_ascii=False)
    import yaml

    return yaml.safe_dump(value, sort_keys=False, allow_unicode=True).rstrip("\n")


def _user_text(task: Task) -> str:
    return "\n".join(str(m.get("content") or "") for m in task.messages if m.get("role") != "system").strip()


def _answer_value(example: Task, parallel: bool) -> Any:
    """The reference answer of ``example`` shaped as the asked task expects it."""
    ref = example.reference
    if example.family != "bfcl":
        return ref
    return list(ref) if parallel or len(ref) != 1 else ref[0]


def fewshot_examples(task: Task, pool: list[Task] | None = None, k: int = 2) -> list[Task]:
    """``k`` worked examples for ``task``: other tasks of its family that have a reference answer.

    Never the asked task itself (by id, nor a task with the same question or schema). For a
    parallel BFCL task, parallel examples come first; for a single-call task, only
    single-call examples (the exact shape expected). The choice is deterministic but varies
    with the task (a CRC of its id picks where to start), so that no single pair of examples
    decides the whole run. ``pool`` defaults to the shipped default tasks.
    """
    if pool is None:
        pool = _default_pool()
    key = _user_text(task) if task.family == "bfcl" else json.dumps(task.schema, sort_keys=True)
    cands = [t for t in pool if t.family == task.family and t.id != task.id and t.reference is not None
             and (_user_text(t) if t.family == "bfcl" else json.dumps(t.schema, sort_keys=True)) != key]
    if not cands:
        return []
    start = zlib.crc32(task.id.encode("utf-8")) % len(cands)
    rotated = cands[start:] + cands[:start]
    if task.family == "bfcl" and task.parallel:
        rotated.sort(key=lambda t: not t.parallel)  # stable: parallel examples first, rotation kept
    elif task.family == "bfcl":  # one call asked: examples of one call (the exact expected shape)
        rotated = [t for t in rotated if len(t.reference) == 1]
    return rotated[:k]


def _example_turns(task: Task, examples: list[Task], fmt: Format) -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = []
    for ex in examples:
        if task.family == "bfcl":
            tools = json.dumps(toolset_for({"functions": ex.functions})[0].to_openai(), ensure_ascii=False)
            question = f"(Example with other tools: {tools})\n{_user_text(ex)}"
        else:
            instruction = _user_text(ex)
            schema_text = json.dumps(ex.schema, ensure_ascii=False)
            question = f"{instruction}\n\nJSON Schema:\n{schema_text}" if instruction else schema_text
        turns += [{"role": "user", "content": question},
                  {"role": "assistant", "content": _dump(_answer_value(ex, task.parallel), fmt)}]
    return turns


def prompt_messages(task: Task, fmt: Format, judge: Judge | None = None,
                    examples: list[Task] | None = None) -> list[dict[str, Any]]:
    """The chat messages that ask for ``task``'s answer in ``fmt``.

    ``examples``: worked examples (see :func:`fewshot_examples`) placed as user/assistant
    turns between the system prompt and the task; for schema tasks they replace the one
    JSONSchemaBench example.
    """
    if examples:
        zero = prompt_messages(task, fmt, judge)
        system = zero[0]
        if task.family == "bfcl":
            body = [m for m in zero[1:]]
            system = {"role": "system", "content": system["content"] + "\n\nExamples of correct answers follow."}
        else:
            body = zero[-1:]  # the task's schema turn; the shipped example is replaced
        return [system, *_example_turns(task, examples, fmt), *body]
    if task.family == "bfcl":
        toolset = (judge or Judge(task)).toolset
        tools = toolset.to_openai()
        system = tools_system_prompt(JSON, tools) if fmt == "json" else _YAML_TOOLS.format(
            tools=json.dumps(tools, ensure_ascii=False))
        msgs = [dict(m) for m in task.messages]
        if msgs and msgs[0].get("role") == "system":  # merged as ToolSet.chat_prompt does
            msgs[0] = {"role": "system", "content": system + "\n\n" + str(msgs[0].get("content") or "")}
            return msgs
        return [{"role": "system", "content": system}, *msgs]
    sp = _schema_prompt()
    instruction = "\n".join(str(m.get("content") or "") for m in task.messages).strip()
    schema_text = json.dumps(task.schema, ensure_ascii=False)
    return [
        {"role": "system", "content": sp["system_prompt"] if fmt == "json" else _YAML_SYSTEM},
        {"role": "user", "content": json.dumps(sp["example_schema"], ensure_ascii=False)},
        {"role": "assistant", "content": _dump(sp["example_answer"], fmt)},
        {"role": "user", "content": f"{instruction}\n\nJSON Schema:\n{schema_text}" if instruction else schema_text},
    ]


def retry_message(fmt: Format, error: str) -> str:
    """What an application says after a failed attempt (the error appended)."""
    return f"That answer is not valid: {error}\nAnswer again with only the {fmt.upper()}, nothing else."


# --------------------------------------------------------------------------- the loop


def run_arm(backend: Backend, task: Task, judge: Judge, settings: ArmSettings, *, name: str, fmt: Format,
            constraint: Constraint | None, examples: list[Task] | None = None) -> dict[str, Any]:
    """Ask, check, and re-ask with the error appended until valid or out of retries.

    Every completion token of every attempt is counted. Returns the result row of this arm.
    """
    messages = prompt_messages(task, fmt, judge, examples)
    reset = getattr(backend, "reset_prefix_cache", None)
    if reset is not None:
        reset()  # retries may reuse this arm's own prompt, never another arm's
    attempts: list[dict[str, Any]] = []
    check = None
    for _ in range(settings.max_retries + 1):
        t0 = time.perf_counter()
        gen = backend.generate(task, messages, max_new_tokens=settings.max_new_tokens, constraint=constraint)
        check = judge.check(gen.text, fmt, finished=gen.finished)
        attempts.append({
            "tokens": gen.tokens, "finished": gen.finished, "closed": gen.closed, "ok": check.ok,
            "error_class": check.error_class, "error": check.error,
            "fence_tokens": backend.count_tokens(check.fence) if check.fence else 0,
            "seconds": gen.seconds, "wall_seconds": time.perf_counter() - t0, "setup_seconds": gen.setup_seconds,
            "ttft": gen.ttft, "joules": gen.joules, "forced_tokens": gen.forced_tokens, "prompt_tokens": gen.prompt_tokens,
            "forward_passes": gen.forward_passes,
            "text": gen.text,
        })
        if check.ok:
            break
        messages = [*messages, {"role": "assistant", "content": gen.text},
                    {"role": "user", "content": retry_message(fmt, check.error)}]
    return _row(backend, task, judge, name, attempts, check)


def _row(backend: Backend, task: Task, judge: Judge, name: str, attempts: list[dict[str, Any]],
         check: Any) -> dict[str, Any]:
    valid = bool(check and check.ok)
    answer = judge.canonical(check.answer) if valid else None
    useful = backend.count_tokens(minimal_json(answer)) if valid else 0
    row = {"task": task.id, "family": task.family, "category": task.category, "arm": name}
    row.update(_attempt_totals(attempts))
    row.update({"valid": valid, "accurate": judge.accuracy(check.answer if valid else None), "useful_tokens": useful,
                "useful_ratio": useful / row["tokens"] if row["tokens"] else 0.0, "answer": answer})
    return row


def _attempt_totals(attempts: list[dict[str, Any]]) -> dict[str, Any]:
    joules = [a["joules"] for a in attempts if a["joules"] is not None]
    return {
        "attempts": len(attempts), "retries": len(attempts) - 1, "tokens": sum(a["tokens"] for a in attempts),
        "valid_first": attempts[0]["ok"],
        "fenced": sum(a["fence_tokens"] > 0 for a in attempts), "fence_tokens": sum(a["fence_tokens"] for a in attempts),
        "closed": any(a["closed"] for a in attempts),
        "seconds": sum(a["seconds"] for a in attempts), "wall_seconds": sum(a["wall_seconds"] for a in attempts),
        "ttft": attempts[0]["ttft"], "joules": sum(joules) if joules else None, "attempt_log": attempts,
    }


def cut_retries(row: dict[str, Any], max_retries: int) -> dict[str, Any]:
    """The row a run with fewer retries would have produced.

    Greedy decoding makes a run with ``max_retries`` a prefix of a run with more: the same
    prompts give the same attempts, and the loop stops at the first valid one. So a row with
    more attempts than allowed failed all of the kept ones.
    """
    keep = max_retries + 1
    if row["attempts"] <= keep:
        return row
    out = dict(row)
    out.update(_attempt_totals(row["attempt_log"][:keep]))
    out.update({"valid": False, "accurate": None if row["accurate"] is None else False, "useful_tokens": 0,
                "useful_ratio": 0.0, "answer": None})
    return out


# --------------------------------------------------------------------------- the arms


def constrained_arm(backend: Backend, task: Task, judge: Judge, settings: ArmSettings) -> dict[str, Any]:
    """(1) structgen strict: the call (or object) generated under the task's own grammar."""
    return run_arm(backend, task, judge, settings, name="constrained", fmt="json",
                   constraint=Constraint("task", close_truncated=True))


def json_arm(backend: Backend, task: Task, judge: Judge, settings: ArmSettings) -> dict[str, Any]:
    """(2) free-form JSON: schema in the prompt, ``json.loads``, ``jsonschema``, retries."""
    return run_arm(backend, task, judge, settings, name="json", fmt="json", constraint=None)


def yaml_arm(backend: Backend, task: Task, judge: Judge, settings: ArmSettings) -> dict[str, Any]:
    """(3) YAML: asked for YAML, ``yaml.safe_load``, validated the same way, retries."""
    return run_arm(backend, task, judge, settings, name="yaml", fmt="yaml", constraint=None)


def json_mode_arm(backend: Backend, task: Task, judge: Judge, settings: ArmSettings) -> dict[str, Any]:
    """(4) JSON mode, as APIs offer it: any JSON object (no schema), validated, retries."""
    return run_arm(backend, task, judge, settings, name="json_mode", fmt="json", constraint=Constraint("json_object"))


def json_fewshot_arm(backend: Backend, task: Task, judge: Judge, settings: ArmSettings) -> dict[str, Any]:
    """(5) free-form JSON with two worked examples from other tasks (:func:`fewshot_examples`)."""
    return run_arm(backend, task, judge, settings, name="json_fewshot", fmt="json", constraint=None,
                   examples=fewshot_examples(task))


def yaml_fewshot_arm(backend: Backend, task: Task, judge: Judge, settings: ArmSettings) -> dict[str, Any]:
    """(6) YAML with two worked examples from other tasks (:func:`fewshot_examples`)."""
    return run_arm(backend, task, judge, settings, name="yaml_fewshot", fmt="yaml", constraint=None,
                   examples=fewshot_examples(task))


ARMS: dict[str, Arm] = {
    "constrained": constrained_arm,
    "json": json_arm,
    "json_fewshot": json_fewshot_arm,
    "yaml": yaml_arm,
    "yaml_fewshot": yaml_fewshot_arm,
    "json_mode": json_mode_arm,
}
"""The six arms, in report order (each few-shot arm beside its zero-shot one)."""
