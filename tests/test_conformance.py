"""The official JSON-Schema-Test-Suite as a ratchet: results may only improve.

For every keyword file of draft 2020-12 and draft-07 (copied in tests/data, MIT): no
false accept at all (an invalid instance accepted by a grammar structgen compiled), and at
least as many passing instances as the checked-in baseline. After an improvement, refresh
the baseline with ``python tests/test_conformance.py --update``.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
BASELINE = DATA / "conformance_baseline.json"
sys.path.insert(0, str(ROOT))

from bench.coverage import byte_compiler, run_suite  # noqa: E402


def results() -> dict:
    compiler = byte_compiler()
    return {d: run_suite(DATA, d, compiler)["per_file"] for d in ("draft2020-12", "draft7")}


@pytest.fixture(scope="module")
def current():
    return results()


@pytest.mark.parametrize("draft", ["draft2020-12", "draft7"])
def test_no_false_accepts_and_no_regression(current, draft):
    baseline = json.loads(BASELINE.read_text())[draft]
    for name, counts in current[draft].items():
        assert counts.get("false_accept", 0) == 0, f"{draft}/{name}: invalid instance accepted"
        assert counts.get("pass", 0) >= baseline.get(name, {}).get("pass", 0), (
            f"{draft}/{name}: {counts.get('pass', 0)} pass, baseline {baseline[name]['pass']}")


if __name__ == "__main__" and "--update" in sys.argv:
    BASELINE.write_text(json.dumps(results(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {BASELINE}")
