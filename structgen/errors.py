"""The exception tree of structgen: one root, input errors also ``ValueError``.

Every error that points into user input carries *where* (a JSON pointer into a schema,
a line and column into grammar text, a position in a regex) and *what was expected*.
"""
from __future__ import annotations

__all__ = [
    "StructgenError",
    "SchemaError",
    "UnsupportedSchemaError",
    "ToolSchemaError",
    "GrammarError",
    "GrammarSyntaxError",
    "RegexError",
    "AutomatonSizeError",
    "LimitError",
    "TokenizerError",
    "MatcherError",
    "StructgenTypeError",
    "InputFileError",
    "EmptyGrammarError",
    "DecodingError",
    "StructgenArgsError",
    "TaskError",
    "ToolError",
    "ToolDefinitionError",
    "ToolCallError",
    "StructgenWarning",
]


class StructgenError(Exception):
    """Root of every exception raised by structgen."""


class SchemaError(StructgenError, ValueError):
    """The JSON Schema is invalid or unsatisfiable.

    Attributes:
        pointer: JSON pointer (RFC 6901) to the offending schema location ("" = root; None:
            not located, see :class:`LimitError`).
        keyword: the keyword at fault, or None.
    """

    def __init__(self, message: str, *, pointer: str | None = "", keyword: str | None = None) -> None:
        self.message = message
        self.pointer = pointer
        self.keyword = keyword
        where = f" at {pointer or '#'}" if pointer is not None else ""
        kw = f" (keyword {keyword!r})" if keyword else ""
        super().__init__(f"{message}{kw}{where}")


class UnsupportedSchemaError(SchemaError):
    """A schema keyword that structgen cannot enforce (raised in strict mode)."""


class ToolSchemaError(SchemaError):
    """A tool's parameter schema is invalid or cannot be enforced (``structgen.tools``).

    Attributes:
        tool: the tool's name.
        pointer: JSON pointer into the tool's parameter schema ("" = its root).
        keyword: the keyword at fault, or None.
    """

    def __init__(self, message: str, *, tool: str, pointer: str | None = "", keyword: str | None = None) -> None:
        self.tool = tool
        super().__init__(f"tool {tool!r}: {message}", pointer=pointer, keyword=keyword)


class GrammarError(StructgenError, ValueError):
    """A grammar is ill-formed (undefined rule, left recursion, empty language...)."""


class EmptyGrammarError(GrammarError):
    """The grammar's language is empty: no string at all matches its start rule."""


class GrammarSyntaxError(GrammarError):
    """Lark grammar text that does not parse: carries line, column and a caret excerpt."""

    def __init__(self, message: str, *, line: int, column: int, text: str) -> None:
        self.message = message
        self.line = line
        self.column = column
        lines = text.splitlines() or [""]
        src = lines[line - 1] if 0 < line <= len(lines) else ""
        self.excerpt = f"{src}\n{' ' * max(column - 1, 0)}^"
        super().__init__(f"{message} at line {line}, column {column}:\n{self.excerpt}")


class RegexError(StructgenError, ValueError):
    """A regular expression structgen cannot compile; ``position`` is the index in ``pattern``,
    ``pointer`` the JSON pointer of the schema keyword holding it (None outside schemas)."""

    def __init__(self, message: str, *, pattern: str, position: int, pointer: str | None = None) -> None:
        self.message = message
        self.pattern = pattern
        self.position = position
        self.pointer = pointer
        where = f" (schema location {pointer or '#'})" if pointer is not None else ""
        super().__init__(f"{message} at position {position} in /{pattern}/{where}\n {pattern}\n {' ' * position}^")


class AutomatonSizeError(StructgenError):
    """Compiling would exceed the configured automaton size limit.

    Raised as soon as the limit is crossed, so refusing a huge grammar costs time and memory
    proportional to the limit, not to the grammar.

    Attributes:
        limit: the limit crossed (``max_states``), or None.
        reached: the states built when construction stopped, or None.
        pointer: JSON pointer of the schema construct whose automaton was being built ("" =
            the root), or None (a grammar not made from a schema, or not known).
        rule: the grammar rule whose automaton was being built, or None.
    """

    def __init__(self, message: str, *, limit: int | None = None, reached: int | None = None,
                 pointer: str | None = None, rule: str | None = None) -> None:
        self.limit = limit
        self.reached = reached
        self.pointer = pointer
        self.rule = rule
        super().__init__(message)


class LimitError(SchemaError, AutomatonSizeError):
    """A construct of the input would cost more than a documented limit allows.

    Raised while the work grows, as soon as the limit is crossed, with the JSON pointer of
    the construct that grew (or a line and column into schema text). Both a
    :class:`SchemaError` (the input is refused, ``ValueError``) and an
    :class:`AutomatonSizeError` (the size limit family). ``docs/limits.md`` lists every limit.

    Attributes:
        limit_name: the limit crossed (e.g. ``"max_grammar_rules"``).
        limit: its value.
        reached: how far the work got when it stopped, or None.
        pointer: JSON pointer of the construct ("" = root; None while the stage that raised
            it does not know, until the schema converter locates it).
        keyword: the keyword at fault, or None.
    """

    limit: int

    def __init__(self, message: str, *, limit_name: str, limit: int, reached: int | None = None,
                 pointer: str | None = "", keyword: str | None = None) -> None:
        SchemaError.__init__(self, f"{message} (limit {limit_name}={limit})", pointer=pointer, keyword=keyword)
        # set after: SchemaError's super() chain runs AutomatonSizeError.__init__, which resets them
        self.limit_name = limit_name
        self.limit = limit
        self.reached = reached
        self.message = message
        self.pointer = pointer

    def at(self, pointer: str | None) -> "LimitError":
        """The same error located at ``pointer`` (a construct the user wrote, when the work
        that grew ran on a schema derived from it)."""
        return LimitError(self.message, limit_name=self.limit_name, limit=self.limit, reached=self.reached,
                          pointer=pointer, keyword=self.keyword)


class TokenizerError(StructgenError, ValueError):
    """The tokenizer cannot be adapted (unknown vocabulary format, missing EOS...)."""


class MatcherError(StructgenError, ValueError):
    """Misuse of a matcher, bitmask or logits processor (shapes, batch size, devices)."""


class StructgenTypeError(StructgenError, TypeError):
    """An argument of the wrong type, such as a token id given as ``"90"`` or ``True``."""


class InputFileError(StructgenError, ValueError):
    """An input file that cannot be read or parsed (missing, unreadable, not JSON).

    Attributes:
        path: the file as the user named it.
        line, column: where the text stops parsing (1-based), or None.
    """

    def __init__(self, path: str, message: str, *, line: int | None = None, column: int | None = None) -> None:
        self.path = path
        self.line = line
        self.column = column
        where = f"{path}:{line}:{column}" if line is not None else str(path)
        super().__init__(f"{where}: {message}")


class DecodingError(StructgenError, ValueError):
    """Bad arguments to :func:`generate` (which grammar, which prompts)."""


class StructgenArgsError(StructgenError, ValueError):
    """A request's ``"structgen"`` extra argument is malformed (vLLM answers HTTP 400)."""


class TaskError(StructgenError, ValueError):
    """A task specification or task file that cannot be read."""


class ToolError(StructgenError, ValueError):
    """Misuse of the tools API (unknown tool, bad ``tool_choice``, bad call-count bounds...)."""


class ToolDefinitionError(ToolError):
    """A tool that cannot be defined: duplicate or invalid name, malformed dict, unsupported annotation.

    Attributes:
        tool: the tool's name (None when the name itself is missing).
        parameter: the Python parameter at fault, or None.
    """

    def __init__(self, message: str, *, tool: str | None = None, parameter: str | None = None) -> None:
        self.message = message
        self.tool = tool
        self.parameter = parameter
        where = f"tool {tool!r}: " if tool is not None else ""
        super().__init__(where + message)


class ToolCallError(ToolError):
    """A tool call that does not parse, does not validate, or cannot be converted for dispatch.

    Attributes:
        tool: the called tool's name (None if the call has no usable name).
        argument: the top-level argument at fault, or None.
        pointer: JSON pointer into the call's ``arguments`` ("" = the whole object).
        index: position of the call in the parsed output.
    """

    def __init__(self, message: str, *, tool: str | None = None, argument: str | None = None,
                 pointer: str = "", index: int | None = None) -> None:
        self.message = message
        self.tool = tool
        self.argument = argument
        self.pointer = pointer
        self.index = index
        parts = []
        if index is not None:
            parts.append(f"call {index}")
        if tool is not None:
            parts.append(f"tool {tool!r}")
        if argument is not None:
            parts.append(f"argument {argument!r} at {pointer or '/'}")
        super().__init__((", ".join(parts) + ": " if parts else "") + message)


class StructgenWarning(UserWarning):
    """Warnings structgen records in lenient mode (also kept on the compiled grammar)."""
