"""Reference matchers transcribed rule by rule from the ABNF of RFC 3986 (URI) and RFC 3987
(IRI), as parser combinators over end positions (test helper).

Independent of ``structgen.regex.formats`` (which writes the same grammars as regular expressions):
a combinator maps a string and a start position to the set of positions where the rule can
end, so alternatives and repetitions are explored exhaustively, as ABNF means them.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Callable

Rule = Callable[[str, int], frozenset]


def chars(pred: Callable[[str], bool]) -> Rule:
    return lambda s, i: frozenset([i + 1]) if i < len(s) and pred(s[i]) else frozenset()


def lit(text: str, nocase: bool = False) -> Rule:
    def m(s: str, i: int) -> frozenset:
        part = s[i:i + len(text)]
        ok = part.lower() == text.lower() if nocase else part == text
        return frozenset([i + len(text)]) if ok else frozenset()
    return m


def seq(*rules: Rule) -> Rule:
    def m(s: str, i: int) -> frozenset:
        ends = frozenset([i])
        for r in rules:
            ends = frozenset(e for j in ends for e in r(s, j))
            if not ends:
                break
        return ends
    return m


def alt(*rules: Rule) -> Rule:
    return lambda s, i: frozenset().union(*(r(s, i) for r in rules))


def rep(rule: Rule, lo: int = 0, hi: int | None = None) -> Rule:
    def m(s: str, i: int) -> frozenset:
        out, frontier, n = set(), {i}, 0
        if lo == 0:
            out.add(i)
        while frontier and (hi is None or n < hi):
            n += 1
            nxt = {e for j in frontier for e in rule(s, j)}
            if hi is None:
                nxt -= out | frontier if n > lo else set()
            if n >= lo:
                out |= nxt
            frontier = nxt
        return frozenset(out)
    return m


def opt(rule: Rule) -> Rule:
    return rep(rule, 0, 1)


def lazy(get: Callable[[], Rule]) -> Rule:
    return lambda s, i: get()(s, i)


def _in(ranges: str) -> Callable[[str], bool]:
    return lambda c: c in ranges


ALPHA = chars(lambda c: c.isascii() and c.isalpha())
DIGIT = chars(lambda c: "0" <= c <= "9")
HEXDIG = chars(lambda c: c in "0123456789ABCDEFabcdef")  # ABNF strings are case-insensitive

UCS_RANGES = [(0xA0, 0xD7FF), (0xF900, 0xFDCF), (0xFDF0, 0xFFEF)] + [
    ((p << 16), (p << 16) | 0xFFFD) for p in range(1, 14)] + [(0xE1000, 0xEFFFD)]
PRIVATE_RANGES = [(0xE000, 0xF8FF), (0xF0000, 0xFFFFD), (0x100000, 0x10FFFD)]


def _cp_in(ranges):
    return chars(lambda c: any(a <= ord(c) <= b for a, b in ranges))


def build(iri: bool) -> dict[str, Rule]:
    unreserved = alt(ALPHA, DIGIT, chars(_in("-._~")), *([_cp_in(UCS_RANGES)] if iri else []))
    pct_encoded = seq(lit("%"), HEXDIG, HEXDIG)
    sub_delims = chars(_in("!$&'()*+,;="))
    pchar = alt(unreserved, pct_encoded, sub_delims, lit(":"), lit("@"))
    dec_octet = alt(seq(lit("25"), chars(_in("012345"))), seq(lit("2"), chars(_in("01234")), DIGIT),
                    seq(lit("1"), DIGIT, DIGIT), seq(chars(_in("123456789")), DIGIT), DIGIT)
    ipv4 = seq(dec_octet, lit("."), dec_octet, lit("."), dec_octet, lit("."), dec_octet)
    h16 = rep(HEXDIG, 1, 4)
    h16c = seq(h16, lit(":"))
    ls32 = alt(seq(h16, lit(":"), h16), ipv4)

    def upto(n: int) -> Rule:  # [ *n( h16 ":" ) h16 ]
        return opt(seq(rep(h16c, 0, n), h16))

    ipv6 = alt(
        seq(rep(h16c, 6, 6), ls32),
        seq(lit("::"), rep(h16c, 5, 5), ls32),
        seq(opt(h16), lit("::"), rep(h16c, 4, 4), ls32),
        seq(upto(1), lit("::"), rep(h16c, 3, 3), ls32),
        seq(upto(2), lit("::"), rep(h16c, 2, 2), ls32),
        seq(upto(3), lit("::"), h16c, ls32),
        seq(upto(4), lit("::"), ls32),
        seq(upto(5), lit("::"), h16),
        seq(upto(6), lit("::")),
    )
    ipvfuture = seq(lit("v", nocase=True), rep(HEXDIG, 1), lit("."), rep(alt(unreserved, sub_delims, lit(":")), 1))
    ip_literal = seq(lit("["), alt(ipv6, ipvfuture), lit("]"))
    reg_name = rep(alt(unreserved, pct_encoded, sub_delims))
    host = alt(ip_literal, ipv4, reg_name)
    userinfo = rep(alt(unreserved, pct_encoded, sub_delims, lit(":")))
    port = rep(DIGIT)
    authority = seq(opt(seq(userinfo, lit("@"))), host, opt(seq(lit(":"), port)))
    segment = rep(pchar)
    segment_nz = rep(pchar, 1)
    segment_nz_nc = rep(alt(unreserved, pct_encoded, sub_delims, lit("@")), 1)
    path_abempty = rep(seq(lit("/"), segment))
    path_absolute = seq(lit("/"), opt(seq(segment_nz, rep(seq(lit("/"), segment)))))
    path_noscheme = seq(segment_nz_nc, rep(seq(lit("/"), segment)))
    path_rootless = seq(segment_nz, rep(seq(lit("/"), segment)))
    path_empty = lit("")
    query = rep(alt(pchar, lit("/"), lit("?"), *([_cp_in(PRIVATE_RANGES)] if iri else [])))
    fragment = rep(alt(pchar, lit("/"), lit("?")))
    scheme = seq(ALPHA, rep(alt(ALPHA, DIGIT, chars(_in("+-.")))))
    hier_part = alt(seq(lit("//"), authority, path_abempty), path_absolute, path_rootless, path_empty)
    uri = seq(scheme, lit(":"), hier_part, opt(seq(lit("?"), query)), opt(seq(lit("#"), fragment)))
    relative_part = alt(seq(lit("//"), authority, path_abempty), path_absolute, path_noscheme, path_empty)
    relative_ref = seq(relative_part, opt(seq(lit("?"), query)), opt(seq(lit("#"), fragment)))
    return {"uri": uri, "uri-reference": alt(uri, relative_ref), "ipv6": ipv6}


@lru_cache(maxsize=2)
def _rules(iri: bool) -> dict[str, Rule]:
    return build(iri)


def full_match(rule_name: str, text: str, *, iri: bool = False) -> bool:
    return len(text) in _rules(iri)[rule_name](text, 0)
