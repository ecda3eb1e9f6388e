"""String ``format``s as regular expressions over the decoded string.

Each pattern accepts only strings that the format's RFC (and ``jsonschema``'s format checker)
accepts — possibly fewer: e.g. hostnames have at most 4 labels, e-mail local parts use the
common dot-atom characters, dates allow day 31 in every month only where the checker would
too (days are range-checked per month by structure, not by calendar; ``2023-02-30`` is
refused by the month-specific day ranges below). Formats not listed raise
``UnsupportedSchemaError``.
"""
from __future__ import annotations

__all__ = ["FORMAT_PATTERNS"]

_DAY_31 = r"(0[1-9]|[12][0-9]|3[01])"
_DAY_30 = r"(0[1-9]|[12][0-9]|30)"
_DAY_29 = r"(0[1-9]|1[0-9]|2[0-9])"
_DAY_28 = r"(0[1-9]|1[0-9]|2[0-8])"
_YEAR = r"([0-9]{3}[1-9]|[0-9]{2}[1-9][0-9]|[0-9][1-9][0-9]{2}|[1-9][0-9]{3})"  # no year 0000
# leap years (Gregorian): divisible by 4 and not by 100, or by 400 (0000 excluded as above)
_LEAP_YEAR = r"([0-9]{2}(0[48]|[2468][048]|[13579][26])|(0[48]|[2468][048]|[13579][26])00)"
_DATE = (rf"({_YEAR}-((0[13578]|1[02])-{_DAY_31}|(0[469]|11)-{_DAY_30}|02-{_DAY_28})"
         rf"|{_LEAP_YEAR}-02-29)")
# RFC 3339 full-time; no leap second (":60"), which jsonschema's checker refuses
_TIME = r"([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]+)?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"
# RFC 3339 appendix A: a year is followed by months only, an hour by minutes only ("P1Y2D" is
# no duration)
_DUR_DATE = r"([0-9]+Y([0-9]+M([0-9]+D)?)?|[0-9]+M([0-9]+D)?|[0-9]+D)"
_DUR_TIME = r"T([0-9]+H([0-9]+M([0-9]+S)?)?|[0-9]+M([0-9]+S)?|[0-9]+S)"
_OCTET = r"(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_IPV4 = rf"({_OCTET}\.){{3}}{_OCTET}"
# RFC 1123 host names: at most 4 labels here, the last at most 61 characters, so that the
# whole name stays within 253 characters
_LABEL = r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_LAST_LABEL = r"[A-Za-z0-9]([A-Za-z0-9-]{0,59}[A-Za-z0-9])?"
_HOSTNAME = rf"{_LABEL}(\.{_LABEL}){{0,2}}(\.{_LAST_LABEL})?"
# IDNA: ASCII labels without "--" (reserved in the 3rd and 4th positions), 63 characters at
# most (61 for the 4th), as idna.encode accepts
_IDN_LABEL = r"[A-Za-z0-9](-?[A-Za-z0-9]){0,31}"
_IDN_LAST_LABEL = r"[A-Za-z0-9](-?[A-Za-z0-9]){0,30}"
_IDN_HOSTNAME = rf"{_IDN_LABEL}(\.{_IDN_LABEL}){{0,2}}(\.{_IDN_LAST_LABEL})?"
_JSON_POINTER = r"(/([^/~]|~[01])*)*"
_B64 = r"[A-Za-z0-9+/]"

# RFC 4291 section 2.2 text forms (RFC 3986's IPv6address): eight 16-bit pieces, "::" for one
# run of zero pieces, the last 32 bits optionally as an IPv4 address
_H16 = r"[0-9A-Fa-f]{1,4}"
_LS32 = rf"({_H16}:{_H16}|{_IPV4})"
_IPV6 = "(" + "|".join([
    rf"({_H16}:){{6}}{_LS32}",
    rf"::({_H16}:){{5}}{_LS32}",
    rf"({_H16})?::({_H16}:){{4}}{_LS32}",
    rf"(({_H16}:){{0,1}}{_H16})?::({_H16}:){{3}}{_LS32}",
    rf"(({_H16}:){{0,2}}{_H16})?::({_H16}:){{2}}{_LS32}",
    rf"(({_H16}:){{0,3}}{_H16})?::{_H16}:{_LS32}",
    rf"(({_H16}:){{0,4}}{_H16})?::{_LS32}",
    rf"(({_H16}:){{0,5}}{_H16})?::{_H16}",
    rf"(({_H16}:){{0,6}}{_H16})?::",
]) + ")"


def _rfc3986(unreserved: str, private: str = "") -> dict[str, str]:
    """RFC 3986 section 3 (URI, URI-reference) as regular expressions; with the ``i``-rules of
    RFC 3987 when ``unreserved`` adds ucschar and ``private`` is iprivate (queries only)."""
    pct = r"%[0-9A-Fa-f]{2}"
    sub = r"!$&'()*+,;="
    u = f"[{unreserved}{sub}]|{pct}"  # unreserved / pct-encoded / sub-delims
    pchar = f"[{unreserved}{sub}:@]|{pct}"
    segment = f"({pchar})*"
    segment_nz = f"({pchar})+"
    segment_nz_nc = f"([{unreserved}{sub}@]|{pct})+"
    ip_future = rf"[vV][0-9A-Fa-f]+\.[{unreserved}{sub}:]+"
    host = rf"(\[({_IPV6}|{ip_future})\]|{_IPV4}|({u})*)"  # IP-literal / IPv4address / reg-name
    authority = rf"(([{unreserved}{sub}:]|{pct})*@)?{host}(:[0-9]*)?"
    abempty = f"(/{segment})*"
    absolute = f"/({segment_nz}(/{segment})*)?"
    rootless = f"{segment_nz}(/{segment})*"
    noscheme = f"{segment_nz_nc}(/{segment})*"
    query = f"([{unreserved}{sub}:@/?{private}]|{pct})*"
    fragment = f"([{unreserved}{sub}:@/?]|{pct})*"
    tail = rf"(\?{query})?(#{fragment})?"
    scheme = r"[A-Za-z][A-Za-z0-9+.\-]*"
    uri = rf"{scheme}:(//{authority}{abempty}|{absolute}|{rootless})?{tail}"
    relative = rf"(//{authority}{abempty}|{absolute}|{noscheme})?{tail}"
    return {"uri": uri, "uri-reference": f"({uri}|{relative})"}


_UNRESERVED = r"A-Za-z0-9\-._~"
_UCSCHAR = ("\u00A0-\uD7FF\uF900-\uFDCF\uFDF0-\uFFEF"
            + "".join(f"{chr(p << 16)}-{chr((p << 16) | 0xFFFD)}" for p in range(1, 14))
            + "\U000E1000-\U000EFFFD")
_IPRIVATE = "\uE000-\uF8FF\U000F0000-\U000FFFFD\U00100000-\U0010FFFD"
_URI = _rfc3986(_UNRESERVED)
_IRI = _rfc3986(_UNRESERVED + _UCSCHAR, _IPRIVATE)

# e-mail (RFC 5321 Mailbox): a subset, the common dot-atom local parts and host-name domains
# of 2 to 4 labels
_LOCAL = r"[A-Za-z0-9_%+-]+(\.[A-Za-z0-9_%+-]+){0,3}"

FORMAT_PATTERNS: dict[str, str] = {
    "date": _DATE,
    "time": _TIME,
    "date-time": rf"{_DATE}[Tt]{_TIME}",
    "duration": rf"P([0-9]+W|{_DUR_DATE}({_DUR_TIME})?|{_DUR_TIME})",
    "uuid": r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
    "ipv4": _IPV4,
    "ipv6": _IPV6,
    "hostname": _HOSTNAME,
    "email": rf"{_LOCAL}@{_LABEL}(\.{_LABEL}){{0,2}}\.{_LAST_LABEL}",
    "uri": _URI["uri"],
    "uri-reference": _URI["uri-reference"],
    "iri": _IRI["uri"],
    "iri-reference": _IRI["uri-reference"],
    "idn-email": rf"{_LOCAL}@{_IDN_LABEL}(\.{_IDN_LABEL}){{0,2}}\.{_IDN_LAST_LABEL}",
    "idn-hostname": _IDN_HOSTNAME,
    "json-pointer": _JSON_POINTER,
    # jsonschema's checker refuses a digit after a 0 ("100"): so no 0 before the last digit
    "relative-json-pointer": rf"(0|[1-9]+0?)(#|{_JSON_POINTER})",
    # RFC 6570 literals (no "'", '"', "<", ">", "\\", "^", "`", "{", "|", "}") and simple
    # expressions ({var}, {+var}, {?x,y}...)
    "uri-template": r"([A-Za-z0-9\-._~:/?#\[\]@!$&()*+,;=]|%[0-9A-Fa-f]{2}|\{[+#./;?&]?[A-Za-z0-9_]+(,[A-Za-z0-9_]+)*\})*",
    # a subset: patterns of letters, digits, spaces and underscores (valid in every dialect)
    "regex": r"[A-Za-z0-9 _]*",
    # OpenAPI "byte": base64 (RFC 4648 section 4) with padding, in canonical form (section
    # 3.5: pad bits zero, which every decoder accepts, strict ones included)
    "byte": rf"({_B64}{{4}})*({_B64}{{2}}[AEIMQUYcgkosw048]=|{_B64}[AQgw]==)?",
    # OpenAPI "password": a hint to obscure the input; every string is one
    "password": f"[{chr(0)}-{chr(0x10FFFF)}]*",
}
