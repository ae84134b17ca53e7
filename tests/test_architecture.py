"""docs/architecture.md stays true to the tree: its package table has a row for every package
under ``odradek/`` (every directory with an ``__init__.py``) and none for a package that is not
there; its layer table places every top-level package once; every file it names exists.

The import rules the page states are checked elsewhere: the layers by tests/test_layers.py,
cycles by tests/test_imports.py.
"""

from __future__ import annotations

import re

from tests.conftest import ROOT
from tests.test_layers import LAYERS

DOC = ROOT / "docs" / "architecture.md"
PACKAGE = ROOT / "odradek"


def _section(text: str, title: str) -> str:
    """The text of the ``## title`` section, up to the next ``## ``."""
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else None]


def table_rows(section: str) -> list[list[str]]:
    """The cells of each table row (header and separator rows left out)."""
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in section.splitlines()
            if line.startswith("|")]
    return rows[2:]


def documented_packages(text: str) -> list[str]:
    """The packages of the ``Packages`` table, as ``a/b`` paths under ``odradek/``, in order."""
    names = []
    for cells in table_rows(_section(text, "Packages")):
        match = re.fullmatch(r"`([a-z_][a-z0-9_/]*)/`", cells[0])
        assert match, f"a package row names its package as `path/`: {cells[0]!r}"
        names.append(match.group(1))
    return names


def packages_on_disk() -> set[str]:
    return {p.parent.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("__init__.py") if p.parent != PACKAGE}


def test_every_package_has_a_row_and_every_row_a_package():
    documented = documented_packages(DOC.read_text())
    assert len(documented) == len(set(documented)), "a package has two rows"
    on_disk = packages_on_disk()
    assert len(on_disk) > 20
    assert sorted(on_disk - set(documented)) == [], "packages without a row in docs/architecture.md"
    assert sorted(set(documented) - on_disk) == [], "rows in docs/architecture.md for packages that do not exist"


def test_the_layers_are_the_ones_enforced():
    # every top-level package once, in the layers tests/test_layers.py checks the imports against
    layers = [tuple(re.findall(r"`([a-z_]+)`", cells[1])) for cells in table_rows(_section(DOC.read_text(), "Layers"))]
    placed = [name for layer in layers for name in layer]
    assert sorted(placed) == sorted({p.split("/")[0] for p in packages_on_disk()})
    assert [set(layer) for layer in layers] == [set(layer) for layer in LAYERS]


def test_every_file_named_exists():
    # `server/connection.py`, `tools/generate_protocol.py`: under odradek/ or the repository
    named = set(re.findall(r"`((?:[a-z_]+/)+[a-z_]+\.(?:py|c))`", DOC.read_text()))
    assert len(named) > 30
    missing = sorted(n for n in named if not (PACKAGE / n).exists() and not (ROOT / n).exists())
    assert missing == [], "files named in docs/architecture.md that do not exist"


def test_the_readme_links_the_page():
    assert "(docs/architecture.md)" in (ROOT / "README.md").read_text()


def test_the_row_reader_sees_rows_only(tmp_path):
    text = ("# t\n\n## Packages\n\n| package | what | may import |\n|---|---|---|\n"
            "| `a/` | x | y |\n| `a/b/` | x | y |\n\n## Next\n\n| `c/` | x | y |\n")
    assert documented_packages(text) == ["a", "a/b"]
