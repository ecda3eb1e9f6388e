"""How a model writes tool calls: plain JSON, Hermes/Qwen ``<tool_call>`` blocks, SmolLM2 arrays.

A :class:`ToolCallFormat` says what text surrounds the JSON of the calls. It is read from the
model's chat template (:meth:`ToolCallFormat.detect`):

* a template that mentions ``<tool_call>`` (Qwen2/2.5, Hermes, and their fine-tunes) →
  :data:`HERMES`: one ``<tool_call>\\n{"name": ..., "arguments": ...}\\n</tool_call>`` block
  per call, blocks separated by a newline;
* SmolLM2's template (it names "SmolLM") → :data:`SMOLLM2`. The template shipped with
  SmolLM2-135M-Instruct renders no tools at all; the format is the one the SmolLM2 family was
  trained on (and that Ollama's ``smollm2`` template writes): tools listed in ``<tools>`` in
  the system prompt, the answer one JSON array of calls in ``<tool_call>[...]</tool_call>``;
* anything else → :data:`JSON`: the bare call object, or an array of calls when parallel.

``tool_choice="auto"`` needs the free text that precedes a call to be text that does *not*
contain the trigger (the opening tag): :func:`text_without` builds that regular language
exactly, as a grammar expression, from the Knuth–Morris–Pratt automaton of the trigger.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..grammar import EMPTY, NOTHING, CharSet, Expr, Repeat, alt, seq
from ..regex.parser import ANY_CHAR

__all__ = ["HERMES", "JSON", "SMOLLM2", "ToolCallFormat", "kmp_automaton", "text_without"]


@dataclass(frozen=True, slots=True)
class ToolCallFormat:
    """The text around tool calls in a model's output.

    Attributes:
        name: ``"json"``, ``"hermes"`` or ``"smollm2"`` (or your own).
        open: text before the call JSON (``""`` for plain JSON).
        close: text after it.
        each_call: ``True``: every call has its own ``open``/``close`` block (Hermes), blocks
            joined by ``separator``; ``False``: one block holds all calls.
        always_array: the block holds a JSON array even for a single call (SmolLM2).
        separator: text between blocks when ``each_call``.
    """

    name: str
    open: str = ""
    close: str = ""
    each_call: bool = False
    always_array: bool = False
    separator: str = "\n"

    @property
    def trigger(self) -> str | None:
        """The text that starts a call in ``tool_choice="auto"`` mode (the opening tag), or None."""
        return self.open.strip() or None

    @classmethod
    def detect(cls, tokenizer_or_template: Any) -> ToolCallFormat:
        """The format a tokenizer's chat template implies (a template string works too)."""
        template = tokenizer_or_template if isinstance(tokenizer_or_template, str) else (
            getattr(tokenizer_or_template, "chat_template", None) or "")
        if not isinstance(template, str):  # some tokenizers keep a dict of named templates
            template = json.dumps(template)
        if "<tool_call>" in template:
            return HERMES
        if "SmolLM" in template:
            return SMOLLM2
        return JSON

    @classmethod
    def named(cls, name: str | ToolCallFormat) -> ToolCallFormat:
        """A format by name (``"json"``, ``"hermes"``, ``"qwen"``, ``"smollm2"``), or the format itself."""
        if isinstance(name, ToolCallFormat):
            return name
        try:
            return _NAMED[name]
        except KeyError:
            raise ValueError(f"unknown tool-call format {name!r}; expected one of {sorted(_NAMED)}") from None

    def render(self, calls: list[dict[str, Any]]) -> str:
        """The text of ``calls`` (dicts with ``name`` and ``arguments``) in this format."""
        dump = lambda v: json.dumps(v, ensure_ascii=False)
        if self.each_call:
            return self.separator.join(f"{self.open}{dump(c)}{self.close}" for c in calls)
        body = calls if (self.always_array or len(calls) != 1) else calls[0]
        return f"{self.open}{dump(body)}{self.close}"


JSON = ToolCallFormat("json")
"""Plain JSON: one call object, or an array of calls when parallel."""
HERMES = ToolCallFormat("hermes", "<tool_call>\n", "\n</tool_call>", each_call=True)
"""Hermes/Qwen: ``<tool_call>\\n{...}\\n</tool_call>`` per call."""
SMOLLM2 = ToolCallFormat("smollm2", "<tool_call>", "</tool_call>", always_array=True)
"""SmolLM2 family: ``<tool_call>[{...}, ...]</tool_call>``."""
_NAMED = {"json": JSON, "hermes": HERMES, "qwen": HERMES, "smollm2": SMOLLM2}


# --------------------------------------------------------------------------- prompts

_PROMPTS = {
    "smollm2": (
        "You are an expert in composing functions. You are given a question and a set of possible functions.\n"
        "Based on the question, make one or more function/tool calls to achieve the purpose.\n"
        "You have access to the following tools:\n<tools>{tools}</tools>\n"
        "Answer ONLY with the calls, in this format, with no other text:\n"
        '<tool_call>[\n{{"name": "func_name1", "arguments": {{"argument1": "value1", "argument2": "value2"}}}},\n'
        "(more tool calls as required)\n]</tool_call>"
    ),
    "hermes": (
        "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{tools_lines}\n</tools>\n\n"
        "For each function call, return a json object with function name and arguments within "
        "<tool_call></tool_call> XML tags:\n<tool_call>\n"
        '{{"name": <function-name>, "arguments": <args-json-object>}}\n</tool_call>'
    ),
    "json": (
        "You can call the following tools (JSON Schema of their arguments):\n{tools}\n"
        'To call a tool, answer ONLY with JSON: {{"name": <tool name>, "arguments": <arguments object>}}, '
        "or with a JSON array of such objects to make several calls."
    ),
}


def tools_system_prompt(fmt: ToolCallFormat, tools: list[dict[str, Any]]) -> str:
    """The system prompt that describes ``tools`` (OpenAI dicts) and the call format to a model."""
    template = _PROMPTS.get(fmt.name, _PROMPTS["json"])
    return template.format(
        tools=json.dumps(tools, ensure_ascii=False),
        tools_lines="\n".join(json.dumps(t, ensure_ascii=False) for t in tools),
    )


# --------------------------------------------------------------------------- text without a trigger


def kmp_automaton(trigger: str) -> tuple[list[CharSet], list[list[int]]]:
    """The Knuth–Morris–Pratt automaton of ``trigger`` over character classes.

    Returns ``(classes, delta)``: ``classes`` partitions the code points (one class per
    distinct character of the trigger, then every other character); ``delta[q][k]`` is the
    state after reading a character of class ``k`` in state ``q`` (state ``q`` = the longest
    prefix of the trigger that is a suffix of the text read), where ``len(trigger)`` means the
    trigger has occurred.
    """
    if not trigger:
        raise ValueError("the trigger must not be empty")
    chars = list(dict.fromkeys(trigger))
    classes = [CharSet.of([(ord(c), ord(c))]) for c in chars]
    other = ANY_CHAR.minus(CharSet.of([(ord(c), ord(c)) for c in chars]))
    if other.ranges:
        classes.append(other)
    m = len(trigger)
    fail = [0] * (m + 1)  # fail[i]: longest proper border of trigger[:i]
    k = 0
    for i in range(1, m):
        while k and trigger[i] != trigger[k]:
            k = fail[k]
        if trigger[i] == trigger[k]:
            k += 1
        fail[i + 1] = k
    delta: list[list[int]] = []
    for q in range(m):
        row = []
        for ci in range(len(classes)):
            c = chars[ci] if ci < len(chars) else None
            s = q
            while True:
                if c is not None and trigger[s] == c:
                    row.append(s + 1)
                    break
                if s == 0:
                    row.append(0)
                    break
                s = fail[s]
        delta.append(row)
    return classes, delta


def _union(cs: list[CharSet]) -> CharSet:
    return CharSet.of([r for c in cs for r in c.ranges])


def _star(e: Expr) -> Expr:
    return EMPTY if e == NOTHING else Repeat(e, 0, None)


def text_without(trigger: str) -> Expr:
    """A grammar expression for every text that does not contain ``trigger``.

    Exact, and regular (no rule references), so the automaton stays one small DFA: the
    language of the KMP automaton with the trigger state removed, solved as a system of
    right-linear equations ``X_q = Σ_c c·X_δ(q,c) + ε``. Because ``δ(q, c) ≤ q + 1``, the
    equations are eliminated from the last state down, each self-loop removed with Arden's
    rule (``X = A·X + B  ⇒  X = A*·B``), until ``X_0`` remains.
    """
    classes, delta = kmp_automaton(trigger)
    m = len(trigger)
    # forms[q]: (coefficients {state: Expr}, constant Expr) of X_q
    forms: list[tuple[dict[int, Expr], Expr]] = []
    for q in range(m):
        by_target: dict[int, list[CharSet]] = {}
        for ci, t in enumerate(delta[q]):
            if t < m:
                by_target.setdefault(t, []).append(classes[ci])
        forms.append(({t: _union(cs) for t, cs in by_target.items()}, EMPTY))
    solved: dict[int, tuple[dict[int, Expr], Expr]] = {}
    for q in reversed(range(m)):
        coef, const = dict(forms[q][0]), forms[q][1]
        if q + 1 in coef:  # substitute the already solved X_{q+1}
            a = coef.pop(q + 1)
            sub_coef, sub_const = solved[q + 1]
            for t, e in sub_coef.items():
                coef[t] = alt(coef[t], seq(a, e)) if t in coef else seq(a, e)
            const = alt(const, seq(a, sub_const))
        if q in coef:  # Arden: X_q = A* (rest)
            loop = _star(coef.pop(q))
            coef = {t: seq(loop, e) for t, e in coef.items()}
            const = seq(loop, const)
        solved[q] = (coef, const)
    coef, const = solved[0]
    assert not coef, "X_0 must be closed after elimination"
    return const


def text_not_starting_with(chars: str, *, skip: CharSet | None = None) -> Expr:
    """Any text whose first character outside ``skip`` is not one of ``chars`` (or that is only ``skip``)."""
    banned = CharSet.of([(ord(c), ord(c)) for c in chars])
    skip = skip or CharSet(())
    first = ANY_CHAR.minus(banned).minus(skip)
    return seq(Repeat(skip, 0, None), alt(EMPTY, seq(first, Repeat(ANY_CHAR, 0, None)))) if skip.ranges else \
        alt(EMPTY, seq(first, Repeat(ANY_CHAR, 0, None)))


__all__ += ["text_not_starting_with", "tools_system_prompt"]
