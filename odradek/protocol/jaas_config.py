"""Kafka's ``sasl.jaas.config`` values, parsed as Kafka's ``JaasConfig`` parses them.

Format (one or more login modules, each ending in ``;``)::

    <LoginModuleClass> <required|requisite|sufficient|optional> [key=value ...];

Values are quoted (``"..."``, with ``\\"`` escapes) or bare tokens. Examples::

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";
    org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="pw";

``parse`` returns the modules in order; a value that does not follow the format raises
``JaasConfigError`` naming what is wrong (the broker and CLI turn it into a config error).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

FLAGS = ("required", "requisite", "sufficient", "optional")
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"

_TOKEN = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([^\s=;"]+)|(=)|(;))', re.S)


class JaasConfigError(ValueError):
    """A ``sasl.jaas.config`` value Kafka would refuse."""


@dataclass(frozen=True)
class LoginModule:
    name: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)


def _tokens(text: str) -> list[tuple[str, str]]:
    """(kind, value) pairs: kind is "word" (bare or quoted), "=" or ";"."""
    out, pos, text = [], 0, text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise JaasConfigError(f"sasl.jaas.config: cannot parse at {text[pos:pos + 20]!r}")
        quoted, bare, eq, semi = m.groups()
        if quoted is not None:
            out.append(("word", re.sub(r"\\(.)", r"\1", quoted)))
        elif bare is not None:
            out.append(("word", bare))
        else:
            out.append((eq or semi, eq or semi))
        pos = m.end()
    return out


def parse(text: str) -> list[LoginModule]:
    tokens = _tokens(text)
    modules, i = [], 0
    while i < len(tokens):
        if i + 1 >= len(tokens) or tokens[i][0] != "word" or tokens[i + 1][0] != "word":
            raise JaasConfigError("sasl.jaas.config: expected '<LoginModule> <flag> key=value ...;'")
        name, flag = tokens[i][1], tokens[i + 1][1].lower()
        if flag not in FLAGS:
            raise JaasConfigError(f"sasl.jaas.config: invalid control flag {tokens[i + 1][1]!r}")
        i += 2
        options = {}
        while i < len(tokens) and tokens[i][0] != ";":
            if i + 2 >= len(tokens) or tokens[i][0] != "word" or tokens[i + 1][0] != "=" or tokens[i + 2][0] != "word":
                raise JaasConfigError(f"sasl.jaas.config: expected key=value in the options of {name}")
            options[tokens[i][1]] = tokens[i + 2][1]
            i += 3
        if i >= len(tokens):
            raise JaasConfigError("sasl.jaas.config: a login module must end with ';'")
        modules.append(LoginModule(name, flag, options))
        i += 1
    if not modules:
        raise JaasConfigError("sasl.jaas.config: no login module")
    return modules


def plain_users(text: str) -> dict[str, str]:
    """The ``user_<name>="<password>"`` options of a PlainLoginModule config: name -> password."""
    users = {}
    for module in parse(text):
        for key, value in module.options.items():
            if key.startswith("user_"):
                users[key[len("user_"):]] = value
    return users


def client_credentials(text: str) -> tuple[str, str]:
    """The ``username`` and ``password`` of the first login module (a client's config)."""
    options = parse(text)[0].options
    if "username" not in options or "password" not in options:
        raise JaasConfigError("sasl.jaas.config: username and password are required")
    return options["username"], options["password"]
