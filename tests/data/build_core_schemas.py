#!/usr/bin/env python3
"""Build tests/data/core_schemas.json: JSON Schemas in structgen's CORE subset,
each with instances that must validate and instances that must not.

    python tests/data/build_core_schemas.py [--data DIR] [--check] [--report]

--data     corpora folder (default: $STRUCTGEN_SHARED_DATA, else ../shared/data next to
           the repository).  When it is absent, the real-world cases already in
           core_schemas.json are kept as they are and only re-validated.
--check    validate the existing core_schemas.json, write nothing.
--report   also print which keywords each case covers.

Every schema is checked against the core subset (see ``core_violations``) and every
instance against ``jsonschema`` (``validator_for(schema)``, format checking off), against
Draft 2020-12, and against an ECMA-262-like reading of ``pattern``; the three must agree
with the label.  Any violation makes the script exit with status 1.
"""
from __future__ import annotations

import argparse
import copy
import gzip
import json
import math
import os
import re
import sys
import warnings
from pathlib import Path

import jsonschema
from jsonschema.validators import Draft202012Validator, extend, validator_for

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
OUT = HERE / "core_schemas.json"

# --------------------------------------------------------------------------- core subset

ANNOTATIONS = {"title", "description", "examples", "default", "$comment", "$schema", "$id"}
KEYWORDS = {
    "type", "properties", "required", "additionalProperties", "enum", "const", "items",
    "prefixItems", "minItems", "maxItems", "minLength", "maxLength", "pattern", "anyOf",
    "$ref", "$defs", "definitions", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
}
TYPES = {"string", "number", "integer", "boolean", "null", "object", "array"}
OBJECT_KW = {"properties", "required", "additionalProperties"}
ARRAY_KW = {"items", "prefixItems", "minItems", "maxItems"}
STRING_KW = {"minLength", "maxLength", "pattern"}
INTEGER_KW = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}
MAX_BOUND = 64


def pattern_violations(p: str) -> list[str]:
    out = []
    if "(?" in p:
        out.append("group extension / lookaround")
    if re.search(r"\\[1-9]|\\k<", p):
        out.append("backreference")
    if re.search(r"\\[pP]\{", p):
        out.append("unicode property escape")
    for m in re.finditer(r"\{(\d+)(?:,(\d*))?\}", p):
        if any(g and int(g) > MAX_BOUND for g in m.groups()):
            out.append(f"bounded repeat > {MAX_BOUND}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # e.g. FutureWarning "possible set union" on '[['
            re.compile(p)
    except (re.error, FutureWarning) as e:
        out.append(f"regex: {e}")
    return out


def core_violations(schema, root=None, path="#", untyped_objects_ok=False) -> list[str]:
    """Why ``schema`` is outside the core subset ([] if it is inside)."""
    root = schema if root is None else root
    if isinstance(schema, bool):
        return []
    if not isinstance(schema, dict):
        return [f"{path}: not a schema"]
    errs = []
    rec = lambda s, p: core_violations(s, root, p, untyped_objects_ok)  # noqa: E731
    keys = set(schema)
    for k in sorted(keys - KEYWORDS - ANNOTATIONS):
        errs.append(f"{path}: keyword {k}")
    if path != "#":
        for k in ("$schema", "$id", "$defs", "definitions"):
            if k in schema:
                errs.append(f"{path}: nested {k}")
    t = schema.get("type")
    ts = set(t) if isinstance(t, list) else ({t} if t is not None else set())
    if isinstance(t, list) and (not t or len(set(t)) != len(t)):
        errs.append(f"{path}: bad type list")
    if not ts <= TYPES:
        errs.append(f"{path}: type {t!r}")
    if "anyOf" in schema:
        extra = keys - ANNOTATIONS - {"anyOf", "$defs", "definitions"}
        if extra:
            errs.append(f"{path}: anyOf with sibling keywords {sorted(extra)}")
        if not isinstance(schema["anyOf"], list) or not schema["anyOf"]:
            errs.append(f"{path}: anyOf must be a non-empty list")
        else:
            for i, s in enumerate(schema["anyOf"]):
                errs += rec(s, f"{path}/anyOf/{i}")
    if "$ref" in schema:
        ref = schema["$ref"]
        extra = keys - ANNOTATIONS - {"$ref", "$defs", "definitions"}
        if extra:
            errs.append(f"{path}: $ref with sibling keywords {sorted(extra)}")
        m = re.fullmatch(r"#/(\$defs|definitions)/([^/~%]+)", ref) if isinstance(ref, str) else None
        if not m:
            errs.append(f"{path}: $ref {ref!r} is not #/$defs/<name> or #/definitions/<name>")
        elif m.group(2) not in root.get(m.group(1), {}):
            errs.append(f"{path}: dangling $ref {ref!r}")
    for d in ("$defs", "definitions"):
        if d in schema and path == "#":
            for k, s in schema[d].items():
                errs += rec(s, f"{path}/{d}/{k}")
    if keys & OBJECT_KW and "object" not in ts and not untyped_objects_ok:
        errs.append(f"{path}: object keywords without type object")
    if keys & ARRAY_KW and "array" not in ts:
        errs.append(f"{path}: array keywords without type array")
    if keys & STRING_KW and "string" not in ts:
        errs.append(f"{path}: string keywords without type string")
    if keys & INTEGER_KW and t != "integer":
        errs.append(f"{path}: numeric bounds on type {t!r} (only on \"type\": \"integer\")")
    for k in keys & INTEGER_KW:
        v = schema[k]
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            errs.append(f"{path}: {k}={v!r} (draft-04 style?)")
    for k in ("minLength", "maxLength", "minItems", "maxItems"):
        if k in schema:
            v = schema[k]
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                errs.append(f"{path}: {k}={v!r}")
            elif k.startswith("max") and v > MAX_BOUND:
                errs.append(f"{path}: {k}={v} > {MAX_BOUND}")
    if "pattern" in schema:
        p = schema["pattern"]
        if not isinstance(p, str):
            errs.append(f"{path}: pattern not a string")
        else:
            errs += [f"{path}: pattern {p!r}: {e}" for e in pattern_violations(p)]
    if "properties" in schema:
        if not isinstance(schema["properties"], dict):
            errs.append(f"{path}: properties not an object")
        else:
            for k, s in schema["properties"].items():
                errs += rec(s, f"{path}/properties/{k}")
    if "required" in schema and not (
        isinstance(schema["required"], list) and all(isinstance(x, str) for x in schema["required"])
    ):
        errs.append(f"{path}: required must be a list of strings")
    if "additionalProperties" in schema:
        errs += rec(schema["additionalProperties"], f"{path}/additionalProperties")
    if "items" in schema:
        if isinstance(schema["items"], list):
            errs.append(f"{path}: items as a list (tuple form)")
        else:
            errs += rec(schema["items"], f"{path}/items")
    if "prefixItems" in schema:
        for i, s in enumerate(schema["prefixItems"]):
            errs += rec(s, f"{path}/prefixItems/{i}")
    if "enum" in schema and not isinstance(schema["enum"], list):
        errs.append(f"{path}: enum not a list")
    return errs


def features(schema) -> list[str]:
    """Keywords (and notable forms) a schema uses, for the coverage report."""
    found = set()

    def walk(s, path):
        if isinstance(s, bool):
            found.add(f"bool-schema:{str(s).lower()}" + ("(root)" if path == "#" else ""))
            return
        for k, v in s.items():
            if k in KEYWORDS:
                found.add(k)
        t = s.get("type")
        if isinstance(t, list):
            found.add("type[]")
            found.update(f"type:{x}" for x in t)
        elif t is not None:
            found.add(f"type:{t}")
        if s.keys() & OBJECT_KW and t is None:
            found.add("untyped-object-keywords")
        if s.get("additionalProperties") is False:
            found.add("additionalProperties:false")
        elif s.get("additionalProperties") is True:
            found.add("additionalProperties:true")
        elif isinstance(s.get("additionalProperties"), dict):
            found.add("additionalProperties:schema")
        if s.get("items") is False:
            found.add("items:false")
        if "$ref" in s:
            found.add("$ref->" + s["$ref"].split("/")[1])
        for k in ("properties", "$defs", "definitions"):
            for n, sub in (s.get(k) or {}).items():
                walk(sub, f"{path}/{k}/{n}")
        if s.get("items") is True:
            found.add("items:true")
        for k in ("additionalProperties", "items"):
            if isinstance(s.get(k), dict):
                walk(s[k], f"{path}/{k}")
        for k in ("prefixItems", "anyOf"):
            for i, sub in enumerate(s.get(k) or []):
                walk(sub, f"{path}/{k}/{i}")

    walk(schema, "#")
    if _is_recursive(schema):
        found.add("recursion")
    return sorted(found)


def _is_recursive(schema) -> bool:
    if not isinstance(schema, dict):
        return False
    defs = {}
    for d in ("$defs", "definitions"):
        for n, s in (schema.get(d) or {}).items():
            defs[f"#/{d}/{n}"] = s

    def refs(s, acc):
        if isinstance(s, dict):
            if isinstance(s.get("$ref"), str):
                acc.add(s["$ref"])
            for k, v in s.items():
                if k not in ("enum", "const", "examples", "default"):
                    refs(v, acc)
        elif isinstance(s, list):
            for v in s:
                refs(v, acc)
        return acc

    graph = {r: refs(s, set()) for r, s in defs.items()}
    for start in graph:
        seen, todo = set(), list(graph[start])
        while todo:
            r = todo.pop()
            if r == start:
                return True
            if r not in seen:
                seen.add(r)
                todo += graph.get(r, ())
    return False


# --------------------------------------------------------------------------- validation

def ecma_pattern(p: str) -> str:
    """Rewrite a pattern so Python's ``re`` reads it the way ECMA-262 (no flags) does:
    ``$`` is end of input (Python's also matches before a final newline), ``\\d``/``\\w``
    are ASCII-only, ``.`` does not match line terminators."""
    out, i, in_class = [], 0, False
    while i < len(p):
        c = p[i]
        if c == "\\" and i + 1 < len(p):
            e = p[i + 1]
            if in_class:
                out.append({"d": "0-9", "w": "A-Za-z0-9_"}.get(e, "\\" + e))
            else:
                out.append({"d": "[0-9]", "D": "[^0-9]", "w": "[A-Za-z0-9_]",
                            "W": "[^A-Za-z0-9_]"}.get(e, "\\" + e))
            i += 2
            continue
        if in_class:
            if c == "]":
                in_class = False
            out.append(c)
        elif c == "[":
            in_class = True
            out.append(c)
            if p[i + 1:i + 2] == "^":
                out.append("^")
                i += 1
            if p[i + 1:i + 2] == "]":  # literal ']' first in class
                out.append("\\]")
                i += 1
        elif c == "$":
            out.append(r"\Z")
        elif c == ".":
            out.append("[^\n\r\u2028\u2029]")
        else:
            out.append(c)
        i += 1
    return "".join(out)


def _ecma_pattern_keyword(validator, pattern, instance, schema):
    if validator.is_type(instance, "string") and not re.search(ecma_pattern(pattern), instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r} (ECMA reading)")


EcmaValidator = extend(Draft202012Validator, {"pattern": _ecma_pattern_keyword})


def verdicts(schema, instance) -> dict[str, bool]:
    cls = validator_for(schema, default=Draft202012Validator)
    return {
        "validator_for": cls(schema).is_valid(instance),  # no format_checker: format off
        "draft2020-12": Draft202012Validator(schema).is_valid(instance),
        "ecma-pattern": EcmaValidator(schema).is_valid(instance),
    }


def instance_problems(x, path="$") -> list[str]:
    """JSON-serialisable, no NaN/inf, no integral floats (1.0) that a grammar for
    "integer" would not produce, no lone surrogates."""
    if isinstance(x, bool) or x is None or isinstance(x, int):
        return []
    if isinstance(x, float):
        if not math.isfinite(x):
            return [f"{path}: non-finite float"]
        if x.is_integer():
            return [f"{path}: integral float {x!r}"]
        return []
    if isinstance(x, str):
        return [f"{path}: lone surrogate"] if re.search("[\ud800-\udfff]", x) else []
    if isinstance(x, list):
        return [p for i, v in enumerate(x) for p in instance_problems(v, f"{path}[{i}]")]
    if isinstance(x, dict):
        out = []
        for k, v in x.items():
            if not isinstance(k, str):
                out.append(f"{path}: non-string key")
            out += instance_problems(k, f"{path}.<key>") + instance_problems(v, f"{path}.{k}")
        return out
    return [f"{path}: not JSON ({type(x).__name__})"]


def canon(x) -> str:
    """Exact serialisation (key order kept: a reordered object is a different test)."""
    return json.dumps(x, ensure_ascii=True)


# --------------------------------------------------------------------------- real-world cases

# subset -> how many cases to take, max schema size (JSON chars), min (valid, invalid) labelled
REAL_QUOTAS = [
    ("Glaiveai2K", 3, 2500, (1, 1)),
    ("JME", 2, 2500, (1, 0)),
    ("Github_easy", 3, 2500, (2, 2)),
    ("Github_medium", 3, 3000, (2, 2)),
    ("Kubernetes", 2, 6000, (2, 2)),
]
MAX_INSTANCE_CHARS = 2500
CORE_FEATURES = KEYWORDS | {"additionalProperties:false", "additionalProperties:schema", "type[]",
                            "items:false", "recursion", "type:null", "type:boolean",
                            "type:integer", "type:number", "type:array"}


def load_jsonl_gz(path: Path):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def labelled_instances(schema, tests, stats):
    valid, invalid, seen = [], [], set()
    for t in tests:
        x, want = t["data"], bool(t["valid"])
        key = canon(x)
        if key in seen:
            continue
        seen.add(key)
        if instance_problems(x) or len(json.dumps(x)) > MAX_INSTANCE_CHARS:
            stats["instance skipped (integral float / size)"] += 1
            continue
        v = verdicts(schema, x)
        if set(v.values()) != {want}:
            stats["instance label disagrees with validators: " + ",".join(
                k for k, ok in v.items() if ok != want)] += 1
            continue
        (valid if want else invalid).append(x)
    return valid, invalid


def _resolve(schema, root):
    seen = 0
    while isinstance(schema, dict) and "$ref" in schema and seen < 20:
        _, d, name = schema["$ref"].split("/", 2)
        schema = root[d][name]
        seen += 1
    return schema


def _wrong_value(sub):
    """A value of a type that ``sub`` (a typed schema) does not allow."""
    t = sub.get("type") if isinstance(sub, dict) else None
    ts = set(t) if isinstance(t, list) else {t}
    for cand, tname in (("wrong-type value", "string"), (12345, "integer"), ([], "array"),
                        ({"unexpected": True}, "object"), (None, "null")):
        if tname not in ts and not (tname == "integer" and "number" in ts):
            return cand
    return None


def derive_instances(schema, valid, invalid, want_valid=2, want_invalid=2):
    """Near-miss mutations of a labelled valid instance, for cases whose corpus row has
    fewer than two of each.  Returned lists hold only mutations the validators agree on."""
    new_valid, new_invalid = [], []
    if not valid or not isinstance(valid[0], dict):
        return new_valid, new_invalid
    base = valid[0]
    root_s = _resolve(schema, schema)
    seen = {canon(x) for x in valid + invalid}
    cands_invalid, cands_valid = [], []

    def walk(inst, sch, path):
        sch = _resolve(sch, schema)
        if not isinstance(sch, dict) or not isinstance(inst, dict):
            return
        req = [k for k in sch.get("required", []) if k in inst]
        props = sch.get("properties", {})
        for k in req[:1]:
            cands_invalid.append(("drop required " + path + k, path, ("drop", k)))
        if sch.get("additionalProperties") is False:
            cands_invalid.append(("extra key at " + (path or "root"), path, ("add", "unexpected_key", "x")))
        for k, v in inst.items():
            sub = _resolve(props.get(k), schema)
            if isinstance(sub, dict) and "type" in sub and not isinstance(v, (dict, list)):
                w = _wrong_value(sub)
                if w is not None:
                    cands_invalid.append((f"wrong type at {path}{k}", path, ("set", k, w)))
                    break
        optional = [k for k in inst if k in props and k not in sch.get("required", [])]
        if optional:
            cands_valid.append((f"drop optional keys at {path or 'root'}", path, ("dropmany", optional)))
        for k, v in inst.items():
            if isinstance(v, dict):
                walk(v, props.get(k, {}), f"{path}{k}.")
            elif isinstance(v, list) and v and isinstance(v[0], dict):
                sub = _resolve(props.get(k, {}), schema)
                walk(v[0], sub.get("items", {}) if isinstance(sub, dict) else {}, f"{path}{k}[0].")

    walk(base, root_s, "")

    def apply(path, op):
        x = copy.deepcopy(base)
        tgt = x
        for part in [p for p in re.split(r"\.", path) if p]:
            if part.endswith("[0]"):
                tgt = tgt[part[:-3]][0]
            else:
                tgt = tgt[part]
        if op[0] == "drop":
            del tgt[op[1]]
        elif op[0] == "dropmany":
            for k in op[1]:
                del tgt[k]
        else:
            tgt[op[1]] = op[2]
        return x

    for label, path, op in cands_valid:
        if len(valid) + len(new_valid) >= want_valid:
            break
        x = apply(path, op)
        if canon(x) not in seen and all(verdicts(schema, x).values()):
            seen.add(canon(x))
            new_valid.append(x)
    for label, path, op in cands_invalid:
        if len(invalid) + len(new_invalid) >= want_invalid:
            break
        x = apply(path, op)
        if canon(x) not in seen and not any(verdicts(schema, x).values()):
            seen.add(canon(x))
            new_invalid.append(x)
    return new_valid, new_invalid


def real_cases(data: Path, stats) -> list[dict]:
    cases, covered, featsets = [], set(), []
    for subset, quota, max_size, (min_v, min_i) in REAL_QUOTAS:
        path = data / "maskbench" / f"{subset}.jsonl.gz"
        cands = []
        for row in load_jsonl_gz(path):
            schema = row["schema"]
            if core_violations(schema) or len(json.dumps(schema)) > max_size:
                continue
            v, i = labelled_instances(schema, row["tests"], stats)
            if len(v) < min_v or len(i) < min_i:
                continue
            cands.append((row["id"], schema, v, i, set(features(schema)) & CORE_FEATURES))
        stats[f"{subset}: core-subset candidates"] = len(cands)
        cands.sort(key=lambda c: c[0])
        picked = 0
        while picked < quota and cands:
            # greedy: most core features not yet covered by real cases, then a feature set
            # unlike the ones already picked, then most features, smaller schema, id
            best = max(cands, key=lambda c: (len(c[4] - covered), c[4] not in featsets, len(c[4]),
                                             -len(json.dumps(c[1])), [-ord(ch) for ch in c[0]]))
            cands.remove(best)
            rid, schema, v, i, feats = best
            dv, di = derive_instances(schema, v, i)
            if len(v) + len(dv) < 2 or len(i) + len(di) < 2:
                continue  # prefer rows that give two of each, labelled or derived
            picked += 1
            covered |= feats
            featsets.append(feats)
            source = f"maskbench/{subset}.jsonl.gz#{rid}"
            if dv or di:
                source += (f" (labelled instances kept; plus {len(dv)} valid and {len(di)} invalid"
                           " near-miss mutations derived by build_core_schemas.py)")
            cases.append({"name": f"real_{subset.lower()}_{_slug(rid)}", "source": source,
                          "schema": schema, "valid": v + dv, "invalid": i + di})
    cases += bfcl_cases(data, stats)
    return cases


def _slug(s: str) -> str:
    s = s.split("---")[-1]
    return re.sub(r"[^a-z0-9]+", "_", s.lower()).strip("_")[:48]


# BFCL: parameter schemas say "dict"/"float"; rewrite to JSON Schema and wrap like
# JSONSchemaBench's BFCL subsets: {"<function name>": {<arguments>}}.
BFCL_PICK = ["simple_python_", "multiple_"]  # first core-subset task of each kind, by sorted id
BFCL_TYPES = {"dict": "object", "float": "number"}


def bfcl_rewrite(s):
    if isinstance(s, dict):
        out = {}
        for k, v in s.items():
            if k == "type" and isinstance(v, str):
                out[k] = BFCL_TYPES.get(v, v)
            elif k in ("properties",):
                out[k] = {n: bfcl_rewrite(x) for n, x in v.items()}
            elif k in ("items", "additionalProperties"):
                out[k] = bfcl_rewrite(v)
            else:
                out[k] = v
        if out.get("type") == "object" and "properties" in out:
            out["additionalProperties"] = False
        return out
    return s


def bfcl_wrap(fn):
    return {"type": "object", "properties": {fn["name"]: bfcl_rewrite(fn["parameters"])},
            "required": [fn["name"]], "additionalProperties": False}


def _bfcl_features(schema):
    return len(set(features(schema)))


def bfcl_cases(data: Path, stats) -> list[dict]:
    path = data / "bfcl" / "tasks.jsonl.gz"
    if not path.exists():
        return []
    rows = sorted(load_jsonl_gz(path), key=lambda r: r["id"])
    cases = []
    for prefix in BFCL_PICK:
        best = None
        for r in rows:
            if not r["id"].startswith(prefix) or len(r["ground_truth"]) != 1:
                continue
            fns = r["functions"]
            schema = bfcl_wrap(fns[0]) if len(fns) == 1 else {"anyOf": [bfcl_wrap(f) for f in fns]}
            if core_violations(schema) or len(json.dumps(schema)) > 3000:
                continue
            valid, invalid = bfcl_instances(schema, r["ground_truth"][0], fns)
            if len(valid) < 2 or len(invalid) < 3:
                continue
            # prefer tasks whose arguments use enum/array/number, then more functions
            score = (_bfcl_features(schema), len(fns), [-ord(c) for c in r["id"]])
            if best is None or score > best[0]:
                best = (score, r, schema, valid, invalid)
        if best is None:
            stats[f"bfcl {prefix}: no core-subset task"] += 1
            continue
        _, r, schema, valid, invalid = best
        cases.append({
            "name": f"real_bfcl_{_slug(r['id'])}",
            "source": (f"bfcl/tasks.jsonl.gz#{r['id']} (gorilla BFCL v4; rewritten 'dict'->'object', "
                       "'float'->'number', additionalProperties:false added, wrapped as "
                       "{function name: arguments}" + (" under anyOf over all offered functions"
                                                        if len(r["functions"]) > 1 else "")
                       + "; valid instances from ground_truth, invalid are near-miss mutations)"),
            "schema": schema, "valid": valid, "invalid": invalid})
    return cases


def bfcl_instances(schema, gt, fns):
    (fname, args), = gt.items()
    fn = next(f for f in fns if f["name"] == fname)
    params = bfcl_rewrite(fn["parameters"])
    full, minimal = {}, {}
    for k, alts in args.items():
        present = [a for a in alts if a != ""]
        if not present:
            continue
        full[k] = present[0]
        if "" not in alts:
            minimal[k] = present[-1]
    valid, invalid, seen = [], [], set()

    def add(x, want):
        if canon(x) in seen or instance_problems(x):
            return
        v = verdicts(schema, x)
        if set(v.values()) == {want}:
            seen.add(canon(x))
            (valid if want else invalid).append(x)

    add({fname: full}, True)
    add({fname: minimal}, True)
    if not valid:
        return [], []
    base = valid[0][fname]
    req = [k for k in params.get("required", []) if k in base]
    if req:
        add({fname: {k: v for k, v in base.items() if k != req[-1]}}, False)
    add({fname: {**base, "unexpected_arg": 1}}, False)
    for k, v in base.items():
        sub = params["properties"].get(k, {})
        w = _wrong_value(sub)
        if w is not None:
            add({fname: {**base, k: w}}, False)
            break
    add({fname + "_v2": base}, False)
    return valid, invalid


# --------------------------------------------------------------------------- handwritten cases

def H(name, schema, valid, invalid, untyped_objects=False):
    return {"name": name, "source": "handwritten", "schema": schema, "valid": valid,
            "invalid": invalid, "_untyped_objects": untyped_objects}


CHILD = {"$ref": "#/$defs/node"}

HANDWRITTEN = [
    H("recursive_tree_defs",
      {"$defs": {"node": {"type": "object",
                          "properties": {"value": {"type": "integer"},
                                         "children": {"type": "array", "items": CHILD}},
                          "required": ["value"], "additionalProperties": False}},
       "$ref": "#/$defs/node"},
      [{"value": 1},
       {"value": 1, "children": []},
       {"value": -7, "children": [{"value": 2}, {"value": 3, "children": [{"value": 4, "children": []}]}]}],
      [{"value": 1, "children": [{"value": 2, "children": [{"value": "3"}]}]},   # wrong type deep
       {"value": 1, "children": [{"children": []}]},                              # missing required deep
       {"value": 1, "children": [{"value": 2, "label": "x"}]},                    # extra key deep
       {"value": 1, "children": {"value": 2}},                                    # object for array
       [{"value": 1}]]),
    H("recursive_list_definitions_anyof",
      {"definitions": {"list": {"anyOf": [
          {"type": "null"},
          {"type": "object", "properties": {"head": {"type": "string"},
                                            "tail": {"$ref": "#/definitions/list"}},
           "required": ["head", "tail"], "additionalProperties": False}]}},
       "$ref": "#/definitions/list"},
      [None, {"head": "a", "tail": None},
       {"head": "a", "tail": {"head": "b", "tail": {"head": "c", "tail": None}}}],
      [{"head": "a"},                                           # missing required
       {"head": "a", "tail": {"head": 2, "tail": None}},        # wrong type nested
       {"head": "a", "tail": {"head": "b", "tail": False}},     # false is not null
       "null"]),
    H("mutually_recursive_expression",
      {"$defs": {"expr": {"anyOf": [{"type": "integer"}, {"$ref": "#/$defs/op"}]},
                 "op": {"type": "object",
                        "properties": {"op": {"enum": ["+", "-", "*"]},
                                       "args": {"type": "array", "items": {"$ref": "#/$defs/expr"},
                                                "minItems": 2, "maxItems": 2}},
                        "required": ["op", "args"], "additionalProperties": False}},
       "$ref": "#/$defs/expr"},
      [42, {"op": "+", "args": [1, 2]}, {"args": [{"op": "*", "args": [-3, 4]}, 5], "op": "-"}],
      [{"op": "+", "args": [1, 2, 3]},                      # array one too long
       {"op": "/", "args": [1, 2]},                         # enum miss
       {"op": "+", "args": [1, {"op": "+", "args": [1.5, 2]}]},
       1.5]),
    H("tuple_prefix_items_closed",
      {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}, {"type": "boolean"}],
       "items": False},
      [["a", 1, True], ["a", 1], [], ["", -1, False]],
      [["a", 1, True, None],        # one too long (items: false)
       [1, "a"],                    # order swapped
       ["a", 1.5],                  # number for integer
       ["a", 1, "true"],
       {"0": "a"}]),
    H("prefix_items_then_items_schema",
      {"type": "array", "prefixItems": [{"const": "point"}, {"type": "string", "maxLength": 2}],
       "items": {"type": "number"}, "minItems": 3, "maxItems": 5},
      [["point", "xy", 1.5, -2], ["point", "", 0], ["point", "ab", 1, 2, 3.25]],
      [["point", "xy", 1, 2, 3, 4],   # one too long
       ["point", "xy"],               # one too short
       ["Point", "xy", 1],            # const miss
       ["point", "xyz", 1],           # string too long by one
       ["point", "xy", "1"]]),
    H("additional_properties_schema",
      {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"],
       "additionalProperties": {"type": "string", "maxLength": 8}},
      [{"id": 1}, {"id": 0, "x": "abc", "y": ""}, {"zz": "12345678", "id": -3}],
      [{"id": 1, "x": 2},                # additional value of wrong type
       {"id": 1, "x": "123456789"},      # additional string too long by one
       {"x": "a"},                       # missing required
       {"id": "1"}]),
    H("additional_properties_true_and_type_arrays",
      {"type": "object",
       "properties": {"name": {"type": ["string", "null"]},
                      "count": {"type": ["integer", "null"]},
                      "score": {"type": ["number", "string", "null"]},
                      "tags": {"type": ["array", "null"], "items": {"type": "string"}}},
       "required": ["name", "count"], "additionalProperties": True},
      [{"name": None, "count": None},
       {"name": "x", "count": 3, "score": 2.5, "tags": ["a"]},
       {"name": "", "count": 0, "score": "n/a", "tags": None, "anything": [1, {"a": None}]}],
      [{"name": 1, "count": None},             # number for string|null
       {"name": "x", "count": 2.5},            # float for integer|null
       {"name": "x", "count": 1, "score": True},
       {"name": "x", "count": 1, "tags": [None]},
       {"name": "x"}]),
    H("enum_mixed_types",
      {"enum": ["plain", "with \"quotes\"", "back\\slash", "new\nline", "ünïcödé ✓", "emoji 😀", "",
                0, -1, 2.5, None, True, {"k": "v", "n": [1, 2]}, [1, "two"]]},
      ["plain", "with \"quotes\"", "back\\slash", "new\nline", "ünïcödé ✓", "emoji 😀", "", 0, -1, 2.5,
       None, True, {"n": [1, 2], "k": "v"}, [1, "two"]],
      ["with quotes", "back\\\\slash", "Plain", "emoji", 1, False,        # false is not 0
       "null", {"k": "v"}, {"k": "v", "n": [1, 2], "x": 1}, ["two", 1], 2.25]),
    H("const_object_and_const_property",
      {"type": "object",
       "properties": {"kind": {"const": "config"},
                      "payload": {"const": {"version": 2, "tags": ["a", "b"],
                                            "meta": {"ok": True, "note": None}}}},
       "required": ["kind", "payload"], "additionalProperties": False},
      [{"kind": "config", "payload": {"version": 2, "tags": ["a", "b"], "meta": {"ok": True, "note": None}}},
       {"payload": {"meta": {"note": None, "ok": True}, "tags": ["a", "b"], "version": 2}, "kind": "config"}],
      [{"kind": "config", "payload": {"version": 2, "tags": ["b", "a"], "meta": {"ok": True, "note": None}}},
       {"kind": "config", "payload": {"version": "2", "tags": ["a", "b"], "meta": {"ok": True, "note": None}}},
       {"kind": "config", "payload": {"version": 2, "tags": ["a", "b"], "meta": {"ok": True}}},
       {"kind": "Config", "payload": {"version": 2, "tags": ["a", "b"], "meta": {"ok": True, "note": None}}}]),
    H("integer_ranges_negative",
      {"type": "object",
       "properties": {"temp": {"type": "integer", "minimum": -40, "maximum": -1},
                      "offset": {"type": "integer", "minimum": -1000000, "maximum": 1000000},
                      "half": {"type": "integer", "minimum": -2.5, "maximum": 3.5},
                      "big": {"type": "integer"}},
       "required": ["temp"], "additionalProperties": False},
      [{"temp": -40}, {"temp": -1, "offset": -1000000, "half": -2},
       {"temp": -20, "offset": 1000000, "half": 3, "big": 12345678901234567890},
       {"temp": -5, "big": -9007199254740993}],
      [{"temp": -41}, {"temp": 0}, {"temp": -1, "offset": 1000001}, {"temp": -1, "offset": -1000001},
       {"temp": -1, "half": -3}, {"temp": -1, "half": 4}, {"temp": -1.5}, {"temp": True}]),
    H("integer_exclusive_bounds",
      {"type": "object",
       "properties": {"open": {"type": "integer", "exclusiveMinimum": -5, "exclusiveMaximum": 10},
                      "mixed": {"type": "integer", "minimum": 0, "exclusiveMaximum": 1},
                      "neg": {"type": "integer", "exclusiveMaximum": -100}},
       "required": ["open"]},
      [{"open": -4}, {"open": 9, "mixed": 0}, {"open": 0, "neg": -101}],
      [{"open": -5}, {"open": 10}, {"open": 1, "mixed": 1}, {"open": 1, "mixed": -1},
       {"open": 1, "neg": -100}, {"open": "3"}]),
    H("numbers_and_integers",
      {"type": "object",
       "properties": {"n": {"type": "number"}, "i": {"type": "integer"}, "b": {"type": "boolean"},
                      "z": {"type": "null"}},
       "required": ["n", "i"], "additionalProperties": False},
      [{"n": 0, "i": 0}, {"n": -0.5, "i": -1, "b": False, "z": None}, {"n": 1e-07, "i": 7},
       {"n": 1.25e-300, "i": 123456789012}, {"n": -123.456, "i": 1}],
      [{"n": 1, "i": 2.5}, {"n": "1", "i": 1}, {"n": 1, "i": True}, {"n": 1, "i": 1, "b": 0},
       {"n": 1, "i": 1, "z": False}, {"n": None, "i": 1}]),
    H("pattern_anchors_classes_unicode",
      {"type": "object",
       "properties": {"greek": {"type": "string", "pattern": "^[α-ω]{2,4}$"},
                      "code": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{3}$"},
                      "cafe": {"type": "string", "pattern": "^caf[eé]+s?$"},
                      "color": {"type": "string", "pattern": "^(red|green|blue)(-[0-9]{1,2})?$"},
                      "unanchored": {"type": "string", "pattern": "ab+c"},
                      "emoji": {"type": "string", "pattern": "^[😀-😎]+ ok$", "maxLength": 5}},
       "additionalProperties": False},
      [{"greek": "αβγ", "code": "ABC-123"}, {"cafe": "cafés", "color": "green-42"},
       {"unanchored": "xxabbbcyy", "color": "red", "emoji": "😀😎 ok"}, {"greek": "ωω", "cafe": "cafe"}],
      [{"greek": "αβγδε"},            # one too many
       {"greek": "abc"},               # latin, not greek
       {"code": "ABC-12"},             # one char short
       {"code": "ABc-123"},            # one char wrong
       {"color": "green-123"}, {"color": "purple"},
       {"unanchored": "ac"}, {"cafe": "cafës"},
       {"emoji": "😀😀😀 ok"}]),    # 6 code points, maxLength 5
    H("string_lengths_code_points",
      {"type": "object",
       "properties": {"short": {"type": "string", "minLength": 2, "maxLength": 3},
                      "exact": {"type": "string", "minLength": 4, "maxLength": 4},
                      "nonempty": {"type": "string", "minLength": 1},
                      "max64": {"type": "string", "maxLength": 64}},
       "required": ["short"], "additionalProperties": False},
      [{"short": "日本"}, {"short": "😀😀😀"}, {"short": "e\u0301"},         # e + combining accent = 2
       {"short": "ab", "exact": "ñäöü", "nonempty": "\u0000", "max64": "é" * 64}],
      [{"short": "😀😀😀😀"},          # 4 code points: too long by one
       {"short": "日"},                # too short by one
       {"short": "ab", "exact": "naïve"},
       {"short": "ab", "exact": "ñäö"},
       {"short": "ab", "nonempty": ""},
       {"short": "ab", "max64": "é" * 65}]),
    H("strings_needing_escapes",
      {"type": "object",
       "properties": {"text": {"type": "string", "maxLength": 64},
                      "label": {"type": "string", "minLength": 1, "maxLength": 3},
                      "quote\"key": {"type": "boolean"},
                      "back\\slash key": {"type": "null"},
                      "new\nline\tkey": {"type": "integer"},
                      "ключ 🔑": {"type": "string"}},
       "required": ["text", "ключ 🔑"], "additionalProperties": False},
      [{"text": "say \"hi\"", "ключ 🔑": ""},
       {"text": "C:\\path\\to\nfile\twith\r\ncontrol \u0000\u0001\u001f\u007f and \u2028 sep", "ключ 🔑": "ok"},
       {"text": "emoji 😀👍🏽 and \U0001F600 again", "ключ 🔑": "/", "label": "\"\\\n",
        "quote\"key": True, "back\\slash key": None, "new\nline\tkey": 3},
       {"text": "", "ключ 🔑": "\\u0041 is not an escape here"}],
      [{"text": "x", "ключ 🔑": "y", "label": "\"\\\n\t"},     # 4 code points: too long by one
       {"text": "x", "ключ 🔑": "y", "label": ""},
       {"text": "x", "ключ": "y"},                            # key without the emoji
       {"text": "x", "ключ 🔑": "y", "quote\"key": "true"},
       {"text": "x", "ключ 🔑": "y", "quotekey": True},        # extra key, near the escaped one
       {"text": "x" * 65, "ключ 🔑": "y"}]),
    H("empty_object_and_array",
      {"type": "object",
       "properties": {"empty_obj": {"type": "object", "additionalProperties": False},
                      "empty_arr": {"type": "array", "maxItems": 0},
                      "no_items": {"type": "array", "items": False},
                      "any_obj": {"type": "object"}},
       "required": ["empty_obj", "empty_arr"], "additionalProperties": False},
      [{"empty_obj": {}, "empty_arr": []}, {"empty_arr": [], "empty_obj": {}, "no_items": [], "any_obj": {}},
       {"empty_obj": {}, "empty_arr": [], "any_obj": {"x": [1, {"y": None}]}}],
      [{"empty_obj": {"a": 1}, "empty_arr": []}, {"empty_obj": {}, "empty_arr": [0]},
       {"empty_obj": {}, "empty_arr": [], "no_items": [None]}, {"empty_obj": [], "empty_arr": []},
       {"empty_obj": {}, "empty_arr": [], "any_obj": []}, {}]),
    H("nested_arrays_of_objects",
      {"type": "object",
       "properties": {
           "matrix": {"type": "array", "items": {"type": "array", "items": {"type": "integer"},
                                                 "minItems": 1, "maxItems": 3}},
           "people": {"type": "array", "minItems": 1, "maxItems": 2, "items": {
               "type": "object",
               "properties": {"name": {"type": "string"},
                              "emails": {"type": "array", "items": {"type": "string", "pattern": "^[^@ ]+@[^@ ]+$"}},
                              "address": {"type": "object",
                                          "properties": {"city": {"type": "string"},
                                                         "zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
                                          "required": ["city"], "additionalProperties": False}},
               "required": ["name"], "additionalProperties": False}}},
       "required": ["people"], "additionalProperties": False},
      [{"people": [{"name": "Ann"}]},
       {"matrix": [[1], [2, 3, 4]], "people": [{"name": "Bo", "emails": ["bo@x.io"]},
                                               {"name": "Cy", "address": {"city": "Zürich", "zip": "80001"}}]},
       {"matrix": [], "people": [{"name": "", "emails": [], "address": {"city": ""}}]}],
      [{"people": [{"name": "Bo", "address": {"city": "Z", "zip": "8000"}}]},       # pattern one short
       {"people": [{"name": "A"}, {"name": "B"}, {"name": "C"}]},                   # one too long
       {"people": []},                                                            # one too short
       {"matrix": [[]], "people": [{"name": "A"}]},
       {"matrix": [[1, 2, 3, 4]], "people": [{"name": "A"}]},
       {"matrix": [[1.5]], "people": [{"name": "A"}]},
       {"people": [{"name": "A"}, {"name": "B", "address": {"zip": "12345"}}]},     # missing nested required
       {"people": [{"name": "A", "emails": ["a@b@c"]}]}]),
    H("optional_only_properties",
      {"type": "object",
       "properties": {"a": {"type": "string"}, "b": {"type": "integer"}, "c": {"type": "boolean"}},
       "additionalProperties": False},
      [{}, {"c": True}, {"b": 1, "a": "x"}, {"a": "", "b": 0, "c": False}],
      [{"d": 1}, {"a": None}, {"a": "x", "b": "1"}, []]),
    H("required_not_listed_first",
      {"type": "object",
       "properties": {"opt1": {"type": "string"}, "opt2": {"type": "integer"},
                      "req": {"type": "boolean"}, "opt3": {"type": "null"},
                      "req2": {"type": "string", "enum": ["x", "y"]}},
       "required": ["req2", "req"], "additionalProperties": False},
      [{"req": True, "req2": "x"}, {"opt1": "a", "req": False, "opt3": None, "req2": "y"},
       {"req2": "x", "req": True, "opt2": 5}],
      [{"req2": "x"}, {"opt1": "a", "req": True}, {"req": True, "req2": "z"},
       {"req": True, "req2": "x", "opt4": 1}]),
    H("boolean_schema_true_root", True,
      [{}, [], "s", 0, -2.5, None, False, {"nested": [1, {"a": None}], "é": "😀"}],
      []),
    H("boolean_schema_false_in_properties",
      {"type": "object", "properties": {"keep": {"type": "string"}, "forbidden": False,
                                        "anything": True},
       "required": ["keep"]},
      [{"keep": "x"}, {"keep": "x", "other": 1, "anything": [None]}],
      [{"keep": "x", "forbidden": None}, {"keep": "x", "forbidden": "y"}, {}, {"keep": 1}]),
    H("anyof_tagged_union_with_annotations",
      {"title": "Shape", "description": "anyOf with only annotations beside it",
       "anyOf": [
           {"type": "object", "properties": {"kind": {"const": "circle"}, "r": {"type": "number"}},
            "required": ["kind", "r"], "additionalProperties": False},
           {"type": "object", "properties": {"kind": {"const": "rect"}, "w": {"type": "number"},
                                             "h": {"type": "number"}},
            "required": ["kind", "w", "h"], "additionalProperties": False},
           {"type": "string", "enum": ["none"]},
           {"type": "null"}]},
      [{"kind": "circle", "r": 1.5}, {"h": 2, "w": 3, "kind": "rect"}, "none", None],
      [{"kind": "circle", "w": 1, "h": 2}, {"kind": "rect", "w": 1}, "None",
       {"kind": "circle", "r": 1, "extra": 0}, 0]),
    H("anyof_overlapping_branches",
      {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "integer", "maximum": 10},
                 {"type": "string", "maxLength": 1}, {"type": "array", "items": {"type": "integer"}, "maxItems": 1}]},
      [5, -3, 100, "", "x", [], [7]],
      ["xy", 1.5, [1, 2], None, {}]),
    H("array_min_max_items",
      {"type": "object",
       "properties": {"letters": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]},
                                  "minItems": 2, "maxItems": 4},
                      "anything": {"type": "array", "items": True, "maxItems": 64}},
       "required": ["letters"], "additionalProperties": False},
      [{"letters": ["a", "b"]}, {"letters": ["a", "a", "a", "a"], "anything": [1, "x", None, {}, []]},
       {"letters": ["b", "b", "a"], "anything": []}],
      [{"letters": ["a"]}, {"letters": ["a", "b", "a", "b", "a"]}, {"letters": ["a", "c"]},
       {"letters": ["a", "b"], "anything": list(range(65))}, {"letters": "ab"}]),
    H("defs_reused_and_chained",
      {"$defs": {"id": {"type": "string", "pattern": "^[a-z]{3}[0-9]{2}$"},
                 "pair": {"type": "array", "prefixItems": [{"$ref": "#/$defs/id"}, {"$ref": "#/$defs/id"}],
                          "items": False, "minItems": 2},
                 "edge_list": {"type": "array", "items": {"$ref": "#/$defs/pair"}, "maxItems": 3}},
       "type": "object",
       "properties": {"from": {"$ref": "#/$defs/id"}, "edges": {"$ref": "#/$defs/edge_list"}},
       "required": ["from"], "additionalProperties": False},
      [{"from": "abc12"}, {"from": "xyz00", "edges": [["abc12", "def34"]]},
       {"edges": [], "from": "aaa99"}],
      [{"from": "abc1"}, {"from": "abcd1"}, {"from": "abc12", "edges": [["abc12"]]},
       {"from": "abc12", "edges": [["abc12", "def34", "ghi56"]]},
       {"from": "abc12", "edges": [["abc12", "DEF34"]]},
       {"from": "abc12", "edges": [["abc12", "abc12"]] * 4}]),                  # one too long
    H("annotations_everywhere",
      {"$schema": "https://json-schema.org/draft/2020-12/schema",
       "$id": "https://example.com/structgen/annotated.json",
       "$comment": "annotations must not change what validates",
       "title": "Annotated", "description": "All annotation keywords.",
       "examples": [{"level": "low"}], "default": {"level": "low"},
       "$defs": {"level": {"title": "Level", "type": "string", "enum": ["low", "high"],
                           "default": "low", "examples": ["high"], "$comment": "enum of two"}},
       "type": "object",
       "properties": {"level": {"$ref": "#/$defs/level", "description": "a $ref beside annotations"},
                      "note": {"type": "string", "maxLength": 10, "default": "this default is too long",
                               "examples": [42]}},
       "required": ["level"], "additionalProperties": False},
      [{"level": "low"}, {"level": "high", "note": "short"}],
      [{"level": "medium"}, {"level": "low", "note": "this default is too long"}, {"note": "x"},
       {"level": "low", "$comment": "x"}]),
    H("untyped_properties_intentional",
      {"properties": {"a": {"type": "integer"}}, "required": ["a"]},
      [{"a": 1}, {"a": 1, "b": "extra"}, "not an object", 42, [1, 2], None],
      [{"a": "1"}, {}, {"b": 1}],
      untyped_objects=True),
    H("untyped_additional_properties_false_intentional",
      {"properties": {"name": {"type": "string", "maxLength": 3}}, "additionalProperties": False},
      [{}, {"name": "abc"}, 3.14, True, ["name"]],
      [{"name": "abcd"}, {"x": 1}, {"name": None}],
      untyped_objects=True),
]


# --------------------------------------------------------------------------- main

def check_cases(cases, untyped_ok: set[str]) -> list[str]:
    problems = []
    names = [c["name"] for c in cases]
    for n in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f"duplicate case name {n}")
    for c in cases:
        n = c["name"]
        if list(c) != ["name", "source", "schema", "valid", "invalid"]:
            problems.append(f"{n}: keys {list(c)}")
        problems += [f"{n}: {e}" for e in core_violations(c["schema"], untyped_objects_ok=n in untyped_ok)]
        if c["source"] == "handwritten" and n not in untyped_ok and "untyped-object-keywords" in features(c["schema"]):
            problems.append(f"{n}: object keywords without type")
        try:
            validator_for(c["schema"], default=Draft202012Validator).check_schema(c["schema"])
        except jsonschema.SchemaError as e:
            problems.append(f"{n}: schema invalid: {e.message}")
            continue
        seen = set()
        for want, key in ((True, "valid"), (False, "invalid")):
            for idx, x in enumerate(c[key]):
                where = f"{n}: {key}[{idx}]"
                problems += [f"{where}: {p}" for p in instance_problems(x)]
                try:
                    json.dumps(x, allow_nan=False)
                except (TypeError, ValueError) as e:
                    problems.append(f"{where}: not JSON: {e}")
                    continue
                if canon(x) in seen:
                    problems.append(f"{where}: duplicate instance")
                seen.add(canon(x))
                for who, ok in verdicts(c["schema"], x).items():
                    if ok != want:
                        problems.append(f"{where}: {who} says {'valid' if ok else 'invalid'}: {json.dumps(x)[:120]}")
        if len(c["valid"]) < 1:
            problems.append(f"{n}: no valid instance")
        if c["schema"] is not True and len(c["invalid"]) < 1:
            problems.append(f"{n}: no invalid instance")
    nv = sum(len(c["valid"]) for c in cases)
    ni = sum(len(c["invalid"]) for c in cases)
    if len(cases) < 30:
        problems.append(f"only {len(cases)} cases (< 30)")
    if nv < 100:
        problems.append(f"only {nv} valid instances (< 100)")
    if ni < 80:
        problems.append(f"only {ni} invalid instances (< 80)")
    return problems


def default_data_dir() -> Path:
    env = os.environ.get("STRUCTGEN_SHARED_DATA")
    return Path(env) if env else REPO.parent / "shared" / "data"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=default_data_dir())
    ap.add_argument("--check", action="store_true", help="only validate the existing output")
    ap.add_argument("--report", action="store_true", help="print keyword coverage per case")
    args = ap.parse_args(argv)

    untyped_ok = {c["name"] for c in HANDWRITTEN if c["_untyped_objects"]}
    stats: dict[str, int] = __import__("collections").Counter()
    if args.check:
        cases = json.loads(OUT.read_text(encoding="utf-8"))
    else:
        if (args.data / "maskbench").is_dir():
            real = real_cases(args.data, stats)
        elif OUT.exists():
            print(f"note: {args.data} not found; keeping the real-world cases already in {OUT.name}")
            real = [c for c in json.loads(OUT.read_text(encoding="utf-8")) if c["source"] != "handwritten"]
        else:
            print(f"error: {args.data} not found and no existing {OUT.name} to keep", file=sys.stderr)
            return 1
        hand = [{k: v for k, v in c.items() if k != "_untyped_objects"} for c in HANDWRITTEN]
        cases = real + hand

    problems = check_cases(cases, untyped_ok)
    for k, v in sorted(stats.items()):
        print(f"  {k}: {v}")
    nv = sum(len(c["valid"]) for c in cases)
    ni = sum(len(c["invalid"]) for c in cases)
    print(f"{len(cases)} cases ({sum(c['source'] != 'handwritten' for c in cases)} real, "
          f"{sum(c['source'] == 'handwritten' for c in cases)} handwritten), {nv} valid, {ni} invalid")
    if args.report:
        for c in cases:
            print(f"  {c['name']:<58} v={len(c['valid']):<2} i={len(c['invalid']):<2} "
                  + " ".join(features(c["schema"])))
    if problems:
        for p in problems:
            print("VIOLATION:", p, file=sys.stderr)
        return 1
    if not args.check:
        text = json.dumps(cases, indent=1, ensure_ascii=False) + "\n"
        OUT.write_text(text, encoding="utf-8")
        print(f"wrote {OUT} ({len(text.encode('utf-8'))} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
