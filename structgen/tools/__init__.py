"""Function calling: takes tool definitions, gives call schemas and grammars, and parses, validates and dispatches calls.

Definitions come from JSON Schema parameter objects (:meth:`Tool.from_json_schema`), OpenAI
tool dicts (:meth:`ToolSet.from_openai`), Python callables (:meth:`ToolSet.from_functions`:
type hints and docstrings) and Berkeley Function Calling Leaderboard definitions
(:meth:`ToolSet.from_bfcl`). A :class:`ToolSet` gives

* :meth:`~ToolSet.json_schema`: the JSON Schema of a valid call, one ``anyOf`` branch per
  tool, so the chosen name fixes the arguments' schema (any engine can use it);
* :meth:`~ToolSet.grammar` / :meth:`~ToolSet.compile`: the grammar of a whole answer for ``tool_choice`` ``"required"``, a named tool, ``"auto"``
  (free text, or a call after the chat template's trigger tag) or ``"none"``, single or
  parallel calls, in the model's tool-call format (:class:`ToolCallFormat`);
* :meth:`~ToolSet.parse` → validated :class:`ToolCall` objects, :meth:`~ToolSet.dispatch`
  → the Python function called with converted arguments.

Generating with a model is the integrations' part: ``structgen.generate(..., tools=toolset)``,
:class:`structgen.integrations.hf.ToolCallLogitsProcessor` for ``model.generate`` and
:func:`structgen.integrations.hf_generate.generate_tool_calls`. This package imports none of them.

``import structgen.tools`` loads neither torch nor transformers.
"""
from __future__ import annotations

from ..errors import ToolSchemaError
from .bfcl import BFCL_TYPES, bfcl_to_json_schema
from .formats import HERMES, JSON, SMOLLM2, ToolCallFormat, text_without
from .python_types import parse_docstring
from .toolset import (
    Tool,
    ToolCall,
    ToolCallError,
    ToolChoice,
    ToolDefinitionError,
    ToolError,
    ToolGeneration,
    ToolSet,
    load_catalogue,
    shortest_completion,
)

__all__ = [
    "BFCL_TYPES",
    "HERMES",
    "JSON",
    "SMOLLM2",
    "Tool",
    "ToolCall",
    "ToolCallError",
    "ToolCallFormat",
    "ToolChoice",
    "ToolDefinitionError",
    "ToolError",
    "ToolGeneration",
    "ToolSchemaError",
    "ToolSet",
    "bfcl_to_json_schema",
    "load_catalogue",
    "parse_docstring",
    "shortest_completion",
    "text_without",
]
