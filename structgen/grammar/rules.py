"""A context-free grammar: named rules over regular terminals, with a start rule."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from .. import _core
from ..errors import GrammarError
from .expr import Alt, Expr, Ref, Repeat, Seq, expr_to_lark
from .lark_reader import read_lark_rules

__all__ = ["Grammar"]


@dataclass(frozen=True)
class Grammar:
    """A context-free grammar: named rules over regular terminals, with a start rule.

    Rule names follow Lark: lowercase names are rules, UPPERCASE names are terminals (whose
    bodies may only reference other terminals). ``str(grammar)`` is Lark text.
    """

    rules: Mapping[str, Expr]
    start: str = "start"
    warnings: tuple[str, ...] = field(default=(), compare=False)
    free_names: bool = field(default=False, compare=False)
    """The language is JSON text with objects whose member names the grammar does not fix
    (any name, a pattern): matchers then keep the names of each object distinct, which no
    context-free grammar can say (see ``structgen.runtime.names``). Lark text does not carry it."""
    names_can_trap: bool = field(default=True, compare=False)
    """With ``free_names``: some object limits the names it takes beyond its declared ones
    (``propertyNames``, a name class whose value schema is unsatisfiable), so a name half
    written can have every ending taken already, or a comma no fresh name after it; matchers
    then clear such tokens too. ``False`` (made by the JSON Schema converter where it holds)
    when every object takes either only its declared names, in order, once each, or any other
    name besides: neither can run out of fresh names, and only repeats are cleared."""
    origins: Mapping[str, str] = field(default_factory=dict, compare=False)
    """For grammars made from a JSON Schema: the JSON pointer of the construct each rule was
    generated from, so an automaton too large to build names the part of the schema that grew."""
    constructs: Mapping[str, Expr] = field(default_factory=dict, compare=False)
    """For grammars made from a JSON Schema: the expression made for each schema node, by JSON
    pointer (the first one where a node was converted several times); used to locate the
    construct whose automaton is too large."""
    def __post_init__(self) -> None:
        if self.start not in self.rules:
            raise GrammarError(f"start rule {self.start!r} is not defined")
        # one native walk over all rules, each shared subtree once (as many Python walks as
        # rules, each with its own visited set, were a twentieth of compiling a schema)
        rules = self.rules if type(self.rules) is dict else dict(self.rules)
        bad = _core.undefined_reference(rules, (Seq, Alt, Repeat, Ref))
        if bad is not None:
            raise GrammarError(f"rule {bad[0]!r} references undefined symbol {bad[1]!r}")

    def __str__(self) -> str:
        order = [self.start] + [n for n in self.rules if n != self.start]
        lines = []
        for n in order:
            body = self.rules[n]
            sep = ": " if n[:1].islower() or n[:1] == "_" and n[1:2].islower() else ": "
            lines.append(f"{n}{sep}{expr_to_lark(body)}")
        return "\n".join(lines) + "\n"

    @classmethod
    def from_lark(cls, text: str, *, start: str = "start") -> "Grammar":
        """Read Lark grammar text (see :mod:`structgen.grammar.lark_reader` for what is supported)."""
        return cls(read_lark_rules(text, start=start), start)
