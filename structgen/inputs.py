"""Input files of the command line: read, parsed and checked, with errors that name the file
(and line and column) instead of a traceback."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .errors import GrammarSyntaxError, InputFileError, SchemaError, StructgenError
from .grammar import Grammar
from .guards import deep_recursion, silenced_warnings
from .schema.text import loads_schema
from .schema.to_grammar import schema_to_grammar

__all__ = ["check_grammar", "check_schema", "read_json", "read_text"]


def read_text(path: str) -> str:
    """The text of an input file, or :class:`InputFileError` saying why not (no traceback)."""
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputFileError(path, "no such file") from None
    except IsADirectoryError:
        raise InputFileError(path, "is a folder, not a file") from None
    except UnicodeDecodeError as exc:
        raise InputFileError(path, f"not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise InputFileError(path, f"cannot read: {exc.strerror or exc}") from None


def read_json(path: str) -> Any:
    """An input file parsed as JSON; an error names the file, line and column."""
    text = read_text(path)
    try:
        json.loads(text)  # for the decoder's own position of a syntax error
    except json.JSONDecodeError as exc:
        raise InputFileError(path, f"not JSON: {exc.msg}", line=exc.lineno, column=exc.colno) from None
    except (ValueError, RecursionError):
        pass  # over-long integers, deep nesting: loads_schema says where
    try:
        # strict JSON: also refuses NaN/Infinity and numbers past MAX_NUMBER_LENGTH, located
        return loads_schema(text)
    except SchemaError as exc:
        raise InputFileError(path, _one_line(exc.message)) from None


def check_schema(path: str, schema: Any, *, strict: bool = True, whitespace: str = "compact") -> None:
    """Convert ``schema`` to a grammar (no tokenizer needed, cheap) so that an invalid schema is
    reported with its JSON pointer before any tokenizer or model is loaded."""
    try:
        with deep_recursion(), silenced_warnings():  # lenient mode warns again when compiling
            schema_to_grammar(schema, strict=strict, whitespace=whitespace)
    except RecursionError:
        raise InputFileError(path, "the schema nests too deeply to compile") from None
    except StructgenError as exc:
        raise InputFileError(path, _one_line(str(exc))) from None


def check_grammar(path: str, text: str) -> None:
    """Parse Lark grammar text (no tokenizer needed) and report an error as FILE:LINE:COLUMN."""
    try:
        with deep_recursion():
            Grammar.from_lark(text)
    except GrammarSyntaxError as exc:
        raise InputFileError(path, exc.message, line=exc.line, column=exc.column) from None
    except RecursionError:
        raise InputFileError(path, "the grammar nests too deeply to compile") from None
    except StructgenError as exc:
        raise InputFileError(path, _one_line(str(exc))) from None


def _one_line(message: str) -> str:
    return " ".join(message.split())
