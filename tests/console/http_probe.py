"""HTTP requests to a console with every header as given, ``Host`` and ``Origin`` included
(``http.client`` sends a given ``Host`` instead of its own), and the routes of the console's
app with their path parameters filled in, so a test covers every route, new ones too."""

from __future__ import annotations

import base64
import http.client
import json
import ssl
import urllib.parse
from dataclasses import dataclass

from odradek.console.app import ConsoleConfig, make_app



@dataclass
class Answer:
    status: int
    headers: http.client.HTTPMessage
    body: bytes

    def json(self):
        return json.loads(self.body)


def send(url: str, method: str, path: str, headers: dict | None = None, body: bytes | None = None,
         context: ssl.SSLContext | None = None) -> Answer:
    """``method path`` to the console at ``url`` (``http://host:port/`` or https)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "https":
        connection = http.client.HTTPSConnection(parts.hostname, parts.port, timeout=30, context=context)
    else:
        connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return Answer(response.status, response.headers, response.read())
    finally:
        connection.close()


def basic(user: str, password: str) -> dict:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def host_of(url: str) -> str:
    """``host:port`` of ``url``, as a browser's ``Host`` header has it."""
    return urllib.parse.urlsplit(url).netloc


def port_of(url: str) -> int:
    return urllib.parse.urlsplit(url).port


def every_route(topic: str = "orders", group: str = "billing") -> list[tuple[str, str]]:
    """(method, path) of each route of the app, HEAD included: a static file for the static
    folder, ``topic`` and ``group`` for names (by default those of tests/console/conftest.py),
    a first record for the message browser. Careful: DELETE removes ``topic`` when a console
    serves it."""
    parameters = {"{name}": topic, "{group:.+}": group, "{group}": group}
    routes = []
    for route in make_app(ConsoleConfig("127.0.0.1:9")).router.routes():
        info = route.resource.get_info()
        path = info.get("formatter") or info.get("path") or ""
        if "prefix" in info:  # the static folder
            path = info["prefix"].rstrip("/") + "/console.css"
        for parameter, value in parameters.items():
            path = path.replace(parameter, value)
        if path.endswith("/messages"):
            path += "?partition=0&offset=0&limit=1"
        routes.append((route.method, path))
    return routes
