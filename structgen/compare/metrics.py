"""Per-arm figures of a comparison run, overall and per task family, and the honest findings."""
from __future__ import annotations

import statistics
from collections import Counter
from typing import Any

from .judge import FAILURE_CLASSES

__all__ = ["METRICS", "findings", "summarise", "summarise_rows"]

METRICS: dict[str, tuple[str, bool]] = {
    "tokens_mean": ("completion tokens per task (mean)", False),
    "valid_first_rate": ("valid after the first attempt", True),
    "valid_rate": ("valid after retries", True),
    "accuracy": ("matches the ground truth", True),
    "useful_ratio": ("useful-token ratio", True),
    "wall_seconds_mean": ("wall seconds per task", False),
    "ttft_mean": ("time to first token, first attempt (s)", False),
    "tpot_mean": ("seconds per output token", False),
    "tokens_per_second": ("tokens per second", True),
}
"""Metrics compared in :func:`findings`: name → (label, higher is better)."""


def _mean(xs: list[float]) -> float | None:
    return statistics.fmean(xs) if xs else None


def summarise_rows(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Figures of one arm over its result rows (see :func:`structgen.compare.arms.run_arm`)."""
    n = len(rows)
    tokens = [r["tokens"] for r in rows]
    attempts = [a for r in rows for a in r["attempt_log"]]
    gen_seconds = sum(a["seconds"] for a in attempts)
    scored = [r["accurate"] for r in rows if r["accurate"] is not None]
    # first attempts only: every arm's first prompt is processed whole, while a retry reuses
    # the cached conversation (prefix caching) and would flatter the arms that retry
    ttfts = [r["attempt_log"][0]["ttft"] for r in rows if r["attempt_log"] and r["attempt_log"][0]["ttft"] is not None]
    tpots = [(a["seconds"] - a["ttft"]) / (a["tokens"] - 1) for a in attempts
             if a["ttft"] is not None and a["tokens"] > 1]
    joules = [r["joules"] for r in rows if r["joules"] is not None]
    total = sum(tokens)
    return {
        "n": n,
        "tokens_mean": _mean(tokens), "tokens_median": statistics.median(tokens) if tokens else None,
        "tokens_total": total,
        "attempts_total": len(attempts), "attempts_mean": len(attempts) / n if n else None,
        "retries_total": sum(r["retries"] for r in rows), "retries_mean": _mean([r["retries"] for r in rows]),
        "valid_first_rate": _mean([float(r["valid_first"]) for r in rows]),
        "valid_rate": _mean([float(r["valid"]) for r in rows]),
        "accuracy": _mean([float(x) for x in scored]), "accuracy_n": len(scored),
        "useful_tokens_total": sum(r["useful_tokens"] for r in rows),
        "useful_ratio": sum(r["useful_tokens"] for r in rows) / total if total else None,
        "fenced_attempts": sum(r["fenced"] for r in rows), "fence_tokens": sum(r["fence_tokens"] for r in rows),
        "closed_at_budget": sum(r["closed"] for r in rows),
        "failures": dict(Counter(a["error_class"] for a in attempts if a["error_class"])),
        "wall_seconds_total": sum(r["wall_seconds"] for r in rows),
        "wall_seconds_mean": _mean([r["wall_seconds"] for r in rows]),
        "ttft_mean": _mean(ttfts), "tpot_mean": _mean(tpots),
        "tokens_per_second": total / gen_seconds if gen_seconds else None,
        "joules_per_token": sum(joules) / total if joules and total else None,
        **_fast_forward_figures(attempts),
    }


def _fast_forward_figures(attempts: list[dict[str, Any]]) -> dict[str, Any]:
    """Sampled vs forced tokens and forward passes saved, when the decoder reported them."""
    ff = [a for a in attempts if a.get("forced_tokens") is not None and a.get("forward_passes") is not None]
    if not ff:
        return {}
    tokens, forced = sum(a["tokens"] for a in ff), sum(a["forced_tokens"] for a in ff)
    passes = sum(a["forward_passes"] for a in ff)
    # token by token, every output token costs a pass, plus the prompt's (what passes counts)
    baseline = sum(a["tokens"] + 1 for a in ff)
    return {"forced_tokens_total": forced, "sampled_tokens_total": tokens - forced,
            "forced_share": forced / tokens if tokens else None, "forward_passes_total": passes,
            "forward_passes_saved": 1 - passes / baseline if baseline else None}


def summarise(rows: list[dict[str, Any]], arms: list[str]) -> dict[str, Any]:
    """``{"overall": {arm: figures}, "by_family": {family: {arm: figures}}, "findings": [...]}``."""
    out: dict[str, Any] = {"overall": {a: summarise_rows([r for r in rows if r["arm"] == a]) for a in arms}}
    families = sorted({r["family"] for r in rows})
    out["by_family"] = {f: {a: summarise_rows([r for r in rows if r["arm"] == a and r["family"] == f]) for a in arms}
                        for f in families}
    out["failure_classes"] = list(FAILURE_CLASSES)
    out["findings"] = findings(out)
    return out


def findings(summary: dict[str, Any], baseline: str = "constrained") -> list[str]:
    """Every metric, per family and overall, on which another arm beats ``baseline``.

    The report prints these as they are: where free-form JSON or YAML wins, it says so.
    """
    lines = []
    scopes = [("all tasks", summary["overall"])] + [(f"{f} tasks", s) for f, s in summary["by_family"].items()]
    for scope, per_arm in scopes:
        base = per_arm.get(baseline)
        if not base or not base["n"]:
            continue
        for metric, (label, higher) in METRICS.items():
            b = base.get(metric)
            if b is None:
                continue
            for arm, s in per_arm.items():
                v = s.get(metric)
                if arm == baseline or v is None or not s["n"]:
                    continue
                if (v > b) if higher else (v < b):
                    lines.append(f"{scope}: {arm} beats {baseline} on {label} ({_fmt(v)} vs {_fmt(b)})")
    return lines


def _fmt(v: float) -> str:
    return f"{v:.3g}" if isinstance(v, float) else str(v)
