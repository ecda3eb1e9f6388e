"""structgen: grammar-constrained structured decoding.

Layers (one subpackage per stage, each importing only those listed before it; see
docs/architecture.md): ``grammar`` (Lark text and expressions → :class:`Grammar`) →
``regex`` (regexes and formats → expressions) → ``schema`` (JSON Schema →
:class:`Grammar`) → ``index`` (grammar + tokenizer → pushdown automaton and token masks) →
``runtime`` (:class:`GrammarCompiler` / :class:`CompiledGrammar`, :class:`GrammarMatcher`,
bitmasks) → ``tools`` (function calling) → ``integrations`` (Hugging Face processors, the
own decode loop, vLLM) → the command line and ``compare``.

``structgen.generate(model, tokenizer, prompt, schema=...)`` is the fast-forward decoding
loop (:mod:`structgen.integrations.decoding`); it imports torch when called. ``import
structgen`` loads neither torch nor transformers.
"""
from __future__ import annotations

try:
    from . import _core as _core  # noqa: F401 - the native core; every stage below needs it
except ImportError as exc:  # a source checkout used without building it
    raise ImportError(
        "structgen's native core (structgen._core) is not built: run `pip install -e .` in the "
        "checkout (it compiles src/core/*.cpp with the system C++ compiler and pybind11)"
    ) from exc

from .errors import (
    AutomatonSizeError,
    DecodingError,
    EmptyGrammarError,
    GrammarError,
    GrammarSyntaxError,
    InputFileError,
    LimitError,
    MatcherError,
    RegexError,
    SchemaError,
    StructgenArgsError,
    StructgenError,
    StructgenTypeError,
    StructgenWarning,
    TaskError,
    TokenizerError,
    ToolCallError,
    ToolDefinitionError,
    ToolError,
    ToolSchemaError,
    UnsupportedSchemaError,
)
from .grammar import Grammar
from .index.tokenizer import TokenizerInfo
from .integrations.decoding import generate
from .runtime.batch import fill_next_token_bitmasks
from .runtime.bitmask import allocate_token_bitmask, apply_token_bitmask_inplace, bitmask_words
from .runtime.compiler import CompiledGrammar, CompileStats, GrammarCompiler
from .runtime.matcher import GrammarMatcher
from .schema.to_grammar import schema_to_grammar

__version__ = "0.1.0"

__all__ = [
    "AutomatonSizeError",
    "CompileStats",
    "CompiledGrammar",
    "DecodingError",
    "EmptyGrammarError",
    "Grammar",
    "GrammarCompiler",
    "GrammarError",
    "GrammarMatcher",
    "GrammarSyntaxError",
    "InputFileError",
    "LimitError",
    "MatcherError",
    "RegexError",
    "SchemaError",
    "StructgenArgsError",
    "StructgenError",
    "StructgenTypeError",
    "StructgenWarning",
    "TaskError",
    "TokenizerError",
    "TokenizerInfo",
    "ToolCallError",
    "ToolDefinitionError",
    "ToolError",
    "ToolSchemaError",
    "UnsupportedSchemaError",
    "allocate_token_bitmask",
    "apply_token_bitmask_inplace",
    "bitmask_words",
    "fill_next_token_bitmasks",
    "generate",
    "schema_to_grammar",
    "__version__",
]
