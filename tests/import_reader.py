"""The ``odradek`` imports of a module, read from its source with ``ast`` (nothing is
imported), for the tests of the import graph (``tests/test_imports.py``: no cycles;
``tests/test_layers.py``: arrows point down).

Every ``import`` and ``from ... import`` counts, at module level or inside a function (a lazy
import is still a dependency, only a later one), except under ``if TYPE_CHECKING:``: those never
run (the ``else`` of such an ``if`` does, and is read). Relative imports are resolved against
the module's package.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path


def module_name(path: Path, root: Path) -> str:
    """``odradek.a.b`` for ``root/odradek/a/b.py``, ``odradek.a`` for ``root/odradek/a/__init__.py``."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_nodes(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every Import / ImportFrom under ``tree``, except in the body of ``if TYPE_CHECKING:``."""
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            for node in child.orelse:
                yield from _import_nodes(ast.Module(body=[node], type_ignores=[]))
            continue
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child
        yield from _import_nodes(child)


def odradek_imports(module: str, source: str, is_package: bool = False) -> Iterator[tuple[str, tuple[str, ...], int]]:
    """``(module, names, line)`` for every import of an ``odradek`` module by ``module`` (whose
    source is ``source``): ``names`` are those of ``from module import names``, empty for a
    plain ``import module``."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    for node in _import_nodes(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "odradek":
                    yield alias.name, (), node.lineno
            continue
        base = package[: len(package) - node.level + 1] if node.level else []
        imported = ".".join(base + ([node.module] if node.module else []))
        if imported.split(".")[0] == "odradek":
            yield imported, tuple(alias.name for alias in node.names), node.lineno
