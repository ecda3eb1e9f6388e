"""Reading and judging a model's answer: fences, JSON/YAML parsing, validation, accuracy.

Failure classes (one per failed attempt, in this order of precedence):

* ``truncated``: the token budget ran out and the text does not parse or validate;
* ``empty``: nothing but whitespace (or an empty fence);
* ``extra_text``: not JSON as a whole, but a JSON value sits inside prose (``json.loads``
  fails where a lenient extractor would succeed);
* ``syntax``: does not parse (JSON), does not parse or is a bare scalar (YAML);
* ``schema``: parses but does not validate (wrong tool, missing argument, wrong type...).

A Markdown code fence around the whole answer is stripped before parsing (so a fenced
answer can be valid); its characters are reported so the tokens it cost count as waste.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal

import jsonschema

from ..schema.validation import validator_for
from ..tools import ToolCallError
from .bfcl_match import calls_match, toolset_for
from .tasks import Task

__all__ = ["FAILURE_CLASSES", "Check", "Judge", "minimal_json", "parse_answer", "strip_fence"]

FAILURE_CLASSES = ("truncated", "empty", "extra_text", "syntax", "schema")
Format = Literal["json", "yaml"]

_FENCE = re.compile(r"\A(```[A-Za-z0-9_+-]*[ \t]*\r?\n)(.*?)(\r?\n?```[ \t]*)?\Z", re.DOTALL)


@dataclass(frozen=True)
class Check:
    """The verdict on one attempt.

    Attributes:
        ok: parsed and valid.
        answer: the normalised answer (BFCL: list of ``{"name", "arguments"}``; schema: the value).
        error_class: one of :data:`FAILURE_CLASSES`, or None when ok.
        error: a message fit to show the model when asking again.
        fence: the fence text stripped ("" if none).
    """

    ok: bool
    answer: Any = None
    error_class: str | None = None
    error: str = ""
    fence: str = ""


def strip_fence(text: str) -> tuple[str, str]:
    """``(inner, fence)``: the text inside a Markdown code fence around the whole (stripped)
    text, and the fence characters removed. An unclosed fence (a truncated answer) counts too."""
    s = text.strip()
    m = _FENCE.match(s)
    if not m:
        return s, ""
    return m.group(2), m.group(1) + (m.group(3) or "")


_SCALARS = (str, int, float, bool, type(None))


def parse_answer(text: str, fmt: Format) -> tuple[Any, str | None, str, str]:
    """Parse an answer as applications do: ``(value, error_class, error, fence)``.

    JSON: ``json.loads`` of the whole text (fence stripped). YAML: ``yaml.safe_load``; a bare
    scalar is a ``syntax`` failure, since every task asks for an object or a list of calls.
    The ``truncated`` class is decided by the caller, who knows whether the budget ran out.
    """
    inner, fence = strip_fence(text)
    if not inner.strip():
        return None, "empty", "the answer is empty", fence
    if fmt == "json":
        try:
            return json.loads(inner), None, "", fence
        except json.JSONDecodeError as exc:
            kind = "extra_text" if _embedded_json(inner) else "syntax"
            what = "text around the JSON" if kind == "extra_text" else "invalid JSON"
            return None, kind, f"{what}: {exc.msg} at line {exc.lineno} column {exc.colno}", fence
    import yaml

    try:
        value = yaml.safe_load(inner)
    except yaml.YAMLError as exc:
        return None, "syntax", "invalid YAML: " + " ".join(str(exc).split())[:200], fence
    if isinstance(value, _SCALARS):
        return None, "syntax", f"the YAML is a plain {type(value).__name__}, not a mapping or a list", fence
    return value, None, "", fence


def _embedded_json(text: str) -> bool:
    dec = json.JSONDecoder()
    for m in re.finditer(r"[\[{]", text):
        try:
            value, _ = dec.raw_decode(text, m.start())
        except json.JSONDecodeError:
            continue
        if isinstance(value, (dict, list)) and value:
            return True
    return False


def minimal_json(value: Any) -> str:
    """Compact JSON of an answer (the yardstick of useful tokens); non-JSON YAML values as strings."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


class Judge:
    """Checks answers to one task and scores them against its ground truth.

    BFCL answers are one call object or a list of calls; each call is validated with
    ``ToolSet.validate`` (``jsonschema`` against the tool's argument schema). Schema answers
    are validated with ``jsonschema`` (the schema's own draft).
    """

    def __init__(self, task: Task) -> None:
        self.task = task
        self.toolset = None
        self.lenient = False
        if task.family == "bfcl":
            self.toolset, self.lenient = toolset_for({"functions": task.functions})

    def check(self, text: str, fmt: Format, *, finished: bool = True) -> Check:
        """Parse ``text`` as ``fmt`` and validate it; ``finished=False`` means the budget ran out."""
        value, kind, error, fence = parse_answer(text, fmt)
        if kind is None:
            answer, error = self._validate(value)
            kind = None if error is None else "schema"
        else:
            answer = None
        if kind is None:
            return Check(True, answer, None, "", fence)
        if not finished:
            kind, error = "truncated", f"the answer was cut off at the token limit ({error})"
        return Check(False, None, kind, error or "", fence)

    def _validate(self, value: Any) -> tuple[Any, str | None]:
        if self.toolset is not None:
            items = value if isinstance(value, list) else [value]
            if not items:
                return None, "the list of calls is empty"
            try:
                calls = [self.toolset.validate(item, index=i if len(items) > 1 else None).to_dict()
                         for i, item in enumerate(items)]
            except ToolCallError as exc:
                return None, str(exc)
            return calls, None
        schema = self.task.schema
        try:
            err = jsonschema.exceptions.best_match(validator_for(schema).iter_errors(value))
        except (TypeError, ValueError) as exc:  # values YAML produces that JSON has no type for
            return None, f"not a JSON value: {exc}"
        if err is not None:
            where = "/".join(str(p) for p in err.absolute_path)
            return None, f"at /{where}: {err.message}"[:300]
        return value, None

    def canonical(self, answer: Any) -> Any:
        """The answer as its minimal JSON is counted: a single BFCL call as an object."""
        if self.toolset is not None and isinstance(answer, list) and len(answer) == 1:
            return answer[0]
        return answer

    def accuracy(self, answer: Any) -> bool | None:
        """Does a valid answer match the ground truth? None when the task has none."""
        gt = self.task.ground_truth
        if gt is None:
            return None
        if answer is None:
            return False
        if self.toolset is not None:
            return calls_match([(c["name"], c["arguments"]) for c in answer], gt)
        return answer == gt
