"""The Python definitions of ``seq`` and ``alt`` (structgen/grammar/expr.py), whose native
versions (``_core.expr_joins``, src/core/node_init.cpp) tests/test_expr_nodes.py compares
with them."""
from __future__ import annotations

from structgen.grammar import NOTHING, Alt, Expr, Lit, Seq


def seq(*items: Expr) -> Expr:
    """A sequence, flattened; ``NOTHING`` anywhere makes the whole sequence ``NOTHING``."""
    # exact type tests (no node class is subclassed): the converter calls this for nearly
    # every node it builds, and ``it == NOTHING`` went through two dataclass __eq__ calls.
    # One pass flattens and joins adjacent literals (printed grammars stay readable): with a
    # flattened list first and a second pass to join, it led the converter's profile by its
    # own time.
    merged: list[Expr] = []
    last: Lit | None = None  # merged[-1] when it is a literal
    for it in items:
        if type(it) is Seq:  # its items, one level (as they are: a sequence is flat when made here)
            for x in it.items:
                if type(x) is Lit:
                    if last is not None:
                        last = merged[-1] = Lit(last.text + x.text)
                        continue
                    last = x
                else:
                    last = None
                merged.append(x)
        elif type(it) is Lit:
            if last is not None:
                last = merged[-1] = Lit(last.text + it.text)
            else:
                last = it
                merged.append(it)
        elif type(it) is Alt and not it.options:  # NOTHING
            return NOTHING
        else:
            last = None
            merged.append(it)
    return merged[0] if len(merged) == 1 else Seq(tuple(merged))


def alt(*options: Expr) -> Expr:
    """An alternative, flattened, duplicates and ``NOTHING`` removed."""
    flat: list[Expr] = []
    for o in options:
        flat.extend(o.options if isinstance(o, Alt) else (o,))
    if len(flat) <= 16:
        # a list scan: equality stops at the first difference, while hashing walks whole
        # trees (large expressions from regular.py are combined here pairwise, often)
        kept: list[Expr] = []
        for x in flat:
            if x not in kept:
                kept.append(x)
    else:  # a dict keeps the first occurrence in order; the list scan made an enum of
        kept = list(dict.fromkeys(flat))  # 20,000 strings quadratic (minutes)
    return kept[0] if len(kept) == 1 else Alt(tuple(kept))
