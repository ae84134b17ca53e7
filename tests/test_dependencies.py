"""Every third-party module that odradek's code imports, at the top of a module or lazily inside
a function, comes from a distribution that pyproject.toml declares where that code runs: the
base install for the broker, the client, the CLI and the rest; the ``spark`` extra for the
PySpark source; the ``demo`` extra for the demo. Only the pytest plugin imports pytest, which
whoever runs pytest has.

tests/cli/test_plain_install.py runs a plain install for real; this finds, without
installing anything, an import that a run does not reach (a PKCS12 key store's
``cryptography``, a cluster's ``kazoo``).
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
# Where a module's code runs (the first prefix that matches): the extras it may count on.
EXTRAS_OF = (("odradek/spark/", ("spark",)), ("pyspark_odradek.py", ("spark",)), ("odradek/demo/", ("demo",)))
ALLOWED = {"odradek/testing/pytest_plugin.py": {"pytest"}}


def _name(requirement: str) -> str:
    return re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9._-]+", requirement).group()).lower()


def declared(extras: tuple[str, ...]) -> set[str]:
    """The distributions of the base install plus ``extras`` (an extra may name
    ``odradek[other]``), as normalised names."""
    names, todo, seen = {_name(r) for r in PROJECT["dependencies"]}, list(extras), set()
    while todo:
        extra = todo.pop()
        seen.add(extra)
        for requirement in PROJECT["optional-dependencies"][extra]:
            if _name(requirement) == "odradek":
                todo += [e for e in re.search(r"\[(.*)\]", requirement).group(1).split(",") if e not in seen]
            else:
                names.add(_name(requirement))
    return names


def third_party_imports(path: Path) -> set[str]:
    """The top-level names of every absolute import in ``path`` that is neither the standard
    library nor odradek."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module.split(".")[0])
    return {n for n in names if n not in sys.stdlib_module_names and n not in ("odradek", "__future__")}


def test_every_import_is_a_declared_dependency():
    distributions = importlib.metadata.packages_distributions()
    sources = sorted([*ROOT.glob("odradek/**/*.py"), ROOT / "pyspark_odradek.py"])
    assert len(sources) > 100
    undeclared = []
    for path in sources:
        relative = path.relative_to(ROOT).as_posix()
        extras = next((e for prefix, e in EXTRAS_OF if relative.startswith(prefix)), ())
        allowed = declared(extras)
        for module in sorted(third_party_imports(path) - ALLOWED.get(relative, set())):
            found = {_name(d) for d in distributions.get(module, [module])}
            if not found & allowed:
                undeclared.append(f"{relative}: {module} ({', '.join(sorted(found))}) "
                                  f"is not in {' + '.join(('base',) + extras)}")
    assert undeclared == []


def test_declared_sets():
    # The rule's own parts: the demo extra includes spark's; the base install has no Spark.
    assert {"pyspark", "pyarrow", "matplotlib"} <= declared(("demo",))
    assert "pyspark" not in declared(()) and "matplotlib" not in declared(())
    assert third_party_imports(ROOT / "odradek/client/ssl_stores.py") == {"cryptography"}
