"""BFCL's answer checking (AST semantics) and category-balanced task sampling.

A call set *matches* the ground truth when it has the same number of calls, paired in any
order; each call names the expected function; every given argument value is one of the
accepted values (strings compared after BFCL's normalisation: case, spaces and ``,./-_*^``
ignored; dict values checked key by key; ``""`` among the accepted values means the argument
may be absent); and no unexpected argument is given. Used by ``bench/bfcl.py`` and the
token-waste comparison (:mod:`structgen.compare`).
"""
from __future__ import annotations

import collections
import random
import re
from typing import Any

from ..errors import ToolSchemaError
from ..guards import silenced_warnings
from ..tools.toolset import ToolSet

__all__ = ["bfcl_norm", "call_match", "calls_match", "sample_tasks", "toolset_for", "value_match"]


def bfcl_norm(s: str) -> str:
    """BFCL's string standardisation: spaces and ``,./-_*^`` removed, lower case, ' as "."""
    return re.sub(r"[ ,./\-_*^]", "", s).lower().replace("'", '"')


def value_match(value: Any, accepted: Any) -> bool:
    """One argument value against one accepted BFCL value (see the module docstring)."""
    if isinstance(accepted, dict):
        if not isinstance(value, dict):
            return False
        for key, exp in accepted.items():
            options = exp if isinstance(exp, list) else [exp]
            if key not in value:
                if "" not in options:
                    return False
                continue
            if not any(value_match(value[key], o) for o in options if o != ""):
                return False
        return all(k in accepted for k in value)
    if isinstance(accepted, list):
        return isinstance(value, list) and len(value) == len(accepted) and all(
            value_match(v, a) for v, a in zip(value, accepted))
    if isinstance(accepted, str):
        return isinstance(value, str) and bfcl_norm(value) == bfcl_norm(accepted)
    if isinstance(accepted, bool):
        return isinstance(value, bool) and value == accepted
    if isinstance(accepted, (int, float)):
        return isinstance(value, (int, float)) and not isinstance(value, bool) and float(value) == float(accepted)
    return value == accepted


def call_match(call: tuple[str, dict], expected: dict[str, dict[str, list]]) -> bool:
    """One ``(name, arguments)`` call against one ground-truth entry ``{name: {param: [accepted...]}}``."""
    (ename, params), = expected.items()
    name, args = call
    if name != ename or not isinstance(args, dict):
        return False
    for p, options in params.items():
        if p not in args:
            if "" not in options:
                return False
        elif not any(value_match(args[p], o) for o in options if o != ""):
            return False
    return all(p in params for p in args)


def calls_match(calls: list[tuple[str, dict]], expected: list[dict]) -> bool:
    """All calls against BFCL's ground truth, paired in any order (one call per entry)."""
    if len(calls) != len(expected):
        return False

    def assign(i: int, used: frozenset) -> bool:
        if i == len(calls):
            return True
        return any(j not in used and call_match(calls[i], expected[j]) and assign(i + 1, used | {j})
                   for j in range(len(expected)))

    return assign(0, frozenset())


def sample_tasks(tasks: list[dict[str, Any]], n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` tasks, round-robin over the categories (each shuffled with ``seed``)."""
    rng = random.Random(seed)
    by_cat: dict[str, list] = collections.defaultdict(list)
    for t in tasks:
        by_cat[t["category"]].append(t)
    queues = []
    for cat in sorted(by_cat):
        q = list(by_cat[cat])
        rng.shuffle(q)
        queues.append(q)
    out: list[dict[str, Any]] = []
    while len(out) < n and any(queues):
        for q in queues:
            if q and len(out) < n:
                out.append(q.pop())
    return out


def toolset_for(task: dict[str, Any]) -> tuple[ToolSet, bool]:
    """The task's tool set: strict if possible, else lenient. Returns ``(toolset, lenient_needed)``."""
    try:
        return _toolset().from_bfcl(task["functions"]), False
    except ToolSchemaError as exc:
        if "lenient=True" not in exc.message:
            raise
        with silenced_warnings():
            return _toolset().from_bfcl(task["functions"], lenient=True), True


def _toolset() -> Any:
    return ToolSet
