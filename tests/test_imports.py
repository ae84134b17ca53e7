"""No import cycles among odradek's modules.

A cycle makes the order of imports matter (the module imported second sees the first one half
built) and ties two concepts that should be apart: a name both need belongs in a third module
both import (as server/topic_error.py, server/internal_topics.py and console/offset_lookup.py
do). The graph is read from the source (``tests/import_reader.py``: lazy imports count, since a
lazy import only hides a cycle until the function runs; ``if TYPE_CHECKING:`` ones do not).

``from odradek.a import b`` is an edge to the module ``odradek.a.b`` when there is one, else to
``odradek.a`` (the package's ``__init__``). The implicit import of a module's parent packages
is not counted: a package ``__init__`` that re-exports its modules would otherwise be in a
cycle with each of them, which Python handles (the package is already in ``sys.modules``).
A C extension module (``odradek/storage/_fast_append.c`` and the like, built beside its
package's modules) is a module of its own that imports nothing of odradek's.
"""

from __future__ import annotations

from pathlib import Path

from tests.conftest import ROOT
from tests.import_reader import module_name, odradek_imports

PACKAGE = ROOT / "odradek"


def _owner(name: str, modules) -> str:
    """The module a dotted name is in: itself, or its nearest enclosing package."""
    while name not in modules and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def imports_of(name: str, path: Path, modules) -> set[str]:
    """The odradek modules that ``path`` (module ``name``) imports, itself left out."""
    found = set()
    for imported, names, _ in odradek_imports(name, path.read_text(), path.name == "__init__.py"):
        if not names:
            found.add(_owner(imported, modules))
        for alias in names:
            sub = f"{imported}.{alias}"
            found.add(sub if sub in modules else _owner(imported, modules))
    found.discard(name)
    return found


def import_graph() -> dict[str, set[str]]:
    """``{module: the odradek modules it imports}`` for every module of the package."""
    modules = {module_name(p, ROOT): p for p in PACKAGE.rglob("*.py")}
    extensions = {module_name(p, ROOT) for p in PACKAGE.rglob("_*.c") if "PyInit_" in p.read_text()}
    graph = {name: imports_of(name, path, modules | dict.fromkeys(extensions)) for name, path in modules.items()}
    return graph | {name: set() for name in extensions}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm,
    iterative), each sorted; every cycle of the graph lies within one of them."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def a_cycle(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """One cycle through the component's first module, as the import path that closes it
    (breadth-first, so the shortest)."""
    start, members = component[0], set(component)
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for nxt in sorted(graph[node] & members):
            if nxt == start:
                return paths[node] + [start]
            if nxt not in paths:
                paths[nxt] = paths[node] + [nxt]
                queue.append(nxt)
    raise AssertionError(f"no cycle through {start}")


def test_no_import_cycles():
    graph = import_graph()
    assert len(graph) > 300 and "odradek.server.broker" in graph
    found = [" -> ".join(a_cycle(graph, c)) for c in cycles(graph)]
    assert found == [], "import cycles:\n" + "\n".join(found)


def test_the_graph_reader_sees_lazy_imports_and_skips_type_checking(tmp_path):
    # The rules of the module's docstring, on a made-up package.
    (tmp_path / "odradek" / "p").mkdir(parents=True)
    sources = {
        "odradek/__init__.py": "",
        "odradek/p/__init__.py": "from odradek.p.a import A\n",
        "odradek/p/a.py": "def f():\n    from odradek.p import b\nA = 1\n",
        "odradek/p/b.py": "from . import c\n",
        "odradek/p/c.py": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from odradek.p.a import A\n"
                           "else:\n    import odradek.p.d.x\n"),
        "odradek/p/d.py": "",
    }
    for name, text in sources.items():
        (tmp_path / name).write_text(text)
    modules = {module_name(tmp_path / n, tmp_path): tmp_path / n for n in sources}
    graph = {m: imports_of(m, p, modules) for m, p in modules.items()}
    assert graph["odradek.p"] == {"odradek.p.a"}
    assert graph["odradek.p.a"] == {"odradek.p.b"}  # lazy, in a function
    assert graph["odradek.p.b"] == {"odradek.p.c"}  # relative
    assert graph["odradek.p.c"] == {"odradek.p.d"}  # TYPE_CHECKING skipped, its else kept
    assert cycles(graph) == []
    graph["odradek.p.c"].add("odradek.p.a")
    assert cycles(graph) == [["odradek.p.a", "odradek.p.b", "odradek.p.c"]]
    assert a_cycle(graph, cycles(graph)[0]) == ["odradek.p.a", "odradek.p.b", "odradek.p.c", "odradek.p.a"]
