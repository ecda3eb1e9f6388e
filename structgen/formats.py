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
_DAY_28 = r"(0[1-9]|1[0-9]|2[0-8])"
# Feb 29 is refused (leap years are not regular); every other real date is accepted
_YEAR = r"([0-9]{3}[1-9]|[0-9]{2}[1-9][0-9]|[0-9][1-9][0-9]{2}|[1-9][0-9]{3})"  # no year 0000
_DATE = rf"{_YEAR}-((0[13578]|1[02])-{_DAY_31}|(0[469]|11)-{_DAY_30}|02-{_DAY_28})"
_TIME = r"([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,9})?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"
_DUR_DATE = r"([0-9]+Y([0-9]+M)?([0-9]+D)?|[0-9]+M([0-9]+D)?|[0-9]+D)"
_DUR_TIME = r"T([0-9]+H([0-9]+M)?([0-9]+S)?|[0-9]+M([0-9]+S)?|[0-9]+S)"
_OCTET = r"(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_LABEL = r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_H16 = r"[0-9a-fA-F]{1,4}"
# no "--" at all (IDNA reserves it in the 3rd and 4th positions), at most 63 characters
_IDN_LABEL = r"[A-Za-z0-9](-?[A-Za-z0-9]){0,31}"
_JSON_POINTER = r"(/([^/~]|~[01])*)*"
_URI_CHAR = r"([A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=]|%[0-9A-Fa-f]{2})"

FORMAT_PATTERNS: dict[str, str] = {
    "date": _DATE,
    "time": _TIME,
    "date-time": rf"{_DATE}[Tt]{_TIME}",
    "duration": rf"P([0-9]+W|{_DUR_DATE}({_DUR_TIME})?|{_DUR_TIME})",
    "uuid": r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
    "ipv4": rf"({_OCTET}\.){{3}}{_OCTET}",
    # full form and the common "::" compressions (a subset of RFC 4291 text forms)
    "ipv6": rf"({_H16}:){{7}}{_H16}|::|({_H16}:){{1,6}}:|::({_H16}:){{0,5}}{_H16}|({_H16}:){{1,5}}:{_H16}",
    "hostname": rf"{_LABEL}(\.{_LABEL}){{0,3}}",
    "email": rf"[A-Za-z0-9_%+-]+(\.[A-Za-z0-9_%+-]+){{0,3}}@{_LABEL}(\.{_LABEL}){{1,3}}",
    "uri": rf"[A-Za-z][A-Za-z0-9+.-]*:{_URI_CHAR}+",
    "uri-reference": rf"{_URI_CHAR}*",
    # the ASCII forms: every URI is an IRI, every ASCII address and hostname an IDN one
    "iri": rf"[A-Za-z][A-Za-z0-9+.-]*:{_URI_CHAR}+",
    "iri-reference": rf"{_URI_CHAR}*",
    "idn-email": rf"[A-Za-z0-9_%+-]+(\.[A-Za-z0-9_%+-]+){{0,3}}@{_IDN_LABEL}(\.{_IDN_LABEL}){{1,3}}",
    "idn-hostname": rf"{_IDN_LABEL}(\.{_IDN_LABEL}){{0,3}}",
    "json-pointer": _JSON_POINTER,
    # jsonschema's checker refuses a digit after a 0 ("100"): so no 0 before the last digit
    "relative-json-pointer": rf"(0|[1-9]+0?)(#|{_JSON_POINTER})",
    # literals and simple expressions of RFC 6570 ({var}, {+var}, {?x,y}...)
    "uri-template": r"([A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=]|%[0-9A-Fa-f]{2}|\{[+#./;?&]?[A-Za-z0-9_]+(,[A-Za-z0-9_]+)*\})*",
    # a subset: patterns of letters, digits, spaces and underscores (valid in every dialect)
    "regex": r"[A-Za-z0-9 _]*",
}
