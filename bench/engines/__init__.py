"""One adapter per engine for bench/masks.py (see base.Engine for the interface).

Peers are optional: an adapter whose package is missing raises ImportError from its
constructor, and the bench skips it with a note.
"""
from __future__ import annotations

from .base import Engine

ENGINES = ("structgen", "xgrammar", "llguidance", "outlines_core")


def load_engine(name: str, hf_tokenizer, vocab_size: int) -> Engine:
    """The adapter ``name``, with the tokenizer prepared (the timed one-time work)."""
    module = __import__(f"bench.engines.{name}_engine", fromlist=["Adapter"])
    return module.Adapter(hf_tokenizer, vocab_size)
