"""``odradek demo --follow`` serves the web console while it follows and prints its address;
without --follow, or with --console-port -1, there is none."""

from __future__ import annotations

import io
import re
import urllib.request

from rich.console import Console

from odradek.demo.pipeline import DemoConfig, _web_console


def test_following_serves_the_console_and_prints_its_address(odradek_broker):
    out = io.StringIO()
    with _web_console(DemoConfig(follow=True), Console(file=out, width=200), odradek_broker.bootstrap) as server:
        with urllib.request.urlopen(server.url + "api/cluster", timeout=30) as answer:
            assert answer.status == 200
    assert re.fullmatch(r"web console at http://127\.0\.0\.1:\d+/\n", out.getvalue())
    assert server.url in out.getvalue()


def test_no_console_unless_following():
    out = io.StringIO()
    for config in (DemoConfig(follow=False), DemoConfig(follow=True, console_port=-1)):
        with _web_console(config, Console(file=out), "127.0.0.1:1") as server:
            assert server is None
    assert out.getvalue() == ""
