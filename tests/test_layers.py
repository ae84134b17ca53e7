"""Arrows point down: no odradek package imports a package above it.

The layers, lowest first (docs/architecture.md's layout, as the imports show it; a
package may import the packages of lower layers only, never one of its own layer or above):

    1. protocol                            the sans-I/O wire codec
    2. records                             record batches
    3. storage, metadata, client           the partition log; the metadata store; the client
    4. controller, coordinator             the controller; group/transaction/share coordinators
                                           and producer state
    5. replication                         replica manager, fetchers (it keeps the coordinator's
                                           producer state per partition)
    6. server                              the broker: listeners, handlers, lifecycle
    7. testing, spark, console, mirror     on the server (testing) or on the client
    8. demo                                on spark, console, server
    9. cli                                 the ``odradek`` command, over all of them

What a lower layer needs from the broker comes in from above: the coordinators call the
``broker`` they are given (``coordinator/inter_broker.py`` lists what they ask of it), the
controller hands its in-process requests to ``broker.dispatch`` with a
``protocol/request_context.RequestContext``.

Imports are read from the source (``tests/import_reader.py``: lazy ones count, ``if
TYPE_CHECKING:`` ones do not). Imports within a package are not checked here.
"""

from __future__ import annotations

import functools
from pathlib import Path

from tests.conftest import ROOT
from tests.import_reader import odradek_imports

LAYERS = (
    ("protocol",),
    ("records",),
    ("storage", "metadata", "client"),
    ("controller", "coordinator"),
    ("replication",),
    ("server",),
    ("testing", "spark", "console", "mirror"),
    ("demo",),
    ("cli",),
)
LAYER_OF = {package: n for n, packages in enumerate(LAYERS) for package in packages}
BELOW_SERVER = frozenset(p for p, n in LAYER_OF.items() if n < LAYER_OF["server"])


def imported_modules(module: str, source: str, is_package: bool = False) -> list[tuple[str, int]]:
    """``(dotted name, line)`` of every ``odradek`` import of ``module`` (relative ones resolved)."""
    found = []
    for imported, names, line in odradek_imports(module, source, is_package):
        if "." in imported or not names:
            found.append((imported, line))
        else:  # ``from odradek import server``, ``from .. import server``: the names are the packages
            found += [(f"{imported}.{name}", line) for name in names]
    return found


@functools.cache
def upward_imports(root: Path) -> list[str]:
    """Each import from one top-level package of ``root/odradek`` to another that is not in a
    lower layer, as ``"odradek.a.m (layer) imports odradek.b.n (layer), line N"``."""
    found = []
    for path in sorted((root / "odradek").rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if len(parts) < 3:  # odradek/__init__.py and top-level modules: no layer
            continue
        is_package = parts[-1] == "__init__"
        module = ".".join(parts[:-1] if is_package else parts)
        mine = parts[1]
        for name, line in imported_modules(module, path.read_text(), is_package):
            theirs = name.split(".")[1] if "." in name else None
            if theirs is None or theirs == mine:
                continue
            if LAYER_OF.get(theirs, len(LAYERS)) >= LAYER_OF.get(mine, -1):
                found.append(f"{module} ({_layer(mine)}) imports {name} ({_layer(theirs)}), line {line}")
    return found


def _layer(package: str) -> str:
    n = LAYER_OF.get(package)
    return "no layer" if n is None else f"layer {n + 1}"


def test_every_package_is_in_a_layer():
    packages = {p.parent.name for p in (ROOT / "odradek").glob("*/__init__.py")}
    assert packages == set(LAYER_OF), "add new packages to LAYERS (and the docstring)"


def test_no_module_below_the_server_imports_it():
    upward = upward_imports(ROOT)
    below = [u for u in upward if u.split(".")[1] in BELOW_SERVER and " imports odradek.server" in u]
    assert below == [], "below server/, importing odradek.server:\n" + "\n".join(below)


def test_no_import_points_up():
    upward = upward_imports(ROOT)
    assert upward == [], "imports that point up (see the layers in this module's docstring):\n" + "\n".join(upward)


def test_the_reader_finds_lazy_and_relative_imports_and_skips_type_checking(tmp_path):
    sources = {
        "odradek/__init__.py": "",
        "odradek/protocol/__init__.py": "",
        "odradek/protocol/codec.py": "def f():\n    from odradek.records import batch\n",
        "odradek/records/__init__.py": "from ..protocol import codec\n",
        "odradek/controller/__init__.py": "",
        "odradek/controller/channel.py": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                          "    from odradek.server import broker\nelse:\n"
                                          "    import odradek.coordinator.x\n"),
        "odradek/coordinator/__init__.py": "",
        "odradek/coordinator/x.py": "async def g():\n    from .. import server\n",
        "odradek/server/__init__.py": "import odradek.cli.main\n",
    }
    for name, text in sources.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert upward_imports(tmp_path) == [
        "odradek.controller.channel (layer 4) imports odradek.coordinator.x (layer 4), line 5",
        "odradek.coordinator.x (layer 4) imports odradek.server (layer 6), line 2",
        "odradek.protocol.codec (layer 1) imports odradek.records (layer 2), line 2",
        "odradek.server (layer 6) imports odradek.cli.main (layer 9), line 1",
    ]
