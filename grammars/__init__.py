"""Lark grammars shipped with structgen (installed as the ``structgen.grammars`` package; see pyproject.toml)."""
