"""The fast-forward benchmark with its usual arguments: ``bench/fast_forward.py``.

    python bench/ff.py            # = python bench/fast_forward.py --bfcl 50 --maskbench 5 --repeats 0

Extra arguments are passed on (and override these defaults).
"""
from __future__ import annotations

import runpy
import sys
from pathlib import Path

if __name__ == "__main__":
    sys.argv = [sys.argv[0], "--bfcl", "50", "--maskbench", "5", "--repeats", "0", *sys.argv[1:]]
    runpy.run_path(str(Path(__file__).with_name("fast_forward.py")), run_name="__main__")
