"""The package's layers, read from the code: imports go only downward, there are no import
circles, and imports inside functions are only of optional heavy dependencies.

The layer order below is the architecture (docs/architecture.md); a module may import its own
layer and the layers under it. ``if TYPE_CHECKING:`` imports (annotations only) must respect
the order too, but do not count as circles: they never run.
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "structgen"

# lowest first; a prefix names a module or a whole subpackage
LAYERS: list[tuple[str, ...]] = [
    ("structgen._core", "structgen.errors", "structgen.guards", "structgen.disk_cache"),
    ("structgen.grammar",),
    ("structgen.regex",),
    ("structgen.schema",),
    ("structgen.index",),
    ("structgen.runtime",),
    ("structgen.tools",),
    ("structgen.integrations",),
    ("structgen.models", "structgen.inputs"),
    ("structgen.compare",),
    ("structgen.cli",),
    ("structgen", "structgen.__main__"),
]

# imports allowed inside functions: optional dependencies that are heavy to import or absent in
# a plain install (and structgen's own Triton kernel, which imports triton)
OPTIONAL = {"torch", "transformers", "vllm", "triton", "gguf", "safetensors", "accelerate", "huggingface_hub",
            "tokenizers", "pynvml", "rich", "matplotlib", "yaml", "structgen.runtime.kernels.triton_bitmask"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
NATIVE = {"structgen._core"}


def _layer(module: str) -> int:
    best, rank = -1, None
    for i, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, rank = len(prefix), i
    assert rank is not None, f"{module} is in no layer: add it to LAYERS in {__file__}"
    return rank


class _Import:
    def __init__(self, target: str, line: int, in_function: bool, type_only: bool, top: str) -> None:
        self.target, self.line, self.in_function, self.type_only, self.top = target, line, in_function, type_only, top


def _imports(module: str, path: Path) -> list[_Import]:
    """Every import of ``module``: structgen targets resolved to module names (``from pkg import
    sub`` names the submodule when there is one), others by their dotted name."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[_Import] = []

    def visit(node: ast.AST, in_function: bool, type_only: bool) -> None:
        for child in ast.iter_child_nodes(node):
            fn = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            guarded = type_only or (isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test))
            if isinstance(child, ast.Import):
                for alias in child.names:
                    found.append(_Import(alias.name, child.lineno, fn, type_only, alias.name))
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")[: len(package.split(".")) - (child.level - 1)]
                    source = ".".join(base + ([child.module] if child.module else []))
                else:
                    source = child.module or ""
                for alias in child.names:
                    sub = f"{source}.{alias.name}"
                    target = sub if sub in MODULES or sub in NATIVE else source
                    found.append(_Import(target, child.lineno, fn, type_only, source))
            else:
                visit(child, fn, guarded)

    visit(ast.parse(path.read_text(encoding="utf-8")), False, False)
    return found


def _edges() -> dict[str, list[tuple[str, _Import]]]:
    """Module -> (structgen module it makes Python import, the import). Importing ``a.b.c``
    also runs the ``__init__`` of ``a.b``: that counts, except the root package and the
    importer's own packages (already being initialised when it runs)."""
    edges: dict[str, list[tuple[str, _Import]]] = {m: [] for m in MODULES}
    for module, path in MODULES.items():
        for imp in _imports(module, path):
            if not (imp.target == "structgen" or imp.target.startswith("structgen.")):
                continue
            parts = imp.target.split(".")
            for i in range(2, len(parts) + 1):
                target = ".".join(parts[:i])
                own_package = module.startswith(target + ".")
                if target != imp.target and (own_package or target not in MODULES):
                    continue
                if target != module:
                    edges[module].append((target, imp))
    return edges


def test_every_module_has_a_layer():
    for module in MODULES:
        _layer(module)


def test_imports_only_go_down_the_layers():
    bad: list[str] = []
    for module, targets in _edges().items():
        for target, imp in targets:
            if target in MODULES and _layer(target) > _layer(module):
                bad.append(f"{MODULES[module].relative_to(PACKAGE.parent)}:{imp.line}: {module} imports {target} "
                           f"(layer {_layer(module)} imports layer {_layer(target)})")
    assert not bad, "upward imports:\n" + "\n".join(dict.fromkeys(bad))


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def walk(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = walk(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    limit = sys.getrecursionlimit()
    for node in sorted(graph):
        if node not in state:
            if len(graph) * 2 > limit:
                pytest.skip("too many modules for a recursive walk")
            found = walk(node)
            if found:
                return found
    return None


def test_no_import_circles():
    graph = {m: {t for t, imp in targets if t in MODULES and not imp.type_only}
             for m, targets in _edges().items()}
    cycle = _find_cycle(graph)
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


def test_function_level_imports_are_only_optional_dependencies():
    bad = []
    for module, path in MODULES.items():
        for imp in _imports(module, path):
            if not imp.in_function:
                continue
            name = imp.target if imp.target.startswith("structgen") else imp.top
            if not any(name == o or name.startswith(o + ".") for o in OPTIONAL):
                bad.append(f"{path.relative_to(PACKAGE.parent)}:{imp.line}: {name}")
    assert not bad, "imports inside functions (move them to the top of the module):\n" + "\n".join(bad)


def test_the_checker_sees_a_circle_and_an_upward_import():
    """The checks above can fail: a made-up graph with a circle, and a made-up upward import."""
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"b"}, "b": set()}) is None
    assert _layer("structgen.runtime.compiler") > _layer("structgen.schema.to_grammar") > _layer("structgen.grammar.expr")
