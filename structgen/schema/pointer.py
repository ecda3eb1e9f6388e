"""JSON Pointer (RFC 6901): the one place its escaping is written (``~`` → ``~0``, ``/`` → ``~1``)."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["escape", "unescape", "child", "from_path"]


def escape(token: Any) -> str:
    """One reference token as written in a pointer (``"a/b"`` → ``"a~1b"``)."""
    text = token if type(token) is str else str(token)
    if "~" not in text and "/" not in text:  # (nearly every name: no copies)
        return text
    # "~" first: escaping "/" first would turn its "~1" into "~01"
    return text.replace("~", "~0").replace("/", "~1")


def unescape(token: str) -> str:
    """One reference token read back (``"a~1b"`` → ``"a/b"``)."""
    # "~1" first: "~01" is "~1" escaped, and must not become "/"
    return token.replace("~1", "/").replace("~0", "~")


def child(base: str, *tokens: Any) -> str:
    """``base`` extended by reference tokens: ``child("/properties", "a/b")`` → ``"/properties/a~1b"``."""
    # (a loop, not a join over a generator: the converter makes a pointer per subschema and
    # keyword, and the generator was most of making one)
    for t in tokens:
        base += "/" + escape(t)
    return base


def from_path(path: Iterable[Any]) -> str:
    """The pointer of a path of keys and indexes (``["a", 0]`` → ``"/a/0"``; ``[]`` → ``""``)."""
    return child("", *path)
