"""Tools and tool sets: definitions → call schemas and grammars → parsed, validated, dispatched calls."""
from __future__ import annotations

import copy
import dataclasses
import inspect
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

import jsonschema

from ..errors import (
    SchemaError,
    ToolCallError,
    ToolDefinitionError,
    ToolError,
    ToolSchemaError,
    UnsupportedSchemaError,
)
from ..grammar import NOTHING, Alt, CharSet, Expr, Grammar, Lit, Ref, Repeat, Seq, alt, opt, seq
from ..guards import silenced_warnings, warn
from ..index.tokenizer import TokenizerInfo
from ..regex.parser import ANY_CHAR
from ..runtime.compiler import GrammarCompiler
from ..schema.pointer import from_path, unescape
from ..schema.to_grammar import schema_to_grammar
from ..schema.validation import validator_for
from .bfcl import bfcl_to_json_schema
from .formats import JSON, ToolCallFormat, text_not_starting_with, text_without, tools_system_prompt
from .python_types import Mismatch, UnsupportedAnnotation, convert_arguments, function_schema

__all__ = [
    "Tool",
    "ToolCall",
    "ToolCallError",
    "ToolChoice",
    "ToolDefinitionError",
    "ToolError",
    "ToolGeneration",
    "ToolSet",
    "load_catalogue",
]

ToolChoice = Any
"""``"required"``, ``"auto"``, ``"none"``, a tool name, a :class:`Tool`, or an OpenAI
``{"type": "function", "function": {"name": ...}}`` dict."""

NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
"""Tool names OpenAI accepts."""
BFCL_NAME_RE = re.compile(r"^[a-zA-Z0-9_.-]{1,64}$")
"""BFCL names also contain dots (``math.hypot``); accepted for BFCL tools only."""
_MODES = ("auto", "required", "none")
_WS = CharSet.of([(0x09, 0x0A), (0x0D, 0x0D), (0x20, 0x20)])  # JSON whitespace


# --------------------------------------------------------------------------- errors




# --------------------------------------------------------------------------- records


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call: the tool's name and its arguments (a JSON object)."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """``{"name": ..., "arguments": {...}}``."""
        return {"name": self.name, "arguments": self.arguments}


@dataclass(frozen=True, eq=False)
class Tool:
    """One tool: a name, a description and the JSON Schema of its arguments.

    Build it with :meth:`from_json_schema`, :meth:`from_openai`, :meth:`from_bfcl` or
    :meth:`from_function`; a :class:`ToolSet` checks that the grammar can enforce it.

    Attributes:
        name: the tool's name.
        description: what it does (shown to the model).
        parameters: JSON Schema of the arguments object, as defined.
        function: the Python callable :meth:`ToolSet.dispatch` calls, if any.
        annotations: parameter name → Python annotation, for converting arguments.
        notes: how the definition was translated (BFCL type names, dropped keywords).
        relaxations: keywords the grammar does not enforce (lenient tool sets only).
    """

    name: str
    description: str
    parameters: dict[str, Any]
    function: Callable[..., Any] | None = None
    annotations: Mapping[str, Any] | None = None
    notes: tuple[str, ...] = ()
    relaxations: tuple[str, ...] = ()
    source: dict[str, Any] | None = field(default=None, repr=False)

    # -- constructors -------------------------------------------------------------------

    @classmethod
    def from_json_schema(cls, name: str, parameters: dict[str, Any] | None = None, *, description: str = "",
                         function: Callable[..., Any] | None = None) -> Tool:
        """A tool from a JSON Schema of its arguments object (``None``: no arguments)."""
        _check_name(name, NAME_RE)
        params = {"type": "object", "properties": {}} if parameters is None else parameters
        _check_parameters(name, params)
        return cls(name, description, copy.deepcopy(params), function)

    @classmethod
    def from_openai(cls, tool: Mapping[str, Any]) -> Tool:
        """A tool from an OpenAI tool dict.

        Accepts the Chat Completions shape ``{"type": "function", "function": {"name",
        "description", "parameters", "strict"}}``, the Responses shape (the same keys next to
        ``"type"``), and a bare function dict. :meth:`to_openai` gives back the same shape.
        """
        if not isinstance(tool, Mapping):
            raise ToolDefinitionError(f"an OpenAI tool must be a dict, not {type(tool).__name__}")
        fn = tool.get("function") if "function" in tool else tool
        if tool.get("type", "function") != "function":
            raise ToolDefinitionError(f"only tools of type 'function' are supported, not {tool.get('type')!r}",
                                      tool=_name_of(fn))
        if not isinstance(fn, Mapping) or "name" not in fn:
            raise ToolDefinitionError("an OpenAI tool needs a 'name' (in 'function' for Chat Completions tools)")
        name = fn["name"]
        _check_name(name, NAME_RE)
        params = fn.get("parameters")
        params = {"type": "object", "properties": {}} if params is None else params
        _check_parameters(name, params)
        desc = fn.get("description") or ""
        if not isinstance(desc, str):
            raise ToolDefinitionError(f"'description' must be a string, not {type(desc).__name__}", tool=name)
        return cls(name, desc, copy.deepcopy(dict(params)), source=copy.deepcopy(dict(tool)))

    @classmethod
    def from_bfcl(cls, function: Mapping[str, Any]) -> Tool:
        """A tool from a BFCL function definition (see :mod:`structgen.tools.bfcl` for the type mapping).

        Names may contain dots (``math.hypot``), which OpenAI would refuse.
        """
        if not isinstance(function, Mapping) or "name" not in function:
            raise ToolDefinitionError("a BFCL function needs a 'name'")
        name = function["name"]
        _check_name(name, BFCL_NAME_RE)
        raw = function.get("parameters") or {"type": "dict", "properties": {}}
        params, notes = bfcl_to_json_schema(raw, tool=name)
        _check_parameters(name, params)
        return cls(name, function.get("description") or "", params, notes=tuple(notes))

    @classmethod
    def from_function(cls, fn: Callable[..., Any], *, name: str | None = None,
                      description: str | None = None) -> Tool:
        """A tool from a Python callable: type hints → schema, docstring → descriptions.

        Raises:
            ToolDefinitionError: a parameter without annotation or with an unsupported one.
        """
        name = name or getattr(fn, "__name__", None)
        if not name or not callable(fn):
            raise ToolDefinitionError(f"{fn!r} is not a named callable; pass name=")
        _check_name(name, NAME_RE)
        try:
            summary, params, annotations = function_schema(fn)
        except UnsupportedAnnotation as exc:
            m = re.match(r"parameter '([^']+)'", str(exc))
            raise ToolDefinitionError(str(exc), tool=name, parameter=m.group(1) if m else None) from None
        return cls(name, summary if description is None else description, params, fn, annotations)

    # -- views --------------------------------------------------------------------------

    @property
    def arguments_schema(self) -> dict[str, Any]:
        """The schema generated and validated against: ``parameters`` with unknown arguments
        refused at the top level (``additionalProperties: false`` unless it says otherwise)."""
        s = dict(self.parameters)
        s.setdefault("type", "object")
        if "additionalProperties" not in s and "patternProperties" not in s:
            s["additionalProperties"] = False
        return s

    def to_openai(self) -> dict[str, Any]:
        """The OpenAI tool dict (the very dict given to :meth:`from_openai`, when it came from one)."""
        if self.source is not None:
            return copy.deepcopy(self.source)
        fn: dict[str, Any] = {"name": self.name}
        if self.description:
            fn["description"] = self.description
        fn["parameters"] = copy.deepcopy(self.parameters)
        return {"type": "function", "function": fn}

    def call_schema(self, base: str = "") -> dict[str, Any]:
        """JSON Schema of a call of this tool, for embedding at JSON pointer ``base``."""
        args = {k: v for k, v in self.arguments_schema.items() if k not in ("$schema", "$id")}
        return {
            "type": "object",
            "properties": {"name": {"const": self.name}, "arguments": _rebase_refs(args, base + "/properties/arguments")},
            "required": ["name", "arguments"],
            "additionalProperties": False,
        }


def _name_of(fn: Any) -> str | None:
    return fn.get("name") if isinstance(fn, Mapping) else None


def _check_name(name: Any, pattern: re.Pattern) -> None:
    if not isinstance(name, str) or not pattern.match(name):
        allowed = "letters, digits, '_', '-'" + (", '.'" if pattern is BFCL_NAME_RE else "")
        raise ToolDefinitionError(f"invalid tool name {name!r}: use 1-64 of {allowed}", tool=name if isinstance(name, str) else None)


def _check_parameters(name: str, params: Any) -> None:
    if not isinstance(params, Mapping):
        raise ToolSchemaError(f"parameters must be a JSON Schema object, not {type(params).__name__}", tool=name)
    t = params.get("type", "object")
    if t != "object":
        raise ToolSchemaError(f"the arguments must be an object ('type': 'object'), not {t!r}",
                              tool=name, pointer="/type", keyword="type")


# Keywords whose values are schemas (maps, lists, single): the only places a "$ref" is a reference.
_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_LISTS = ("anyOf", "allOf", "oneOf", "prefixItems")
_ONES = ("additionalProperties", "additionalItems", "not", "if", "then", "else", "contains", "propertyNames",
         "unevaluatedItems", "unevaluatedProperties")


def _rebase_refs(schema: Any, base: str) -> Any:
    """Prefix every local ``$ref`` (``#/...``) with ``base`` so it resolves inside a larger schema."""
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for k, v in schema.items():
        if k == "$ref" and isinstance(v, str) and v.startswith("#"):
            out[k] = "#" + base + v[1:]
        elif k in _MAPS and isinstance(v, dict):
            out[k] = {n: _rebase_refs(s, base) for n, s in v.items()}
        elif k in _LISTS and isinstance(v, list):
            out[k] = [_rebase_refs(s, base) for s in v]
        elif k == "items":
            out[k] = [_rebase_refs(s, base) for s in v] if isinstance(v, list) else _rebase_refs(v, base)
        elif k in _ONES:
            out[k] = _rebase_refs(v, base)
        else:
            out[k] = v
    return out


# --------------------------------------------------------------------------- catalogue


def _catalogue_dir() -> Any:
    try:
        res = files("structgen") / "data" / "tools"
        if res.is_dir():
            return res
    except (ModuleNotFoundError, FileNotFoundError):  # pragma: no cover
        pass
    return Path(__file__).resolve().parent.parent / "data" / "tools"


def load_catalogue() -> dict[str, dict[str, Any]]:
    """The ready-made tools shipped in ``structgen/data/tools/*.json``: name → OpenAI tool dict."""
    out = {}
    for res in sorted(_catalogue_dir().iterdir(), key=lambda r: r.name):
        if res.name.endswith(".json"):
            tool = json.loads(res.read_text(encoding="utf-8"))
            out[tool["function"]["name"]] = tool
    return out


# --------------------------------------------------------------------------- tool sets


@dataclass(frozen=True)
class ToolGeneration:
    """The result of :func:`structgen.integrations.hf_generate.generate_tool_calls`.

    Attributes:
        text: the output text (tags included).
        calls: the parsed, validated calls (empty when the model answered in text).
        new_tokens: tokens generated.
        seconds: wall time of ``model.generate``.
        complete: the model itself finished a complete output.
        closed: the token budget ran out and the shortest grammatical completion was appended
            (so the output still parses and validates; ``complete`` is then False).
    """

    text: str
    calls: list[ToolCall]
    new_tokens: int
    seconds: float
    complete: bool
    closed: bool = False


class ToolSet:
    """An ordered set of uniquely named tools.

    Args:
        tools: :class:`Tool` objects.
        lenient: a tool whose schema uses keywords the grammar cannot enforce is accepted,
            the keywords recorded in ``Tool.relaxations`` (and warned as
            :class:`~structgen.StructgenWarning`); the default refuses it with
            :class:`~structgen.ToolSchemaError`.

    Raises:
        ToolDefinitionError: duplicate names.
        ToolSchemaError: a schema that is invalid, unsatisfiable, or (strict) not enforceable,
            naming the tool and the JSON pointer inside its parameters.
    """

    def __init__(self, tools: Iterable[Tool], *, lenient: bool = False) -> None:
        self.lenient = lenient
        seen: dict[str, int] = {}
        checked = []
        for i, tool in enumerate(tools):
            if not isinstance(tool, Tool):
                raise ToolDefinitionError(f"expected Tool objects, got {type(tool).__name__} at position {i}")
            if tool.name in seen:
                raise ToolDefinitionError(f"duplicate tool name (positions {seen[tool.name]} and {i})", tool=tool.name)
            seen[tool.name] = i
            checked.append(_check_enforceable(tool, lenient))
        self._tools: dict[str, Tool] = {t.name: t for t in checked}

    # -- constructors -------------------------------------------------------------------

    @classmethod
    def from_openai(cls, tools: Iterable[Mapping[str, Any]], *, lenient: bool = False) -> ToolSet:
        """Tools from OpenAI tool dicts (see :meth:`Tool.from_openai`)."""
        return cls([Tool.from_openai(t) for t in tools], lenient=lenient)

    @classmethod
    def from_bfcl(cls, functions: Iterable[Mapping[str, Any]], *, lenient: bool = False) -> ToolSet:
        """Tools from BFCL function definitions (see :meth:`Tool.from_bfcl`)."""
        return cls([Tool.from_bfcl(f) for f in functions], lenient=lenient)

    @classmethod
    def from_functions(cls, *functions: Callable[..., Any], lenient: bool = False) -> ToolSet:
        """Tools from Python callables (see :meth:`Tool.from_function`)."""
        return cls([Tool.from_function(f) for f in functions], lenient=lenient)

    @classmethod
    def from_catalogue(cls, *names: str) -> ToolSet:
        """Tools from the shipped catalogue (:func:`load_catalogue`); no names: all of them."""
        cat = load_catalogue()
        unknown = [n for n in names if n not in cat]
        if unknown:
            raise ToolError(f"no catalogue tool named {unknown[0]!r}; available: {sorted(cat)}")
        return cls.from_openai([cat[n] for n in (names or cat)])

    # -- container ----------------------------------------------------------------------

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __getitem__(self, name: str) -> Tool:
        try:
            return self._tools[name]
        except KeyError:
            raise ToolError(f"no tool named {name!r}; tools: {list(self._tools)}") from None

    def __repr__(self) -> str:
        return f"ToolSet({list(self._tools)})"

    @property
    def names(self) -> list[str]:
        """Tool names, in definition order."""
        return list(self._tools)

    @property
    def relaxations(self) -> list[str]:
        """Every keyword not enforced by the grammar, prefixed with its tool (lenient mode)."""
        return [f"{t.name}: {r}" for t in self for r in t.relaxations]

    def to_openai(self) -> list[dict[str, Any]]:
        """OpenAI tool dicts; ``ToolSet.from_openai(ts.to_openai())`` defines the same tools."""
        return [t.to_openai() for t in self]

    # -- schemas and grammars ---------------------------------------------------------

    def _chosen(self, tool_choice: ToolChoice) -> list[Tool]:
        if isinstance(tool_choice, Tool):
            tool_choice = tool_choice.name
        if isinstance(tool_choice, Mapping):
            fn = tool_choice.get("function", tool_choice)
            if tool_choice.get("type", "function") != "function" or not isinstance(fn, Mapping) or "name" not in fn:
                raise ToolError(f"tool_choice dict must be {{'type': 'function', 'function': {{'name': ...}}}}, "
                                f"got {tool_choice!r}")
            return [self[fn["name"]]]
        if tool_choice == "required":
            if not self._tools:
                raise ToolError("tool_choice='required' with an empty tool set")
            return list(self)
        if isinstance(tool_choice, str) and tool_choice not in _MODES:
            return [self[tool_choice]]
        raise ToolError(f"tool_choice must be 'required', 'auto', 'none', a tool name or an OpenAI dict, "
                        f"not {tool_choice!r}")

    def json_schema(self, tool_choice: ToolChoice = "required", *, parallel: bool = False, min_calls: int = 1,
                    max_calls: int | None = None) -> dict[str, Any]:
        """The JSON Schema of a valid call (or of the array of calls when ``parallel``).

        One ``anyOf`` branch per tool, each ``{"name": {"const": NAME}, "arguments": ARGS}``,
        so that once the name is written only that tool's arguments are valid. Usable with
        any engine. ``tool_choice`` is ``"required"`` (any tool) or one tool; ``"auto"`` and
        ``"none"`` admit free text and have no JSON Schema (see :meth:`grammar`).
        """
        tools = self._chosen(tool_choice)
        if parallel:
            lo, hi = _bounds(min_calls, max_calls)
            schema: dict[str, Any] = {"type": "array", "items": self._call_schema(tools, "/items"), "minItems": lo}
            if hi is not None:
                schema["maxItems"] = hi
            return schema
        return self._call_schema(tools, "")

    def _call_schema(self, tools: list[Tool], base: str) -> dict[str, Any]:
        if len(tools) == 1:
            return tools[0].call_schema(base)
        return {"anyOf": [t.call_schema(f"{base}/anyOf/{i}") for i, t in enumerate(tools)]}

    def grammar(self, tool_choice: ToolChoice = "required", *, parallel: bool = False, min_calls: int = 1,
                max_calls: int | None = None, format: str | ToolCallFormat = JSON,
                whitespace: Literal["compact", "flexible"] = "compact", max_whitespace: int = 8) -> Grammar:
        """The grammar of a model's answer: calls in ``format``, or free text for ``"auto"``/``"none"``.

        * ``"required"`` or a tool: the calls, wrapped as ``format`` says (no other text);
        * ``"auto"``: free text, or a call. With a tag format the text must not contain the
          trigger tag; once the trigger appears the calls are constrained and closed, and the
          output ends. With plain JSON the answer is a call, or text that does not start with
          ``{`` or ``[``;
        * ``"none"``: free text only (not containing the trigger).

        ``whitespace="flexible"`` allows up to ``max_whitespace`` whitespace characters
        wherever JSON allows whitespace (small models like to write ``[\n{"name": ...``).
        """
        fmt = ToolCallFormat.named(format)
        if tool_choice in ("auto", "none"):
            if tool_choice == "none" or not self._tools:
                return Grammar({"start": text_without(fmt.trigger) if fmt.trigger else Repeat(ANY_CHAR, 0, None)})
            calls, rules, _ = self._calls_expr("required", parallel, min_calls, max_calls, fmt, whitespace,
                                               max_whitespace)
            if fmt.trigger:
                start = seq(text_without(fmt.trigger), opt(calls))
            else:
                ws = _WS if whitespace == "flexible" else None
                start = alt(calls, text_not_starting_with("{[", skip=ws))
            # (not free_names: the matchers' name lexer would read braces and quotes in the prose)
            return Grammar({"start": start, **rules})
        calls, rules, free = self._calls_expr(tool_choice, parallel, min_calls, max_calls, fmt, whitespace,
                                              max_whitespace)
        # Calls alone: distinct member names are kept where the arguments take free names,
        # provided the format's wrapping text holds nothing the name lexer reads as JSON
        return Grammar({"start": calls, **rules}, free_names=free and _lexer_neutral(fmt))

    def _calls_expr(self, tool_choice, parallel, min_calls, max_calls, fmt, whitespace,
                    max_whitespace) -> tuple[Expr, dict[str, Expr], bool]:
        """The calls' expression and rules, with :meth:`_schema_rules`' free names."""
        lo, hi = _bounds(min_calls, max_calls) if parallel else (1, 1)
        if fmt.each_call:
            rules, free = self._schema_rules(self.json_schema(tool_choice), whitespace, max_whitespace)
            block = seq(Lit(fmt.open), Ref("call_start"), Lit(fmt.close)) if fmt.open or fmt.close else Ref("call_start")
            more = Repeat(seq(Lit(fmt.separator), block), lo - 1, None if hi is None else hi - 1)
            return seq(block, more), rules, free
        if parallel or fmt.always_array:
            schema = self.json_schema(tool_choice, parallel=True, min_calls=lo, max_calls=hi)
        else:
            schema = self.json_schema(tool_choice)
        rules, free = self._schema_rules(schema, whitespace, max_whitespace)
        return seq(Lit(fmt.open), Ref("call_start"), Lit(fmt.close)), rules, free

    def _schema_rules(self, schema: dict[str, Any], whitespace: Literal["compact", "flexible"], max_whitespace: int,
                      prefix: str = "call") -> tuple[dict[str, Expr], bool]:
        """The rules of the calls' schema, renamed under ``prefix``, and whether some object
        takes free names (:attr:`Grammar.free_names`)."""
        with silenced_warnings():  # relaxations were recorded (and warned) per tool
            g = schema_to_grammar(schema, strict=not self.lenient, whitespace=whitespace, max_whitespace=max_whitespace)
        names = {n: (f"{prefix}_{n}" if n[:1].islower() or n[:1] == "_" else f"{prefix.upper()}_{n}") for n in g.rules}
        rules = {names[n]: _rename(body, names) for n, body in g.rules.items()}
        return rules, g.free_names

    def compile(self, compiler: Any, tool_choice: ToolChoice = "required", *, parallel: bool = False,
                min_calls: int = 1, max_calls: int | None = None, format: str | ToolCallFormat = JSON,
                whitespace: Literal["compact", "flexible"] = "compact", max_whitespace: int = 8) -> Any:
        """A :class:`~structgen.CompiledGrammar` of :meth:`grammar` for a compiler (or a ``TokenizerInfo``)."""
        if isinstance(compiler, TokenizerInfo):
            compiler = GrammarCompiler(compiler)
        fmt = ToolCallFormat.named(format)
        if fmt == JSON and tool_choice not in ("auto", "none"):
            with silenced_warnings():
                return compiler.compile_json_schema(
                    self.json_schema(tool_choice, parallel=parallel, min_calls=min_calls, max_calls=max_calls),
                    strict=not self.lenient, whitespace=whitespace, max_whitespace=max_whitespace)
        return compiler.compile_grammar(self.grammar(tool_choice, parallel=parallel, min_calls=min_calls,
                                                     max_calls=max_calls, format=fmt, whitespace=whitespace,
                                                     max_whitespace=max_whitespace))

    # -- prompting --------------------------------------------------------------------

    def chat_prompt(self, tokenizer: Any, messages: str | Sequence[Mapping[str, Any]], *,
                    format: str | ToolCallFormat | None = None) -> str:
        """The prompt text: the chat template with these tools, ending with the assistant's turn.

        A template that renders ``tools`` itself gets them (``apply_chat_template(tools=...)``);
        otherwise (SmolLM2-135M's template ignores tools) a system message describing the
        tools and the call format is put first, merged with an existing system message.
        """
        fmt = ToolCallFormat.detect(tokenizer) if format is None else ToolCallFormat.named(format)
        msgs = [{"role": "user", "content": messages}] if isinstance(messages, str) else [dict(m) for m in messages]
        template = getattr(tokenizer, "chat_template", None)
        if isinstance(template, str) and "tools" in template:
            return tokenizer.apply_chat_template(msgs, tools=self.to_openai(), add_generation_prompt=True, tokenize=False)
        system = tools_system_prompt(fmt, self.to_openai())
        if msgs and msgs[0].get("role") == "system":
            msgs[0] = {"role": "system", "content": system + "\n\n" + str(msgs[0].get("content") or "")}
        else:
            msgs.insert(0, {"role": "system", "content": system})
        if template:
            return tokenizer.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
        return "\n\n".join(str(m["content"]) for m in msgs) + "\n\n"

    # -- parsing, validation, dispatch -----------------------------------------------

    def parse(self, text: str, *, format: str | ToolCallFormat | None = None) -> list[ToolCall]:
        """The calls in a model's output, validated with ``jsonschema``.

        Reads ``<tool_call>...</tool_call>`` blocks (each an object or an array of calls)
        when present, else the whole text as one JSON call or array of calls. Text that is
        not JSON and has no blocks is a plain answer: ``[]``.

        Raises:
            ToolCallError: malformed JSON, an unknown tool, or arguments that do not validate
                (naming the tool, the argument and the JSON pointer).
        """
        fmt = None if format is None else ToolCallFormat.named(format)
        open_tag = (fmt.trigger if fmt else None) or "<tool_call>"
        close_tag = (fmt.close.strip() if fmt else "") or "</tool_call>"
        chunks: list[str]
        if open_tag in text:
            pat = re.escape(open_tag) + r"(.*?)" + (f"(?:{re.escape(close_tag)}|$)" if close_tag else "$")
            chunks = [m.group(1) for m in re.finditer(pat, text, re.DOTALL)]
        else:
            stripped = text.strip()
            if not stripped or stripped[0] not in "{[":
                return []
            chunks = [stripped]
        items: list[Any] = []
        for chunk in chunks:
            try:
                value = json.loads(chunk)
            except json.JSONDecodeError as exc:
                raise ToolCallError(f"invalid JSON: {exc.msg} at character {exc.pos} of {chunk.strip()[:80]!r}") from None
            items.extend(value if isinstance(value, list) else [value])
        return [self.validate(item, index=i) for i, item in enumerate(items)]

    def validate(self, call: ToolCall | Mapping[str, Any], *, index: int | None = None) -> ToolCall:
        """Check one call (a :class:`ToolCall` or a ``{"name", "arguments"}`` dict); returns it as a ToolCall.

        Raises:
            ToolCallError: unknown tool, or arguments that violate the tool's schema.
        """
        name: Any
        args: Any
        if isinstance(call, ToolCall):
            name, args = call.name, call.arguments
        else:
            if not isinstance(call, Mapping):
                raise ToolCallError(f"a call must be an object, not {type(call).__name__}", index=index)
            extra = sorted(set(call) - {"name", "arguments"})
            if extra:
                raise ToolCallError(f"unexpected key {extra[0]!r} in the call (expected 'name' and 'arguments')",
                                    tool=call.get("name") if isinstance(call.get("name"), str) else None, index=index)
            name, args = call.get("name"), call.get("arguments")
        if not isinstance(name, str):
            raise ToolCallError(f"the call has no tool name (got {name!r})", index=index)
        if name not in self._tools:
            raise ToolCallError(f"unknown tool; tools: {list(self._tools)}", tool=name, index=index)
        if not isinstance(args, Mapping):
            raise ToolCallError(f"'arguments' must be an object, not {type(args).__name__}", tool=name, index=index)
        schema = self._tools[name].arguments_schema
        err = jsonschema.exceptions.best_match(validator_for(schema).iter_errors(dict(args)))
        if err is not None:
            path = list(err.absolute_path)
            argument = str(path[0]) if path else None
            if argument is None and err.validator == "additionalProperties":
                unknown = sorted(set(args) - set(schema.get("properties", {})))
                argument = unknown[0] if unknown else None
                path = [argument] if argument else []
            if argument is None and err.validator == "required":
                m = re.match(r"'([^']*)' is a required property", err.message)
                argument = m.group(1) if m else None
                path = [argument] if argument else []
            raise ToolCallError(err.message, tool=name, argument=argument, pointer=from_path(path), index=index)
        return ToolCall(name, dict(args))

    def dispatch(self, call: ToolCall | Mapping[str, Any]) -> Any:
        """Validate ``call``, convert its arguments to the function's parameter types, call it.

        Conversion follows the annotations (dataclasses, Enums, tuples, nested lists and
        dicts, ``float`` from integral JSON numbers); tools without annotations get the
        JSON values as they are.

        Raises:
            ToolCallError: invalid call or arguments that do not fit the annotations.
            ToolError: the tool has no Python function.
        """
        call = self.validate(call)
        tool = self._tools[call.name]
        if tool.function is None:
            raise ToolError(f"tool {tool.name!r} has no Python function to dispatch to "
                            f"(define it with Tool.from_function or Tool.from_json_schema(function=...))")
        kwargs = call.arguments
        if tool.annotations is not None:
            try:
                kwargs = convert_arguments(call.arguments, dict(tool.annotations))
            except Mismatch as exc:
                raise ToolCallError(exc.message, tool=tool.name, argument=str(exc.path[0]) if exc.path else None,
                                    pointer=from_path(exc.path)) from None
        positional = []
        try:
            params = inspect.signature(tool.function).parameters
        except (TypeError, ValueError):  # builtins without a signature
            params = MappingProxyType({})
        kwargs = dict(kwargs)
        pos_only = [p for p in params.values() if p.kind is p.POSITIONAL_ONLY]
        last = max((i for i, p in enumerate(pos_only) if p.name in kwargs), default=-1)
        for p in pos_only[: last + 1]:  # positional-only: in order, defaults filling the gaps
            positional.append(kwargs.pop(p.name) if p.name in kwargs else p.default)
        return tool.function(*positional, **kwargs)


def _bounds(min_calls: int, max_calls: int | None) -> tuple[int, int | None]:
    if not isinstance(min_calls, int) or min_calls < 1:
        raise ToolError(f"min_calls must be an integer >= 1, not {min_calls!r}")
    if max_calls is not None and (not isinstance(max_calls, int) or max_calls < min_calls):
        raise ToolError(f"max_calls must be None or an integer >= min_calls ({min_calls}), not {max_calls!r}")
    return min_calls, max_calls


def _lexer_neutral(fmt: ToolCallFormat) -> bool:
    """Whether the text a format wraps its calls in holds no byte the member-name lexer
    (:mod:`structgen.runtime.names`) reads as JSON structure: then it sees each call alone."""
    return not any(c in text for text in (fmt.open, fmt.close, fmt.separator) for c in '"\\{}[]')


def _rename(e: Expr, names: Mapping[str, str]) -> Expr:
    if isinstance(e, Ref):
        return Ref(names[e.name])
    if isinstance(e, Seq):
        return Seq(tuple(_rename(x, names) for x in e.items))
    if isinstance(e, Alt):
        return Alt(tuple(_rename(x, names) for x in e.options))
    if isinstance(e, Repeat):
        return Repeat(_rename(e.item, names), e.min, e.max)
    return e


def _check_enforceable(tool: Tool, lenient: bool) -> Tool:
    """Translate the tool's argument schema once, now: errors surface at definition time.

    Lenient mode also repairs one kind of contradiction found in real tool definitions: an
    ``enum`` (or ``const``) none of whose values has the declared ``type`` (BFCL's
    ``"type": "integer", "enum": ["1", "2", "dontcare"]``). The ``type`` is dropped, the
    values kept, and the repair recorded as a relaxation.
    """
    repairs: list[str] = []
    while True:
        try:
            with silenced_warnings():
                g = schema_to_grammar(tool.arguments_schema, strict=not lenient, refuse_empty_subschemas=True)
            break
        except UnsupportedSchemaError as exc:
            raise ToolSchemaError(f"{exc.message} (pass lenient=True to accept it unenforced)", tool=tool.name,
                                  pointer=exc.pointer, keyword=exc.keyword) from None
        except SchemaError as exc:
            fixed = _drop_conflicting_type(tool.parameters, exc) if lenient and len(repairs) < 100 else None
            if fixed is None:
                hint = " (pass lenient=True to drop the conflicting type)" if exc.keyword in ("enum", "const") else ""
                raise ToolSchemaError(exc.message + hint, tool=tool.name, pointer=exc.pointer,
                                      keyword=exc.keyword) from None
            params, note = fixed
            repairs.append(note)
            tool = dataclasses.replace(tool, parameters=params)
    if g.rules["start"] == NOTHING:
        raise ToolSchemaError("no arguments object satisfies this schema", tool=tool.name)
    relaxed = tuple(repairs) + tuple(g.warnings)
    if not relaxed:
        return tool
    for w in relaxed:
        warn(f"tool {tool.name!r}: {w}", stacklevel=4)
    return dataclasses.replace(tool, relaxations=relaxed)


def _drop_conflicting_type(params: dict[str, Any], exc: SchemaError) -> tuple[dict[str, Any], str] | None:
    if exc.keyword not in ("enum", "const") or exc.pointer is None or not exc.pointer.endswith("/" + exc.keyword):
        return None
    parts = [unescape(p) for p in exc.pointer.split("/")[1:-1]]
    params = copy.deepcopy(params)
    node: Any = params
    for p in parts:
        node = node[int(p)] if isinstance(node, list) else node.get(p) if isinstance(node, dict) else None
        if node is None:
            return None
    if not isinstance(node, dict) or "type" not in node:
        return None
    t = node.pop("type")
    where = exc.pointer[: -len(exc.keyword) - 1] or "#"
    return params, f"{where}: type {t!r} contradicts every {exc.keyword} value; type dropped, {exc.keyword} kept"


def shortest_completion(matcher: Any) -> bytes | None:
    """A shortest text (bytes) that completes the matcher's grammar from where it stands, or None.

    Read from the compiled grammar (:meth:`~structgen.index.token_index.TokenIndex.shortest_completion`:
    distances computed at compile time on the pushdown automaton, printable ASCII preferred
    among equally short choices). The matcher is not moved.
    """
    if matcher.is_completed():
        return b""
    return matcher.compiled.index.shortest_completion(matcher.state)
