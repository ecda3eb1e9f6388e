"""Token economy: constrained function calling vs free-form JSON (zero- and few-shot) vs YAML vs JSON mode.

    python bench/token_waste.py [--tasks default] [--tasks bfcl:50] [options of `structgen compare`]

The same engine as ``structgen compare`` (:mod:`structgen.compare`), six arms on a real model
plus the model-independent format-cost table over the shipped tokenizers; this script only
changes defaults: ``--out bench/results/token_waste`` (report.md, PNG plots, rows.jsonl),
``--json bench/results/token_waste.json`` and ``--max-retries 3``. See docs/token-economy.md.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from structgen.compare.command import add_arguments, run  # after the path set-up
from structgen.errors import StructgenError


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(ap)
    ap.set_defaults(out=ROOT / "bench" / "results" / "token_waste", json=ROOT / "bench" / "results" / "token_waste.json",
                    data=ROOT.parent / "shared" / "data", max_retries=3)
    args = ap.parse_args()
    try:
        return run(args)
    except StructgenError as exc:
        print(f"token_waste: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
