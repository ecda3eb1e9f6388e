"""The expression node classes' native ``__init__`` (``_core.install_slots_init``) behaves as
the ``__init__`` that ``dataclass`` generates for them: the same fields from the same
arguments, the same defaults, the same TypeErrors; the nodes stay frozen, hashable, equal by
value, picklable and ``dataclasses.replace``-able."""
from __future__ import annotations

import copy
import dataclasses
import pickle

import pytest

from structgen.grammar import Alt, CharSet, Lit, Ref, Regex, Repeat, Seq

CLASSES = (Lit, Regex, CharSet, Seq, Alt, Repeat, Ref)


def _twin(cls: type) -> type:
    """The class as ``dataclass`` makes it, with its generated ``__init__``."""
    spec = [(f.name, f.type, dataclasses.field() if f.default is dataclasses.MISSING else dataclasses.field(default=f.default))
            for f in dataclasses.fields(cls)]
    return dataclasses.make_dataclass(cls.__name__, spec, frozen=True, slots=True)


def _values(obj) -> tuple:
    return tuple(getattr(obj, f.name) for f in dataclasses.fields(obj))


def _calls(cls: type) -> list[tuple[tuple, dict]]:
    names = [f.name for f in dataclasses.fields(cls)]
    x, y, z = Lit("x"), 2, None
    vals = [x, y, z, "w"][:len(names)]
    out = [((), {}), (tuple(vals), {}), (tuple(vals) + ("extra",), {}), ((), dict(zip(names, vals))),
           (tuple(vals[:1]), {}), (tuple(vals[:1]), {names[0]: x}), ((), {"nope": 1}),
           ((), {names[-1]: z}), (tuple(vals[:1]), dict(zip(names[1:], vals[1:])))]
    return out


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_native_init_is_the_dataclass_init(cls):
    assert not hasattr(cls.__init__, "__code__"), "the native __init__ is not installed"
    twin = _twin(cls)
    for args, kwargs in _calls(cls):
        try:
            want = ("ok", _values(twin(*args, **kwargs)))
        except TypeError as e:
            want = ("TypeError", str(e))
        try:
            got = ("ok", _values(cls(*args, **kwargs)))
        except TypeError as e:
            got = ("TypeError", str(e))
        assert got == want, (cls.__name__, args, kwargs)


def test_nodes_stay_frozen_values():
    r = Repeat(Seq((Lit("a"), CharSet(((48, 57),)))), 1, None)
    assert r == Repeat(item=Seq((Lit("a"), CharSet(((48, 57),)))), min=1) and hash(r) == hash(copy.deepcopy(r))
    assert pickle.loads(pickle.dumps(r)) == r
    assert dataclasses.replace(r, max=3) == Repeat(r.item, 1, 3)
    assert Regex("a+") == Regex("a+", "") and Alt(()) != Seq(())
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.min = 2  # type: ignore[misc]


def test_native_seq_and_alt_equal_the_python_definitions():
    """``seq`` and ``alt`` (native, ``_core.expr_joins``) against their Python definitions
    (tests/reference_expr.py) on random argument lists: literals to join, nested sequences
    and alternatives, NOTHING and EMPTY, duplicates equal by value and by identity, more than
    16 options (the hashed path), other node kinds; the same result, of the same classes."""
    import random

    from structgen.grammar import EMPTY, NOTHING, Alt, CharSet, Dfa, Lit, Ref, Regex, Repeat, Seq, alt, seq

    from . import reference_expr

    rng = random.Random(5)
    dfa = Dfa("one", (((0x61, 0x61, 0),),), (True,))
    atoms = [Lit("a"), Lit("b"), Lit(""), Ref("r"), Ref("s"), CharSet(((0x30, 0x39),)), Regex("x+"), dfa,
             Repeat(Lit("z"), 0, None), EMPTY, NOTHING]

    def node(depth: int):
        k = rng.randrange(6 if depth else 3)
        if k < 3:
            x = rng.choice(atoms)
            return Lit(x.text) if type(x) is Lit and rng.random() < 0.5 else x  # equal, not identical
        kids = tuple(node(depth - 1) for _ in range(rng.randint(0, 4)))
        return Seq(kids) if k == 3 else Alt(kids) if k == 4 else Repeat(node(depth - 1), 1, 3)

    def shape(x):
        return (type(x).__name__, repr(x))

    for _ in range(3000):
        args = [node(2) for _ in range(rng.choice([0, 1, 2, 3, 5, 20]))]
        for native, python in ((seq, reference_expr.seq), (alt, reference_expr.alt)):
            got, want = native(*args), python(*args)
            assert shape(got) == shape(want), (native.__name__, args)
            if len(args) == 1 and type(args[0]) not in (Seq, Alt):
                assert got is args[0]  # a single plain node comes back as it is
