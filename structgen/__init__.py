"""structgen: grammar-constrained structured decoding.

Pipeline (one module per stage): JSON Schema (``schema_to_grammar``) → :class:`Grammar`
(``grammar``, Lark text) → byte-level pushdown automaton (``automaton``) → per-configuration
token masks (``token_index``) → :class:`GrammarCompiler` / :class:`CompiledGrammar`
(``compiler``) → :class:`GrammarMatcher` (``matcher``) → bitmasks (``bitmask``) →
Hugging Face logits processors (``structgen.hf``).

``structgen.generate(model, tokenizer, prompt, schema=...)`` is the fast-forward decoding
loop (``structgen.decoding``); it imports torch when called. ``import structgen`` loads
neither torch nor transformers.
"""
from __future__ import annotations

try:
    from . import _core  # noqa: F401 - the native core; every stage below needs it
except ImportError as exc:  # a source checkout used without building it
    raise ImportError(
        "structgen's native core (structgen._core) is not built: run `pip install -e .` in the "
        "checkout (it compiles src/core/*.cpp with the system C++ compiler and pybind11)"
    ) from exc

from .batch import fill_next_token_bitmasks
from .bitmask import allocate_token_bitmask, apply_token_bitmask_inplace, bitmask_words
from .compiler import CompiledGrammar, CompileStats, GrammarCompiler
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
from . import generate  # a callable module: structgen.generate(...) runs structgen.decoding
from .grammar import Grammar
from .matcher import GrammarMatcher
from .schema_to_grammar import schema_to_grammar
from .tokenizer import TokenizerInfo

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
