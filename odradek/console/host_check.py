"""Which ``Host`` names the console serves: the defence against DNS rebinding.

A page on ``http://evil.example:8080/`` whose name the attacker then points at 127.0.0.1
talks to a console on 127.0.0.1:8080 as its *own* origin: the browser sends ``Host:
evil.example:8080`` and ``Origin: http://evil.example:8080``, lets the page read every answer,
and the console acts with its Kafka credentials. What the attacker cannot choose is a name
the console was told it serves. So every request, whatever its route, must name one of:

- the bind address with the port the connection came in on (``127.0.0.1:8080``, ``[::1]:8080``);
- for a loopback bind (127.0.0.0/8, ::1, ``localhost``) or a wildcard one (``0.0.0.0``, ``::``,
  which listens on loopback too): ``localhost``, ``127.0.0.1`` and ``[::1]`` with that port;
- each ``--allowed-host NAME[:PORT]``: ``NAME:PORT`` matches exactly that; a bare ``NAME``
  matches ``NAME`` with the console's port, and ``NAME`` alone (the form a browser sends for
  its scheme's default port, e.g. behind a reverse proxy on 443).

A ``Host`` without a port also matches a bind name when the console itself listens on the
scheme's default port (80, or 443 with TLS). Names compare case-insensitively; IP literals
compare by value (``[0:0::1]`` is ``[::1]``). A request with no ``Host``, two of them, or one
that is not ``name[:port]`` matches nothing. The same test applies to an ``Origin``'s
host part (app.py's check on changes).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
WILDCARD_BINDS = ("", "0.0.0.0", "::")
# A reg-name or IPv4 literal (RFC 3986 host, without percent-encoding) or a bracketed IPv6 one.
_HOST = re.compile(r"^(?P<name>\[[0-9a-fA-F:.]+\]|[A-Za-z0-9._~!$&'()*+,;=-]+)(?::(?P<port>[0-9]{1,5}))?$")


def normalize_name(name: str) -> str | None:
    """``name`` as compared: lower case, an IP literal in its canonical text (IPv6 in
    brackets); None when it is not a host name at all."""
    name = name.strip().lower()
    bare = name[1:-1] if name.startswith("[") and name.endswith("]") else name
    try:
        address = ipaddress.ip_address(bare)
    except ValueError:
        return None if name.startswith("[") or not name else name
    return f"[{address.compressed}]" if address.version == 6 else address.compressed


def parse_host(value: str) -> tuple[str, int | None] | None:
    """A ``Host`` header (or ``--allowed-host``) as (normalized name, port or None); None
    when it is malformed (user info, a path, an empty or out-of-range port)."""
    match = _HOST.match(value.strip())
    if not match:
        return None
    name = normalize_name(match.group("name"))
    port = match.group("port")
    if name is None or (port is not None and not 0 < int(port) <= 65535):
        return None
    return name, (int(port) if port is not None else None)


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` serves this machine only: ``localhost`` or a loopback IP."""
    name = normalize_name(host or "")
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name.strip("[]") if name else "").is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class AllowedHosts:
    """The names a console serves (the module's docstring has the rules). ``bind`` is the
    ``--host`` it listens on; ``extra`` the ``--allowed-host`` values, already validated
    (``parse_extra``)."""

    bind: str = "127.0.0.1"
    extra: tuple[str, ...] = ()

    def bind_names(self) -> frozenset[str]:
        names = set()
        if (self.bind or "") not in WILDCARD_BINDS:
            name = normalize_name(self.bind)
            if name:
                names.add(name)
        if (self.bind or "") in WILDCARD_BINDS or is_loopback(self.bind):
            names.update(LOOPBACK_NAMES)
        return frozenset(names)

    def permits(self, host: str | None, port: int, default_port: int) -> bool:
        """Whether a request naming ``host`` (its ``Host`` header, or an ``Origin``'s host
        part) is for this console, which took the connection on ``port``; ``default_port``
        is the scheme's (80 for http, 443 for https)."""
        parsed = parse_host(host) if host else None
        if parsed is None:
            return False
        name, asked = parsed
        if name in self.bind_names() and asked in (port, None if port == default_port else port):
            return True
        for allowed_name, allowed_port in map(parse_host, self.extra):
            if name != allowed_name:
                continue
            if allowed_port is None and asked in (None, port):
                return True
            if allowed_port is not None and asked == allowed_port:
                return True
        return False


def parse_extra(values) -> tuple[str, ...]:
    """``--allowed-host`` values checked; raises ValueError naming the first malformed one."""
    for value in values or ():
        if parse_host(value) is None:
            raise ValueError(f"--allowed-host takes NAME or NAME:PORT, not {value!r}")
    return tuple(values or ())
