"""Code-point ranges as UTF-8 byte-range sequences (the classic "utf8-ranges" split).

A byte-level automaton cannot test "is this code point in [lo, hi]" directly; it needs the
set of UTF-8 encodings of that range as a union of *byte-range sequences* such as
``[E0][A0-BF][80-BF]``. :func:`utf8_sequences` computes that union, following the algorithm
of Rust's ``regex-syntax`` (``utf8.rs``): split the range until both ends encode to the same
length and every continuation byte spans a full or identical sub-range, then read the byte
ranges off the encodings of the two ends.
"""
from __future__ import annotations

from functools import lru_cache

from ..grammar import CharSet

__all__ = ["utf8_sequences", "charset_to_byte_sequences", "ByteSequence"]

ByteSequence = tuple[tuple[int, int], ...]
"""Inclusive ``(lo_byte, hi_byte)`` ranges, one per byte position."""

_MAX_CODEPOINT = 0x10FFFF
_SURROGATE_LO, _SURROGATE_HI = 0xD800, 0xDFFF
# Largest code point encodable in 1, 2 and 3 bytes.
_MAX_BY_LENGTH = (0x7F, 0x7FF, 0xFFFF)


def _split_off_surrogates(lo: int, hi: int) -> list[tuple[int, int]]:
    """``[lo, hi]`` minus the surrogate block, as zero, one or two ranges."""
    out = []
    if lo < _SURROGATE_LO:
        out.append((lo, min(hi, _SURROGATE_LO - 1)))
    if hi > _SURROGATE_HI:
        out.append((max(lo, _SURROGATE_HI + 1), hi))
    return [(a, b) for a, b in out if a <= b]


def utf8_sequences(lo: int, hi: int) -> list[ByteSequence]:
    """Byte-range sequences whose union is exactly the UTF-8 encodings of ``[lo, hi]``.

    Surrogates are skipped (they have no UTF-8 encoding); an empty range gives ``[]``.
    The sequences are disjoint and come out in increasing code-point order.
    """
    lo, hi = max(lo, 0), min(hi, _MAX_CODEPOINT)
    if lo > hi:
        return []
    out: list[ByteSequence] = []
    # A stack (reversed so ranges pop in ascending order) instead of recursion.
    stack = list(reversed(_split_off_surrogates(lo, hi)))
    while stack:
        start, end = stack.pop()
        while True:
            split = _split_point(start, end)
            if split is None:
                break
            stack.append((split + 1, end))
            end = split
        out.append(_sequence(start, end))
    return out


def _split_point(start: int, end: int) -> int | None:
    """Where ``[start, end]`` must be cut so each piece is one byte-range sequence, or None."""
    # Both ends must encode to the same number of bytes.
    for m in _MAX_BY_LENGTH:
        if start <= m < end:
            return m
    if end <= 0x7F:
        return None
    # For each continuation-byte position i (6 bits each, lowest first): if the ends differ
    # above those bits, the low bits must span the full 0..m range, or the piece is cut so
    # that they do.
    for i in range(1, 4):
        m = (1 << (6 * i)) - 1
        if start & ~m != end & ~m:
            if start & m != 0:
                return start | m
            if end & m != m:
                return (end & ~m) - 1
    return None


def _sequence(start: int, end: int) -> ByteSequence:
    """Read the byte ranges off the (equal-length) encodings of the two ends."""
    a = chr(start).encode("utf-8")
    b = chr(end).encode("utf-8")
    assert len(a) == len(b), (start, end)
    return tuple(zip(a, b))


@lru_cache(maxsize=8192)  # the same classes (any string character, digits...) recur in every grammar
def charset_to_byte_sequences(cs: CharSet) -> tuple[ByteSequence, ...]:
    """:func:`utf8_sequences` over every range of ``cs`` (disjoint ranges give disjoint output)."""
    out: list[ByteSequence] = []
    for lo, hi in cs.ranges:
        out.extend(utf8_sequences(lo, hi))
    return tuple(out)
