"""jsonschema validators for checking values at run time (tool calls, generated outputs), with
the patterns Python's ``re`` cannot compile matched as structgen reads them."""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Callable, Iterator

import jsonschema
from jsonschema.exceptions import ValidationError

from ..regex.matching import pattern_search


def search(pattern: str, text: str) -> bool:
    """Whether ``pattern`` matches somewhere in ``text``: Python's ``re`` where it compiles the
    pattern (jsonschema's reading), else structgen's."""
    try:
        return re.search(pattern, text) is not None
    except re.error:
        # \p{...} and other ECMA-262 syntax Python's re lacks: structgen's own reading, the
        # one its grammars enforce (RegexError where structgen cannot read it either)
        return pattern_search(pattern)(text)


def pattern_checks(search: Callable[[str, str], bool]) -> dict[str, Callable[..., Iterator[ValidationError]]]:
    """jsonschema's ``pattern`` and ``patternProperties`` with ``search(pattern, text)`` in
    place of ``re.search`` (for ``jsonschema.validators.extend``)."""

    def pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
        if validator.is_type(instance, "string") and not search(pattern, instance):
            yield ValidationError(f"{instance!r} does not match {pattern!r}")

    def pattern_properties(validator: Any, patterns: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
        if not validator.is_type(instance, "object"):
            return
        for pat, subschema in patterns.items():
            for name, value in instance.items():
                if search(pat, name):
                    yield from validator.descend(value, subschema, path=name, schema_path=pat)

    return {"pattern": pattern, "patternProperties": pattern_properties}


PATTERN_CHECKS = pattern_checks(search)
"""The pattern keywords with :func:`search`."""


@lru_cache(maxsize=None)  # one per dialect: jsonschema builds a new class at each extend
def _with_patterns(cls: type) -> type:
    return jsonschema.validators.extend(cls, PATTERN_CHECKS)


def validator_for(schema: Any, **kwargs: Any) -> Any:
    """A jsonschema validator of ``schema``'s dialect (2020-12 when it names none); keyword
    arguments go to the validator (``format_checker=...``)."""
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return _with_patterns(cls)(schema, **kwargs)
