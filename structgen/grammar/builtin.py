"""The hand-written grammars of ``grammars/`` (shipped as ``structgen.grammars`` package data)."""
from __future__ import annotations

from functools import lru_cache
from importlib.resources import files
from pathlib import Path

from .rules import Grammar

__all__ = ["load_grammar", "grammar_text"]


def grammar_text(name: str) -> str:
    """Lark text of a built-in grammar, e.g. ``"json"``."""
    try:
        res = files("structgen.grammars") / f"{name}.lark"
        if res.is_file():
            return res.read_text(encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError):  # running from a source tree
        pass
    path = Path(__file__).resolve().parents[2] / "grammars" / f"{name}.lark"
    return path.read_text(encoding="utf-8")


@lru_cache(maxsize=None)
def load_grammar(name: str) -> Grammar:
    """A built-in grammar by name (``"json"``, ``"json_compact"``)."""
    return Grammar.from_lark(grammar_text(name))
