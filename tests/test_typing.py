"""The public API is typed: the package ships ``py.typed`` and mypy passes on the modules
``[tool.mypy]`` in pyproject.toml lists (what ``structgen/__init__.py`` re-exports, the
integrations and the tools). mypy is in the ``test`` extra; without it the check is skipped."""
from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_the_package_ships_py_typed():
    assert (ROOT / "structgen" / "py.typed").is_file()
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["package-data"]
    assert "py.typed" in package_data["structgen"]


def test_public_modules_pass_mypy(tmp_path, monkeypatch):
    api = pytest.importorskip("mypy.api", reason="mypy is not installed (it is in the test extra: pip install -e '.[test]')")
    monkeypatch.chdir(ROOT)  # the configured files are relative to the checkout
    out, err, status = api.run(["--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(tmp_path)])
    assert status == 0, out + err
