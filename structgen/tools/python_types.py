"""Python callables → tool definitions, and JSON arguments → the callable's Python types.

Supported annotations (anything else is refused when the tool is defined, naming the
parameter and the annotation):

| annotation | JSON Schema | converted back to |
|---|---|---|
| ``int``, ``float``, ``bool``, ``str``, ``None`` | ``integer``, ``number``, ``boolean``, ``string``, ``null`` | the same (an integral ``float`` argument arrives as ``int`` in JSON and is made ``float``) |
| ``Optional[X]``, ``X | None``, ``Union[X, Y]`` | ``anyOf`` (``type`` list for scalars) | the first member that fits |
| ``Literal[...]`` | ``enum`` | the value |
| ``enum.Enum`` subclasses | ``enum`` of the member values | the member |
| ``list[X]``, ``Sequence[X]`` | ``array`` of X | ``list`` |
| ``tuple[X, Y]`` / ``tuple[X, ...]`` | ``prefixItems`` (fixed length) / ``array`` | ``tuple`` |
| ``dict[str, X]``, ``Mapping[str, X]`` | ``object`` with ``additionalProperties`` X | ``dict`` |
| dataclasses, ``TypedDict`` | ``object``, fields as properties, ``additionalProperties: false`` | the dataclass / a dict |
| ``Any`` | any JSON value | as parsed |
| ``Annotated[X, "text"]`` | X with ``description`` "text" | as X |

A parameter with a default is optional (the default is recorded when it is JSON). Parameter
descriptions come from the docstring: Google (``Args:``), reST (``:param x:``) and numpy
(``Parameters`` / ``----------``) styles.
"""
from __future__ import annotations

import dataclasses
import enum
import inspect
import json
import math
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["Mismatch", "UnsupportedAnnotation", "convert_arguments", "function_schema", "parse_docstring"]

_NONE = type(None)


class UnsupportedAnnotation(TypeError):
    """An annotation with no JSON Schema counterpart (the caller adds tool and parameter)."""


class Mismatch(ValueError):
    """A JSON value that does not fit an annotation; ``path`` is where, from the argument down."""

    def __init__(self, message: str, path: tuple = ()) -> None:
        super().__init__(message)
        self.message = message
        self.path = path


# --------------------------------------------------------------------------- docstrings

_SECTION_END = re.compile(r"^\s*(Returns?|Yields?|Raises?|Examples?|Notes?|See Also|Attributes|References|Warnings?)\s*:?\s*$")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """``(summary, {parameter: description})`` from a Google, reST or numpy docstring.

    The summary is the first paragraph. Descriptions spanning several lines are joined.
    """
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    summary_lines: list[str] = []
    for ln in lines:
        if not ln.strip() or ln.strip().startswith(":") or re.match(r"^\s*(Args|Arguments|Parameters)\s*:?\s*$", ln):
            break
        summary_lines.append(ln.strip())
    params: dict[str, str] = {}
    # reST / Sphinx: ":param [type] name: text"
    current = None
    for ln in lines:
        m = re.match(r"^\s*:param\s+(?:[^:]*\s)?(\*{0,2}\w+)\s*:\s*(.*)$", ln)
        if m:
            current = m.group(1).lstrip("*")
            params[current] = m.group(2).strip()
        elif current and ln.strip() and not ln.strip().startswith(":") and ln.startswith((" ", "\t")):
            params[current] += " " + ln.strip()
        else:
            current = None
    # Google: "Args:" then "name (type): text", continuation lines indented deeper
    for i, ln in enumerate(lines):
        if re.match(r"^\s*(Args|Arguments|Parameters|Keyword Args)\s*:\s*$", ln):
            base = len(ln) - len(ln.lstrip())
            current = None
            item_indent = None
            for nxt in lines[i + 1:]:
                if not nxt.strip():
                    continue
                ind = len(nxt) - len(nxt.lstrip())
                if ind <= base:
                    break
                m = re.match(r"^\s*\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$", nxt)
                if m and (item_indent is None or ind <= item_indent):
                    item_indent = ind
                    current = m.group(1)
                    params[current] = m.group(2).strip()
                elif current:
                    params[current] = (params[current] + " " + nxt.strip()).strip()
    # numpy: "Parameters" underlined, then "name : type" and indented text
    for i, ln in enumerate(lines[:-1]):
        if ln.strip() == "Parameters" and set(lines[i + 1].strip()) == {"-"}:
            current = None
            for nxt in lines[i + 2:]:
                if not nxt.strip():
                    continue
                if _SECTION_END.match(nxt) or (set(nxt.strip()) == {"-"}):
                    break
                if not nxt.startswith((" ", "\t")):
                    m = re.match(r"^\*{0,2}(\w+)\s*(?::.*)?$", nxt.strip())
                    if not m:
                        break
                    current = m.group(1)
                    params.setdefault(current, "")
                elif current:
                    params[current] = (params[current] + " " + nxt.strip()).strip()
    # a numpy section header line ("Returns") that slipped into a description is cut off
    return " ".join(summary_lines), {k: v for k, v in params.items() if v}


# --------------------------------------------------------------------------- annotations → schema


def _is_typeddict(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__required_keys__")


def _origin(tp: Any) -> Any:
    return typing.get_origin(tp)


def annotation_schema(tp: Any, *, _seen: tuple = ()) -> dict[str, Any] | bool:
    """The JSON Schema of one annotation. Raises :class:`UnsupportedAnnotation`."""
    if tp is Any:
        return {}
    if tp is None or tp is _NONE:
        return {"type": "null"}
    if tp is bool:
        return {"type": "boolean"}
    if tp is int:
        return {"type": "integer"}
    if tp is float:
        return {"type": "number"}
    if tp is str:
        return {"type": "string"}
    origin = _origin(tp)
    if origin is typing.Annotated:
        base, *meta = typing.get_args(tp)
        inner = annotation_schema(base, _seen=_seen)
        annotated = dict(inner) if isinstance(inner, dict) else {}  # True (any value): only the description
        text = [m for m in meta if isinstance(m, str)]
        if text:
            annotated["description"] = " ".join(text)
        return annotated
    if origin is typing.Literal:
        values = list(typing.get_args(tp))
        for v in values:
            if not isinstance(v, (str, int, float, bool, type(None))):
                raise UnsupportedAnnotation(f"Literal value {v!r} is not a JSON scalar")
        return {"enum": [v.value if isinstance(v, enum.Enum) else v for v in values]}
    if origin in (typing.Union, types.UnionType):
        members = typing.get_args(tp)
        schemas = [annotation_schema(m, _seen=_seen) for m in members]
        simple = [s.get("type") for s in schemas if isinstance(s, dict) and set(s) == {"type"} and isinstance(s["type"], str)]
        if len(simple) == len(schemas):
            return {"type": list(dict.fromkeys(simple))}
        return {"anyOf": schemas}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        values = [m.value for m in tp]
        for v in values:
            if not isinstance(v, (str, int, float, bool)) or isinstance(v, float) and math.isnan(v):
                raise UnsupportedAnnotation(f"enum {tp.__name__} has a value that is not a JSON scalar: {v!r}")
        schema: dict[str, Any] = {"enum": values}
        doc = inspect.getdoc(tp)
        if doc and doc != inspect.getdoc(enum.Enum) and not doc.startswith("An enumeration"):
            schema["description"] = doc.split("\n\n")[0]
        return schema
    if origin in (list, Sequence, list) or tp in (list, Sequence):
        args = typing.get_args(tp)
        return {"type": "array", "items": annotation_schema(args[0], _seen=_seen)} if args else {"type": "array"}
    if origin is tuple or tp is tuple:
        args = typing.get_args(tp)
        if not args:
            return {"type": "array"}
        if len(args) == 2 and args[1] is Ellipsis:
            return {"type": "array", "items": annotation_schema(args[0], _seen=_seen)}
        if args == ((),):  # tuple[()]
            return {"type": "array", "maxItems": 0}
        return {"type": "array", "prefixItems": [annotation_schema(a, _seen=_seen) for a in args],
                "items": False, "minItems": len(args)}
    if origin in (dict, Mapping, dict) or tp in (dict, Mapping):
        args = typing.get_args(tp)
        if not args:
            return {"type": "object"}
        if args[0] is not str:
            raise UnsupportedAnnotation(f"dict keys must be str (JSON object keys), not {_name(args[0])}")
        return {"type": "object", "additionalProperties": annotation_schema(args[1], _seen=_seen)}
    if dataclasses.is_dataclass(tp) and isinstance(tp, type) or _is_typeddict(tp):
        if tp in _seen:
            raise UnsupportedAnnotation(f"recursive type {tp.__name__} is not supported")
        return _class_schema(tp, _seen + (tp,))
    raise UnsupportedAnnotation(f"annotation {_name(tp)} has no JSON Schema counterpart")


def _name(tp: Any) -> str:
    if typing.get_origin(tp) is not None:  # list[int], Optional[X]: the written form
        return str(tp).replace("typing.", "")
    return getattr(tp, "__qualname__", None) or getattr(tp, "__name__", None) or repr(tp)


def _class_schema(cls: type, seen: tuple) -> dict[str, Any]:
    hints = typing.get_type_hints(cls, include_extras=True)
    summary, docs = parse_docstring(inspect.getdoc(cls) if cls.__doc__ else None)
    if dataclasses.is_dataclass(cls):
        # dataclasses without a docstring get an autogenerated "Name(a: int, ...)" one
        if summary.startswith(cls.__name__ + "("):
            summary = ""
        fields = [(f.name, hints[f.name], f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
                   f.default) for f in dataclasses.fields(cls) if f.init]
    else:
        required = getattr(cls, "__required_keys__")  # a TypedDict class
        fields = [(n, hints[n], n in required, dataclasses.MISSING) for n in hints]
    props: dict[str, Any] = {}
    req: list[str] = []
    for name, hint, is_required, default in fields:
        try:
            sub = annotation_schema(_strip_required(hint), _seen=seen)
        except UnsupportedAnnotation as exc:
            raise UnsupportedAnnotation(f"{cls.__name__}.{name}: {exc}") from None
        sub = dict(sub) if isinstance(sub, dict) else {}
        if name in docs and "description" not in sub:
            sub["description"] = docs[name]
        if not is_required and default is not dataclasses.MISSING and _is_json(default):
            sub["default"] = _jsonable(default)
        props[name] = sub
        if is_required:
            req.append(name)
    schema: dict[str, Any] = {"type": "object", "properties": props, "required": req, "additionalProperties": False}
    if summary:
        schema["description"] = summary
    return schema


def _strip_required(tp: Any) -> Any:
    if _origin(tp) in (typing.Required, typing.NotRequired):
        return typing.get_args(tp)[0]
    return tp


def _jsonable(v: Any) -> Any:
    return v.value if isinstance(v, enum.Enum) else list(v) if isinstance(v, tuple) else v


def _is_json(v: Any) -> bool:
    try:
        json.dumps(_jsonable(v), allow_nan=False)
        return True
    except (TypeError, ValueError):
        return False


def function_schema(fn: Callable[..., Any]) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """``(description, parameters schema, annotations by parameter)`` of a Python callable.

    Raises:
        UnsupportedAnnotation: a parameter without annotation, ``*args``/``**kwargs``, or an
            annotation :func:`annotation_schema` cannot express (message starts with the
            parameter name).
    """
    sig = inspect.signature(fn)
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:  # noqa: BLE001 - unresolvable forward references and the like
        raise UnsupportedAnnotation(f"cannot resolve the type hints: {exc}") from None
    summary, docs = parse_docstring(inspect.getdoc(fn))
    props: dict[str, Any] = {}
    required: list[str] = []
    annotations: dict[str, Any] = {}
    for name, p in sig.parameters.items():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise UnsupportedAnnotation(f"parameter {name!r}: *args and **kwargs cannot be described by a schema")
        if name not in hints:
            raise UnsupportedAnnotation(f"parameter {name!r} has no type annotation")
        try:
            sub = annotation_schema(hints[name])
        except UnsupportedAnnotation as exc:
            raise UnsupportedAnnotation(f"parameter {name!r}: {exc}") from None
        sub = dict(sub) if isinstance(sub, dict) else {}
        if name in docs and "description" not in sub:
            sub["description"] = docs[name]
        if p.default is p.empty:
            required.append(name)
        elif _is_json(p.default):
            sub["default"] = _jsonable(p.default)
        props[name] = sub
        annotations[name] = hints[name]
    params = {"type": "object", "properties": props, "required": required, "additionalProperties": False}
    return summary, params, annotations


# --------------------------------------------------------------------------- JSON → Python


def convert(value: Any, tp: Any, path: tuple = ()) -> Any:
    """Convert a parsed JSON value to annotation ``tp``; raises :class:`Mismatch` (with ``path``)."""
    if tp is Any:
        return value
    if tp is None or tp is _NONE:
        if value is None:
            return None
        raise Mismatch(f"expected null, got {_jtype(value)}", path)
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise Mismatch(f"expected a boolean, got {_jtype(value)}", path)
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise Mismatch(f"expected an integer, got {_jtype(value)}", path)
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise Mismatch(f"expected a number, got {_jtype(value)}", path)
    if tp is str:
        if isinstance(value, str):
            return value
        raise Mismatch(f"expected a string, got {_jtype(value)}", path)
    origin = _origin(tp)
    if origin is typing.Annotated:
        return convert(value, typing.get_args(tp)[0], path)
    if origin in (typing.Required, typing.NotRequired):
        return convert(value, typing.get_args(tp)[0], path)
    if origin is typing.Literal:
        for v in typing.get_args(tp):
            if isinstance(v, enum.Enum) and v.value == value and type(v.value) is type(value):
                return v
            if v == value and type(v) is type(value):
                return v
        raise Mismatch(f"{value!r} is not one of {list(typing.get_args(tp))!r}", path)
    if origin in (typing.Union, types.UnionType):
        errors = []
        for m in typing.get_args(tp):
            try:
                return convert(value, m, path)
            except Mismatch as exc:
                errors.append(exc.message)
        raise Mismatch(f"{value!r} fits none of {_name(tp)} ({'; '.join(errors)})", path)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        for m in tp:
            if m.value == value and type(m.value) is type(value):
                return m
        raise Mismatch(f"{value!r} is not a value of {tp.__name__}", path)
    if origin in (list, Sequence, list) or tp in (list, Sequence):
        if not isinstance(value, list):
            raise Mismatch(f"expected an array, got {_jtype(value)}", path)
        args = typing.get_args(tp)
        return [convert(v, args[0], path + (i,)) for i, v in enumerate(value)] if args else list(value)
    if origin is tuple or tp is tuple:
        if not isinstance(value, list):
            raise Mismatch(f"expected an array, got {_jtype(value)}", path)
        args = typing.get_args(tp)
        if not args:
            return tuple(value)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(convert(v, args[0], path + (i,)) for i, v in enumerate(value))
        if args == ((),):
            args = ()
        if len(value) != len(args):
            raise Mismatch(f"expected {len(args)} items, got {len(value)}", path)
        return tuple(convert(v, a, path + (i,)) for i, (v, a) in enumerate(zip(value, args)))
    if origin in (dict, Mapping, dict) or tp in (dict, Mapping):
        if not isinstance(value, dict):
            raise Mismatch(f"expected an object, got {_jtype(value)}", path)
        args = typing.get_args(tp)
        return {k: convert(v, args[1], path + (k,)) for k, v in value.items()} if args else dict(value)
    if dataclasses.is_dataclass(tp) and isinstance(tp, type) or _is_typeddict(tp):
        if not isinstance(value, dict):
            raise Mismatch(f"expected an object for {tp.__name__}, got {_jtype(value)}", path)
        hints = typing.get_type_hints(tp, include_extras=True)
        unknown = [k for k in value if k not in hints]
        if unknown:
            raise Mismatch(f"unexpected field {unknown[0]!r} for {tp.__name__}", path + (unknown[0],))
        kwargs = {k: convert(v, hints[k], path + (k,)) for k, v in value.items()}
        if _is_typeddict(tp):
            missing = [k for k in tp.__required_keys__ if k not in kwargs]
            if missing:
                raise Mismatch(f"missing field {missing[0]!r} of {tp.__name__}", path)
            return kwargs
        try:
            return tp(**kwargs)
        except TypeError as exc:
            raise Mismatch(f"cannot build {tp.__name__}: {exc}", path) from None
    raise Mismatch(f"cannot convert to {_name(tp)}", path)


def _jtype(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    return type(v).__name__


def convert_arguments(arguments: dict[str, Any], annotations: dict[str, Any]) -> dict[str, Any]:
    """Convert every argument to its parameter's annotation (see :func:`convert`)."""
    out = {}
    for name, value in arguments.items():
        if name not in annotations:
            raise Mismatch(f"unexpected argument {name!r}", (name,))
        out[name] = convert(value, annotations[name], (name,))
    return out
