"""Generative soundness: random walks over masks must only ever write valid instances.

For every schema of the core corpus (tests/data/core_schemas.json), a seeded sample of the
JSON-Schema-Test-Suite (tests/data/json-schema-test-suite, MIT) and a seeded sample of
MaskBench (tests/data/maskbench_sample.json, MIT, drawn from JSONSchemaBench; more from
../shared/data/maskbench when present) that compiles in strict mode, seeded walks sample
allowed tokens (tests/walks.py: uniformly, weighted towards short structural tokens, and
under a token budget that closes the output through the shortest completion). Every
output is checked by ``jsonschema`` (the schema's draft) with format checking: not one
invalid output is allowed.

Profiles: the default (CI) one is small; ``STRUCTGEN_SOAK=1`` walks more, over larger
samples (and the whole shared MaskBench subsets). Schemas that fail because of a known bug
fixed elsewhere are listed in ``KNOWN`` and marked ``xfail(strict=True)``: the mark fails
the run as soon as the bug is fixed, so the entry is removed then.

Run as a script (``python -m tests.test_generative_soundness``) to print every invalid
output of the active profile.
"""
from __future__ import annotations

import gzip
import json
import os
import random
import re
import warnings
import zlib
from dataclasses import dataclass, field
from typing import Any

import jsonschema
import numpy as np
import pytest

from structgen import GrammarCompiler, GrammarMatcher, TokenizerInfo
from structgen.runtime.budget import TokenBudget
from structgen.errors import StructgenError
from structgen.schema.validation import pattern_checks

from .conftest import DATA, SHARED
from .walks import budget_walk, random_walk, structural_tokens

SOAK = os.environ.get("STRUCTGEN_SOAK", "") not in ("", "0")


@dataclass(frozen=True)
class Profile:
    suite_sample: int  # JSON-Schema-Test-Suite groups sampled (per draft)
    shared_per_subset: int  # MaskBench schemas per subset from ../shared/data (0: none)
    uniform_walks: int  # per schema, uniform over the byte vocabulary's allowed tokens
    weighted_walks: int  # per schema, SmolLM2, preferring short structural tokens
    budget_walks: tuple[int, ...] = field(default=(2, 12))  # SmolLM2, budget = plan + extra
    max_steps: int = 160


PROFILE = Profile(suite_sample=400, shared_per_subset=6, uniform_walks=8, weighted_walks=8,
                  budget_walks=(0, 1, 2, 4, 8, 16, 40), max_steps=300) if SOAK else \
    Profile(suite_sample=25, shared_per_subset=0, uniform_walks=2, weighted_walks=2, budget_walks=(2, 12),
            max_steps=120)

SEED = 20261201

# Invalid outputs caused by bugs not yet fixed, by schema id: the reason names the bug.
# xfail(strict=True): the entry must be removed once the bug is fixed.
KNOWN: dict[str, str] = {}


# -- corpora ------------------------------------------------------------------------------

DRAFT_OF_DIR = {"draft2020-12": "https://json-schema.org/draft/2020-12/schema",
                "draft7": "http://json-schema.org/draft-07/schema#"}


def _with_draft(schema: Any, dialect: str) -> Any:
    if isinstance(schema, dict) and "$schema" not in schema:
        return {"$schema": dialect, **schema}
    return schema


def core_entries() -> list[tuple[str, Any]]:
    cases = json.loads((DATA / "core_schemas.json").read_text(encoding="utf-8"))
    return [(f"core/{c['name']}", c["schema"]) for c in cases]


def suite_entries(root, n: int, seed: int) -> list[tuple[str, Any]]:
    """A seeded sample of ``n`` test groups per draft of a JSON-Schema-Test-Suite copy."""
    out = []
    for draft, dialect in DRAFT_OF_DIR.items():
        groups = []
        for path in sorted((root / "tests" / draft).glob("*.json")):
            for k, group in enumerate(json.loads(path.read_text(encoding="utf-8"))):
                groups.append((f"suite/{draft}/{path.stem}/{k}", _with_draft(group["schema"], dialect)))
        rng = random.Random(seed)
        out += sorted(rng.sample(groups, min(n, len(groups))))
    return out


def maskbench_sample() -> list[tuple[str, Any]]:
    rows = json.loads((DATA / "maskbench_sample.json").read_text(encoding="utf-8"))
    return [(f"maskbench/{r['id']}", r["schema"]) for r in rows]


def shared_maskbench(per_subset: int, seed: int, max_chars: int | None = None) -> list[tuple[str, Any]]:
    """``per_subset`` seeded schemas of every MaskBench subset in ../shared/data/maskbench
    (at most ``max_chars`` characters of JSON each, when given)."""
    out = []
    for path in sorted((SHARED / "maskbench").glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            rows = [json.loads(line) for line in f]
        rows = [r for r in rows if isinstance(r.get("schema"), dict)
                and (max_chars is None or len(json.dumps(r["schema"])) <= max_chars)]
        rng = random.Random(f"{seed}/{path.name}")
        for r in rng.sample(rows, min(per_subset, len(rows))):
            out.append((f"maskbench/{r['id']}", r["schema"]))
    return out


def entries() -> list[tuple[str, Any]]:
    out = core_entries() + suite_entries(DATA / "json-schema-test-suite", PROFILE.suite_sample, SEED)
    out += maskbench_sample()
    if PROFILE.shared_per_subset and (SHARED / "maskbench").is_dir():
        seen = {k for k, _ in out}
        out += [e for e in shared_maskbench(PROFILE.shared_per_subset, SEED) if e[0] not in seen]
    return out


# -- walking ------------------------------------------------------------------------------


def _toy_bytes_info() -> TokenizerInfo:
    toks: list[bytes | None] = [bytes([b]) for b in range(256)] + [None]
    return TokenizerInfo.from_token_bytes(toks, stop_token_ids=[256])


def _search(pattern: str, text: str) -> bool:
    try:
        return re.search(pattern, text) is not None
    except re.error:
        # \p{...}, which Python's re lacks (jsonschema raised re.error on such schemas of the
        # suite): the third-party regex module (a dependency of transformers), not structgen's
        # own reading, so that the check stays independent
        import regex

        return regex.search(pattern, text) is not None


def validator_for(schema: Any):
    """The schema's own draft, with that draft's format checker."""
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls = jsonschema.validators.extend(cls, pattern_checks(_search))
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def _compile(compiler: GrammarCompiler, schema: Any):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return compiler.compile_json_schema(schema)
        except StructgenError:
            return None


def invalid_outputs(key: str, schema: Any, smollm2: GrammarCompiler, byte_compiler: GrammarCompiler,
                    profile: Profile = PROFILE) -> tuple[list[str], int] | None:
    """Walk the schema as the profile says; (invalid outputs with their errors, outputs
    checked), or None when structgen refuses the schema."""
    compiled = _compile(smollm2, schema)
    if compiled is None:
        return None
    validator = validator_for(schema)
    rng = np.random.default_rng(zlib.crc32(key.encode()) ^ SEED)
    bad: list[str] = []
    checked = 0

    def check(out: bytes, how: str) -> None:
        nonlocal checked
        checked += 1
        try:
            value = json.loads(out.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            bad.append(f"{how}: {out!r} is not JSON ({exc})")
            return
        pairs: list = []
        json.loads(out.decode("utf-8"), object_pairs_hook=lambda kv: pairs.append(kv) or dict(kv))
        for kv in pairs:
            names = [k for k, _ in kv]
            if len(set(names)) != len(names):
                bad.append(f"{how}: {out!r} repeats a member name")
                return
        errors = list(validator.iter_errors(value))
        if errors:
            bad.append(f"{how}: {out!r}: {errors[0].message}")

    info = compiled.tokenizer_info
    preferred = structural_tokens(info)
    for _ in range(profile.weighted_walks):
        out, done, _ = random_walk(GrammarMatcher(compiled), info, rng, max_steps=profile.max_steps,
                                   preferred=preferred)
        if done:
            check(out, "weighted walk")
    plan = TokenBudget(compiled, 1 << 20).plan
    for extra in profile.budget_walks:
        out, done, _, m = budget_walk(compiled, info, rng, len(plan) + extra)
        assert m.is_completed(), f"budget walk (+{extra}) ended incomplete: {out!r}"
        check(out, f"budget walk +{extra}")
    byte_compiled = _compile(byte_compiler, schema) if profile.uniform_walks else None
    if byte_compiled is not None:
        binfo = byte_compiled.tokenizer_info
        for _ in range(profile.uniform_walks):
            out, done, _ = random_walk(GrammarMatcher(byte_compiled), binfo, rng, max_steps=profile.max_steps * 2,
                                       stop_p=0.5)
            if done:
                check(out, "uniform byte walk")
        bplan = TokenBudget(byte_compiled, 1 << 20).plan
        out, done, _, m = budget_walk(byte_compiled, binfo, rng, len(bplan) + 6)
        check(out, "byte budget walk +6")
    return bad, checked


# -- tests --------------------------------------------------------------------------------

ENTRIES = entries()


def _params():
    for key, schema in ENTRIES:
        marks = [pytest.mark.xfail(strict=True, reason=KNOWN[key])] if key in KNOWN else []
        yield pytest.param(key, schema, id=key, marks=marks)


@pytest.fixture(scope="module")
def byte_compiler():
    return GrammarCompiler(_toy_bytes_info())


@pytest.mark.parametrize("key,schema", list(_params()))
def test_walks_write_only_valid_instances(key, schema, smollm2_compiler, byte_compiler):
    got = invalid_outputs(key, schema, smollm2_compiler, byte_compiler)
    if got is None:
        pytest.skip("structgen refuses this schema (strict mode)")
    bad, checked = got
    assert not bad, f"{len(bad)} of {checked} outputs invalid:\n" + "\n".join(bad[:5])


def test_corpora_present():
    """The copied samples are there and large enough to mean something."""
    keys = [k for k, _ in ENTRIES]
    assert sum(k.startswith("core/") for k in keys) >= 40
    assert sum(k.startswith("suite/") for k in keys) >= 2 * min(PROFILE.suite_sample, 25)
    assert sum(k.startswith("maskbench/") for k in keys) >= 20


@pytest.mark.skipif(not (SHARED / "maskbench").is_dir(), reason="../shared/data/maskbench is absent")
def test_shared_maskbench_sample_walks(smollm2_compiler, byte_compiler):
    """A few schemas of every shared MaskBench subset beyond the copied sample (seeded)."""
    per = PROFILE.shared_per_subset or 1
    known = {k for k, _ in ENTRIES}
    failures = []
    for key, schema in shared_maskbench(per, SEED + 1, None if SOAK else 2500):
        if key in known or key in KNOWN:
            continue
        got = invalid_outputs(key, schema, smollm2_compiler, byte_compiler,
                              Profile(0, 0, 0, 1, (4,), 80) if not SOAK else PROFILE)
        if got and got[0]:
            failures.append(f"{key}: {got[0][0]}")
    assert not failures, "\n".join(failures)


if __name__ == "__main__":  # print every invalid output of the active profile
    from structgen.models import load_default_tokenizer

    smol = GrammarCompiler(TokenizerInfo.from_huggingface(load_default_tokenizer()))
    byte = GrammarCompiler(_toy_bytes_info())
    extra = shared_maskbench(PROFILE.shared_per_subset or 1, SEED + 1) if (SHARED / "maskbench").is_dir() else []
    import time

    for key, schema in ENTRIES + extra:
        t0 = time.perf_counter()
        got = invalid_outputs(key, schema, smol, byte)
        if time.perf_counter() - t0 > 3:
            print(f"slow: {key} {time.perf_counter() - t0:.1f} s")
        if got and got[0]:
            print(key, json.dumps(schema)[:300])
            for line in got[0][:3]:
                print("   ", line[:400])
