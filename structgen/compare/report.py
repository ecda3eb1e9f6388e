"""Output of a comparison: a terminal table (rich), a Markdown report, PNG plots (matplotlib).

rich and matplotlib are the ``bench`` extra (``pip install "structgen[bench]"``); they are
imported only by the functions that draw.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["COLUMNS", "markdown_report", "plot", "print_table", "table_rows"]

ARM_LABELS = {"constrained": "constrained call (structgen)", "json": "free-form JSON", "yaml": "YAML",
              "json_mode": "JSON mode (any JSON)"}

COLUMNS: list[tuple[str, str, str]] = [
    ("tasks", "n", "d"),
    ("tokens mean", "tokens_mean", ".1f"),
    ("median", "tokens_median", ".1f"),
    ("total", "tokens_total", "d"),
    ("attempts/task", "attempts_mean", ".2f"),
    ("retries", "retries_total", "d"),
    ("valid 1st", "valid_first_rate", ".0%"),
    ("valid final", "valid_rate", ".0%"),
    ("accuracy", "accuracy", ".0%"),
    ("useful ratio", "useful_ratio", ".2f"),
    ("wall s/task", "wall_seconds_mean", ".1f"),
    ("TTFT s", "ttft_mean", ".2f"),
    ("s/token", "tpot_mean", ".3f"),
    ("tok/s", "tokens_per_second", ".1f"),
    ("J/token", "joules_per_token", ".3f"),
    ("forced share", "forced_share", ".0%"),
    ("passes saved", "forward_passes_saved", ".0%"),
]
"""Table columns: header, figure name, format."""


def _cell(value: Any, fmt: str) -> str:
    if value is None:
        return "–"
    return format(value, fmt) if fmt != "d" else str(int(value))


def table_rows(per_arm: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """Headers and cells of the per-arm table (J/token and the fast-forward columns only when measured)."""
    optional = ("joules_per_token", "forced_share", "forward_passes_saved")
    cols = [c for c in COLUMNS if c[1] not in optional
            or any(s.get(c[1]) is not None for s in per_arm.values())]
    rows = [[ARM_LABELS.get(arm, arm)] + [_cell(s.get(key), fmt) for _, key, fmt in cols]
            for arm, s in per_arm.items() if s["n"]]
    return ["arm"] + [c[0] for c in cols], rows


def print_table(summary: dict[str, Any], console: Any = None) -> None:
    """The overall and per-family tables on the terminal."""
    from rich.console import Console
    from rich.table import Table

    if console is None:
        console = Console()
        if not console.is_terminal:  # a log file: do not squeeze the columns into 80 characters
            console = Console(width=200)
    scopes = [("all tasks", summary["overall"])] + [(f"{f} tasks", s) for f, s in summary["by_family"].items()]
    for title, per_arm in scopes:
        headers, rows = table_rows(per_arm)
        t = Table(title=title, title_justify="left")
        for i, h in enumerate(headers):
            t.add_column(h, justify="left" if i == 0 else "right")
        for r in rows:
            t.add_row(*r)
        console.print(t)
    for line in summary["findings"]:
        console.print(f"[yellow]•[/yellow] {line}")


def _md_table(headers: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def markdown_report(result: dict[str, Any], plots: list[str] | None = None) -> str:
    """The Markdown report of a run (``result`` as written to the JSON file)."""
    s = result["summary"]
    lines = [
        "# Token waste: constrained calls vs free-form JSON vs YAML vs JSON mode", "",
        f"Command: `{result['command']}`  ", f"Model: {result['model']}  ", f"Hardware: {result['hardware']}  ",
        (f"Tasks: {result['n_tasks']} ({', '.join(f'{k}: {v}' for k, v in result['task_counts'].items())}); "
        f"budget: {result['settings']['budget']}; retries: up to {result['settings']['max_retries']} "
        f"(the error appended to the conversation); "
         f"time spent in the arms {result['arm_seconds']:.0f} s (this process: {result['wall_seconds']:.0f} s)."), "",
        ("Tokens are completion tokens of all attempts (stop token included). Valid = parses (a Markdown fence is "
        "stripped first and its tokens count as waste) and validates with `jsonschema`. Accuracy: BFCL AST match. "
        "Useful ratio = tokens of the minimal compact JSON of the final valid answer ÷ all completion tokens. "
        "TTFT includes prompt processing; s/token is the time per output token after the first."), "",
        "## All tasks", "", _md_table(*table_rows(s["overall"])), "",
    ]
    for fam, per_arm in s["by_family"].items():
        lines += [f"## {fam} tasks", "", _md_table(*table_rows(per_arm)), ""]
    arms = list(s["overall"])
    lines += ["## Why attempts failed", "", _md_table(
        ["arm"] + s["failure_classes"] + ["fenced attempts", "fence tokens", "closed at budget"],
        [[ARM_LABELS.get(a, a)] + [str(s["overall"][a]["failures"].get(c, 0)) for c in s["failure_classes"]]
         + [str(s["overall"][a][k]) for k in ("fenced_attempts", "fence_tokens", "closed_at_budget")]
         for a in arms if s["overall"][a]["n"]]), ""]
    lines += ["## Where another arm beats the constrained call", ""]
    lines += [f"- {x}" for x in s["findings"]] or ["- nowhere: the constrained call is best or tied on every metric"]
    if result.get("not_run"):
        lines += ["", f"## Not run ({len(result['not_run'])} tasks: the run was stopped; the figures above are partial)",
                  "", ", ".join(result["not_run"])]
    if result.get("skipped"):
        lines += ["", "## Skipped tasks", ""] + [f"- {x['task']}: {x['reason']}" for x in result["skipped"]]
    if plots:
        lines += ["", "## Plots", ""] + [f"![{Path(p).stem}]({Path(p).name})" for p in plots]
    return "\n".join(lines) + "\n"


def plot(summary: dict[str, Any], out_dir: Path) -> list[Path]:
    """Four PNGs in ``out_dir``: tokens, retries, valid rate, latency per arm (and per family)."""
    import matplotlib

    matplotlib.use("Agg")  # files only; never a window
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    arms = [a for a, s in summary["overall"].items() if s["n"]]
    scopes = [("all", summary["overall"])] + list(summary["by_family"].items())
    labels = [ARM_LABELS.get(a, a).replace(" (", "\n(") for a in arms]
    specs = [
        ("tokens", "completion tokens per task (mean, all attempts)", [("tokens_mean", None)]),
        ("retries", "retries per task (mean)", [("retries_mean", None)]),
        ("valid_rate", "valid answers", [("valid_first_rate", "after 1st attempt"), ("valid_rate", "after retries")]),
        ("latency", "seconds", [("ttft_mean", "time to first token"), ("wall_seconds_mean", "wall time per task")]),
    ]
    paths = []
    for name, ylabel, series in specs:
        fig, axes = plt.subplots(1, len(scopes), figsize=(4.2 * len(scopes), 3.8), squeeze=False)
        for ax, (scope, per_arm) in zip(axes[0], scopes):
            width = 0.8 / len(series)
            for k, (key, legend) in enumerate(series):
                vals = [per_arm[a].get(key) or 0.0 for a in arms]
                xs = [i + (k - (len(series) - 1) / 2) * width for i in range(len(arms))]
                bars = ax.bar(xs, vals, width, label=legend)
                ax.bar_label(bars, fmt="{:.0%}" if "rate" in key else "{:.1f}", fontsize=7)
            ax.set_xticks(range(len(arms)), labels, fontsize=7)
            ax.set_title(f"{scope} tasks", fontsize=9)
            ax.set_ylabel(ylabel, fontsize=8)
            if "rate" in series[0][0]:
                ax.set_ylim(0, 1.1)
            if len(series) > 1:
                ax.legend(fontsize=7)
        fig.tight_layout()
        path = out_dir / f"{name}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths
