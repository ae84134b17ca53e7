"""The console's static files: everything the pages load is there and ships in the package
(pyproject.toml's package-data), and uPlot comes with its licence and version note."""

from __future__ import annotations

import re
import tomllib

from odradek.console.app import STATIC
from tests.conftest import ROOT

JS = STATIC / "js"


def test_every_file_the_pages_load_exists():
    html = (STATIC / "index.html").read_text()
    loaded = re.findall(r'(?:src|href)="/static/([^"]+)"', html)
    assert "vendor/uplot/uPlot.iife.min.js" in loaded and "js/main.js" in loaded
    for path in loaded:
        assert (STATIC / path).is_file(), path
    for module in JS.rglob("*.js"):
        for imported in re.findall(r'^import .* from "(\.[^"]+)";$', module.read_text(), flags=re.M):
            assert (module.parent / imported).resolve().is_file(), f"{module.name} imports {imported}"


def test_the_static_files_ship_in_the_package():
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    patterns = package_data["odradek.console"]
    console = STATIC.parent
    shipped = {p for pattern in patterns for p in console.glob(pattern) if p.is_file()}
    assert {p for p in STATIC.rglob("*") if p.is_file()} <= shipped


def test_uplot_comes_with_its_licence_and_version():
    vendor = STATIC / "vendor" / "uplot"
    assert "MIT License" in (vendor / "LICENSE").read_text()
    version = re.search(r"uPlot (\d+\.\d+\.\d+)", (vendor / "VERSION.txt").read_text()).group(1)
    assert (vendor / "uPlot.iife.min.js").read_text().startswith(f"/*! https://github.com/leeoniya/uPlot (v{version}) */")
