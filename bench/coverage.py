"""JSON Schema coverage and strictness on the official test suite and on MaskBench.

    python bench/coverage.py [--shared ../shared/data] [--suite-only] [--maskbench-limit N]

1. JSON-Schema-Test-Suite (draft2020-12 and draft7, without optional/): per schema group,
   compile (strict); each ``valid: true`` instance, serialised canonically, must be accepted
   and complete; each ``valid: false`` instance must be rejected. Per keyword file: pass,
   false-accept (under-constrained: the serious failure), false-reject, compile-refused.
2. MaskBench (real-world schemas with labelled instances): per subset, schemas compiled,
   valid instances accepted, invalid instances accepted.

Matching is done on bytes (the automaton, no tokenizer): masks follow from it exactly.
Writes bench/results/coverage.json and prints tables.
"""
from __future__ import annotations

import argparse
import gzip
import json
import signal
import sys
import time
import warnings
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from structgen import GrammarCompiler, StructgenError, TokenizerInfo  # noqa: E402
from structgen.schema.canonical import canonical_json  # noqa: E402

# A schema that takes more than this much CPU time to compile counts as refused. CPU time of
# this process (ITIMER_PROF), not wall time, so that the count does not depend on what else
# the machine is running.
TIME_LIMIT_S = 20


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout()


def byte_compiler() -> GrammarCompiler:
    info = TokenizerInfo.from_token_bytes([bytes([b]) for b in range(256)] + [None], stop_token_ids=[256])
    return GrammarCompiler(info, cache_size=0)


REMOTE_BASE = "http://localhost:1234/"  # where the test suite says its remotes/ folder is served


def suite_remotes(suite_root: Path, draft: str) -> dict:
    """The test suite's remote documents (remotes/) for one draft, by the URI its tests use,
    read from disk: the draft's own folder and the shared files (not other drafts' folders)."""
    folder = suite_root / "remotes"
    if not folder.is_dir():
        return {}
    other_drafts = {p.name for p in folder.iterdir() if p.is_dir() and p.name.startswith("draft") and p.name != draft}
    return {REMOTE_BASE + p.relative_to(folder).as_posix(): json.loads(p.read_text(encoding="utf-8"))
            for p in sorted(folder.rglob("*.json")) if p.relative_to(folder).parts[0] not in other_drafts}


def compile_or_reason(compiler, schema, resources=None):
    signal.signal(signal.SIGPROF, _alarm)
    signal.setitimer(signal.ITIMER_PROF, TIME_LIMIT_S)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if resources and REMOTE_BASE in json.dumps(schema):
                return compiler.compile_json_schema(schema, resources=resources), None
            return compiler.compile_json_schema(schema), None
    except StructgenError as e:
        return None, f"{type(e).__name__}: {getattr(e, 'keyword', None) or str(e)[:60]}"
    except _Timeout:
        return None, f"timeout > {TIME_LIMIT_S}s of CPU time"
    except RecursionError:
        return None, "CRASH RecursionError"
    except Exception as e:  # a bug: every refusal must be a StructgenError
        return None, f"CRASH {type(e).__name__}: {str(e)[:80]}"
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)


def accepts(compiled, text: str) -> bool:
    m = compiled.matcher()
    return m.accept_string(text) and m.is_completed()


def texts_for(value, schema):
    out = {json.dumps(value, ensure_ascii=False, separators=(",", ":"))}
    try:
        out.add(canonical_json(value, schema))
    except Exception:
        pass
    return out


def run_suite(shared: Path, draft: str, compiler) -> dict:
    root = shared / "json-schema-test-suite" / "tests" / draft
    remotes = suite_remotes(shared / "json-schema-test-suite", draft)
    per_file: dict[str, Counter] = {}
    refusals: Counter = Counter()
    examples = defaultdict(list)
    for path in sorted(root.glob("*.json")):
        c = Counter()
        for group in json.loads(path.read_text()):
            schema = group["schema"]
            if draft == "draft7" and isinstance(schema, dict) and "$schema" not in schema:
                schema = {"$schema": "http://json-schema.org/draft-07/schema#", **schema}
            compiled, reason = compile_or_reason(compiler, schema, remotes)
            if compiled is None:
                refusals[reason] += 1
                c["compile_refused"] += len(group["tests"])
                if reason.startswith("CRASH"):
                    examples["crash"].append((path.name, group["description"], reason))
                continue
            for test in group["tests"]:
                if test["valid"]:
                    try:
                        text = canonical_json(test["data"], schema)
                    except Exception:
                        text = json.dumps(test["data"], ensure_ascii=False, separators=(",", ":"))
                    if accepts(compiled, text):
                        c["pass"] += 1
                    else:
                        c["false_reject"] += 1
                        examples["false_reject"].append((path.name, group["description"], test["description"]))
                else:
                    if any(accepts(compiled, t) for t in texts_for(test["data"], schema)):
                        c["false_accept"] += 1
                        examples["false_accept"].append((path.name, group["description"], test["description"]))
                    else:
                        c["pass"] += 1
        per_file[path.stem] = c
    total = sum(per_file.values(), Counter())
    return {"total": dict(total), "per_file": {k: dict(v) for k, v in per_file.items()},
            "refusals": dict(refusals.most_common()), "examples": {k: v[:50] for k, v in examples.items()}}


def _jsonschema_valid(schema, value) -> bool:
    import jsonschema

    try:
        cls = jsonschema.validators.validator_for(schema)
        return cls(schema, format_checker=cls.FORMAT_CHECKER).is_valid(value)
    except Exception:
        return False


def run_maskbench(shared: Path, compiler, limit: int | None) -> dict:
    out = {}
    for path in sorted((shared / "maskbench").glob("*.jsonl.gz")):
        c = Counter()
        refusals: Counter = Counter()
        fa_examples = []
        t0 = time.perf_counter()
        with gzip.open(path, "rt") as fh:
            for i, line in enumerate(fh):
                if limit and i >= limit:
                    break
                row = json.loads(line)
                schema = row["schema"]
                c["schemas"] += 1
                compiled, reason = compile_or_reason(compiler, schema)
                if compiled is None:
                    refusals[reason] += 1
                    continue
                c["compiled"] += 1
                for test in row.get("tests", []):
                    if test["valid"]:
                        c["valid"] += 1
                        try:
                            text = canonical_json(test["data"], schema)
                        except Exception:
                            text = json.dumps(test["data"], ensure_ascii=False, separators=(",", ":"))
                        c["valid_accepted"] += accepts(compiled, text)
                    else:
                        c["invalid"] += 1
                        if any(accepts(compiled, t) for t in texts_for(test["data"], schema)):
                            if _jsonschema_valid(schema, test["data"]):
                                c["label_disputed"] += 1  # jsonschema (with formats) calls it valid
                            else:
                                c["invalid_accepted"] += 1
                                fa_examples.append(row["id"])
        out[path.name.split(".")[0]] = {**c, "seconds": round(time.perf_counter() - t0, 1),
                                        "refusals": dict(refusals.most_common(12)), "false_accept_ids": fa_examples[:20]}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", default=str(ROOT.parent / "shared" / "data"))
    ap.add_argument("--suite-only", action="store_true")
    ap.add_argument("--maskbench-limit", type=int, default=None, help="schemas per subset (default: all)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "coverage.json"))
    args = ap.parse_args()
    shared = Path(args.shared)
    compiler = byte_compiler()
    result = {"suite": {d: run_suite(shared, d, compiler) for d in ("draft2020-12", "draft7")}}
    for d, r in result["suite"].items():
        t = r["total"]
        print(f"{d}: pass {t.get('pass', 0)}, false-accept {t.get('false_accept', 0)}, "
              f"false-reject {t.get('false_reject', 0)}, compile-refused {t.get('compile_refused', 0)}")
    if not args.suite_only:
        result["maskbench"] = run_maskbench(shared, compiler, args.maskbench_limit)
        print("| subset | schemas | compiled | valid accepted | invalid accepted | label disputed by jsonschema |")
        print("|---|---|---|---|---|---|")
        tot = Counter()
        for name, r in result["maskbench"].items():
            tot.update({k: v for k, v in r.items() if isinstance(v, int)})
            print(f"| {name} | {r['schemas']} | {r.get('compiled', 0)} ({100 * r.get('compiled', 0) / max(r['schemas'], 1):.0f}%) "
                  f"| {r.get('valid_accepted', 0)}/{r.get('valid', 0)} | {r.get('invalid_accepted', 0)}/{r.get('invalid', 0)} "
                  f"| {r.get('label_disputed', 0)} |")
        print(f"| all | {tot['schemas']} | {tot['compiled']} ({100 * tot['compiled'] / max(tot['schemas'], 1):.0f}%) "
              f"| {tot['valid_accepted']}/{tot['valid']} | {tot['invalid_accepted']}/{tot['invalid']} | {tot['label_disputed']} |")
    result["keyword_table_md"] = keyword_table(result["suite"])
    print(result["keyword_table_md"])
    Path(args.out).write_text(json.dumps(result, indent=1, ensure_ascii=False))
    return 0


def keyword_table(suite: dict) -> str:
    """Per keyword file of the test suite: instances passed / valid rejected / refused, both drafts."""
    drafts = list(suite)
    names = sorted(set().union(*(suite[d]["per_file"] for d in drafts)))
    rows = ["| suite file | " + " | ".join(f"{d}: pass / valid rejected / refused of total" for d in drafts) + " |",
            "|---|" + "---|" * len(drafts)]
    for name in names:
        cells = []
        for d in drafts:
            c = suite[d]["per_file"].get(name)
            if c is None:
                cells.append("-")
                continue
            total = sum(c.values())
            cells.append(f"{c.get('pass', 0)} / {c.get('false_reject', 0)} / {c.get('compile_refused', 0)} of {total}"
                         + (f" ({c['false_accept']} INVALID ACCEPTED)" if c.get("false_accept") else ""))
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


if __name__ == "__main__":
    sys.exit(main())
