"""`import structgen` stays light: no torch, no transformers (checked in a fresh interpreter)."""
import subprocess
import sys


def test_import_structgen_does_not_load_torch_or_transformers():
    code = (
        "import sys, structgen\n"
        "from structgen import GrammarCompiler, GrammarMatcher, TokenizerInfo, Grammar\n"
        "import structgen.schema.to_grammar, structgen.cli, structgen.models, structgen.integrations.hf_generate\n"
        "import structgen.integrations.decoding, structgen.integrations.hf, structgen.tools, structgen.compare.command\n"
        "bad = [m for m in ('torch', 'transformers') if m in sys.modules]\n"
        "print(bad); sys.exit(1 if bad else 0)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_public_api_is_documented():
    import structgen

    for name in structgen.__all__:
        obj = getattr(structgen, name)
        if callable(obj) and not name.startswith("__"):
            assert obj.__doc__, f"{name} has no docstring"
