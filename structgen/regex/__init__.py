"""Regular languages: takes regex text and string formats, gives grammar expressions (and their algebra, UTF-8 byte forms)."""
from __future__ import annotations

from .parser import ANY_CHAR, parse_regex, search_expr

__all__ = ["ANY_CHAR", "parse_regex", "search_expr"]
