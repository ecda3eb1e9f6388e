"""utf8_sequences is exact: its byte-range sequences match precisely the UTF-8 encodings.

Exactness is checked by enumeration: every byte string a sequence matches must decode
(strictly) to one code point inside the range, and the number of byte strings matched must
equal the number of non-surrogate code points in the range. Together these rule out both
missing and extra strings, and overlap between sequences.
"""
from __future__ import annotations

import itertools
import random

import pytest

from structgen.grammar import CharSet
from structgen.regex.utf8 import charset_to_byte_sequences, utf8_sequences


def _valid_count(lo: int, hi: int) -> int:
    """Non-surrogate code points in ``[lo, hi]``."""
    overlap = max(0, min(hi, 0xDFFF) - max(lo, 0xD800) + 1)
    return max(0, hi - lo + 1) - overlap


def _assert_exact(seqs: list, lo: int, hi: int) -> None:
    decoded = []
    for sq in seqs:
        assert 1 <= len(sq) <= 4
        assert all(0 <= a <= b <= 0xFF for a, b in sq), sq
        for bs in itertools.product(*(range(a, b + 1) for a, b in sq)):
            text = bytes(bs).decode("utf-8")  # strict: raises on any invalid encoding
            assert len(text) == 1, bs
            decoded.append(ord(text))
    assert len(decoded) == _valid_count(lo, hi)
    assert len(set(decoded)) == len(decoded), "sequences overlap"
    assert all(lo <= cp <= hi for cp in decoded)


def _matches(seqs: list, data: bytes) -> bool:
    return any(len(sq) == len(data) and all(a <= x <= b for (a, b), x in zip(sq, data)) for sq in seqs)


def test_full_range() -> None:
    seqs = utf8_sequences(0, 0x10FFFF)
    _assert_exact(seqs, 0, 0x10FFFF)
    # The textbook split: 1 + 1 + 4 (3-byte, around E0 and the ED surrogates) + 3 (4-byte).
    assert seqs == [
        ((0x00, 0x7F),),
        ((0xC2, 0xDF), (0x80, 0xBF)),
        ((0xE0, 0xE0), (0xA0, 0xBF), (0x80, 0xBF)),
        ((0xE1, 0xEC), (0x80, 0xBF), (0x80, 0xBF)),
        ((0xED, 0xED), (0x80, 0x9F), (0x80, 0xBF)),
        ((0xEE, 0xEF), (0x80, 0xBF), (0x80, 0xBF)),
        ((0xF0, 0xF0), (0x90, 0xBF), (0x80, 0xBF), (0x80, 0xBF)),
        ((0xF1, 0xF3), (0x80, 0xBF), (0x80, 0xBF), (0x80, 0xBF)),
        ((0xF4, 0xF4), (0x80, 0x8F), (0x80, 0xBF), (0x80, 0xBF)),
    ]


# Code points where the encoding changes shape: length boundaries, continuation-byte carries,
# the surrogate block and the ends of the code space.
_EDGES = [0, 1, 0x7E, 0x7F, 0x80, 0xBF, 0xC0, 0x7FF, 0x800, 0xFFF, 0x1000, 0xD7FF, 0xD800,
          0xDBFF, 0xDC00, 0xDFFF, 0xE000, 0xFFFD, 0xFFFF, 0x10000, 0x3FFFF, 0x40000, 0xFFFFF,
          0x100000, 0x10FFFE, 0x10FFFF]


@pytest.mark.parametrize("lo", _EDGES)
def test_edge_ranges(lo: int) -> None:
    for hi in _EDGES:
        if hi >= lo and hi - lo <= 0x20000:
            _assert_exact(utf8_sequences(lo, hi), lo, hi)


@pytest.mark.parametrize("seed", range(8))
def test_random_ranges(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(40):
        lo = rng.choice([rng.randrange(0x80), rng.randrange(0x800), rng.randrange(0x10000),
                         rng.randrange(0x110000), rng.choice(_EDGES)])
        width = rng.choice([0, 1, rng.randrange(64), rng.randrange(4096), rng.randrange(0x10000)])
        hi = min(lo + width, 0x10FFFF)
        seqs = utf8_sequences(lo, hi)
        _assert_exact(seqs, lo, hi)
        # and the other direction, by encoding: every code point around the range is
        # matched exactly when it lies inside it
        for cp in range(max(0, lo - 300), min(0x10FFFF, hi + 300) + 1):
            if not 0xD800 <= cp <= 0xDFFF:
                assert _matches(seqs, chr(cp).encode("utf-8")) == (lo <= cp <= hi), hex(cp)


def test_ascii_and_single() -> None:
    assert utf8_sequences(0x41, 0x5A) == [((0x41, 0x5A),)]
    assert utf8_sequences(0x20AC, 0x20AC) == [((0xE2, 0xE2), (0x82, 0x82), (0xAC, 0xAC))]
    assert utf8_sequences(0x61, 0xE9) == [
        ((0x61, 0x7F),), ((0xC2, 0xC2), (0x80, 0xBF)), ((0xC3, 0xC3), (0x80, 0xA9))]


def test_surrogates_skipped() -> None:
    assert utf8_sequences(0xD800, 0xDFFF) == []
    assert utf8_sequences(0xDC00, 0xDC10) == []
    seqs = utf8_sequences(0xD700, 0xE0FF)
    _assert_exact(seqs, 0xD700, 0xE0FF)
    assert not any(_matches(seqs, bytes([0xED, b, 0x80])) for b in range(0xA0, 0xC0))
    assert utf8_sequences(5, 4) == []


def test_charset_to_byte_sequences() -> None:
    cs = CharSet.of([(0x30, 0x39), (0xE9, 0xE9), (0x4E00, 0x9FFF), (0x1F600, 0x1F64F)])
    seqs = charset_to_byte_sequences(cs)
    assert list(seqs) == [s for lo, hi in cs.ranges for s in utf8_sequences(lo, hi)]
    inside = {cp for lo, hi in cs.ranges for cp in range(lo, hi + 1)}
    for cp in range(0, 0x20000):
        if not 0xD800 <= cp <= 0xDFFF:
            assert _matches(seqs, chr(cp).encode("utf-8")) == (cp in inside)
    assert charset_to_byte_sequences(CharSet(())) == ()
