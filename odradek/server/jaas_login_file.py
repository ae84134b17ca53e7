"""A broker's JAAS login file, the older way Kafka's documentation configures SASL on brokers.

Kafka reads a listener's SASL login settings from ``listener.name.<listener>.<mechanism>.
sasl.jaas.config`` in server.properties; when that is unset, from the JAAS file the JVM was
given with ``-Djava.security.auth.login.config=<file>``, which Kafka's start scripts take from
``KAFKA_OPTS`` (Kafka's ``JaasContext.loadServerContext``). odradek reads the same variable, so
``KAFKA_OPTS=-Djava.security.auth.login.config=/etc/kafka/kafka_server_jaas.conf odradek broker
server.properties`` works as it does for Kafka. The file::

    // the section of the listener SASL_SSL; without it, KafkaServer is used
    sasl_ssl.KafkaServer {
        org.apache.kafka.common.security.scram.ScramLoginModule required
            username="admin" password="admin-secret";
    };
    KafkaServer {
        org.apache.kafka.common.security.plain.PlainLoginModule required
            username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";
        org.apache.kafka.common.security.scram.ScramLoginModule required
            username="admin" password="admin-secret";
    };
    Client { ... };   // ZooKeeper's login: not used by odradek

Sections are ``<name> { <login modules> };`` with ``//`` and ``/* */`` comments; a section's
modules are written as ``sasl.jaas.config`` writes them (``protocol/jaas_config.py``). For a
mechanism, the login modules of its kind are taken (PlainLoginModule for PLAIN, ScramLoginModule
for SCRAM-SHA-256/512), as Kafka picks the module of the mechanism.
"""

from __future__ import annotations

import os
import re
import shlex

from odradek.protocol.jaas_config import PLAIN_LOGIN_MODULE, SCRAM_LOGIN_MODULE

PROPERTY = "java.security.auth.login.config"
_SECTION = re.compile(r"([A-Za-z0-9_.\-]+)\s*\{(.*?)\}\s*;", re.S)
_COMMENTS = re.compile(r'("(?:[^"\\]|\\.)*")|//[^\n]*|/\*.*?\*/', re.S)


class JaasFileError(ValueError):
    """The login file named in KAFKA_OPTS cannot be read or parsed."""


def login_file_path(environ=None) -> str | None:
    """The file of ``-Djava.security.auth.login.config=<file>`` in ``KAFKA_OPTS``, or None."""
    options = (os.environ if environ is None else environ).get("KAFKA_OPTS", "")
    try:
        words = shlex.split(options)
    except ValueError:
        words = options.split()
    for word in words:
        if word.startswith(f"-D{PROPERTY}="):
            return word.split("=", 1)[1].strip() or None
    return None


def sections(text: str) -> dict[str, str]:
    """``{section name: its login modules' text}``; comments removed, quoted text kept."""
    bare = _COMMENTS.sub(lambda m: m.group(1) or "", text)
    found = {m.group(1): m.group(2).strip() for m in _SECTION.finditer(bare)}
    if not found and bare.strip():
        raise JaasFileError("no section of the form 'KafkaServer { ... };'")
    return found


def server_login(listener: str, mechanism: str, environ=None) -> str | None:
    """The login modules (``sasl.jaas.config`` text) for ``mechanism`` on ``listener`` from the
    login file, ``<listener>.KafkaServer`` first, then ``KafkaServer``; None without a file or
    without a section or module for it. JaasFileError when the file cannot be read."""
    path = login_file_path(environ)
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            found = sections(f.read())
    except OSError as e:
        raise JaasFileError(f"{PROPERTY}={path} (KAFKA_OPTS): {e.strerror or e}") from None
    except JaasFileError as e:
        raise JaasFileError(f"{PROPERTY}={path} (KAFKA_OPTS): {e}") from None
    module = PLAIN_LOGIN_MODULE if mechanism == "PLAIN" else SCRAM_LOGIN_MODULE
    for name in (f"{listener.lower()}.KafkaServer", "KafkaServer"):
        if name in found:
            entries = [e.strip() for e in _entries(found[name]) if e.strip().startswith(module)]
            return " ".join(f"{e};" for e in entries) or None
    return None


def _entries(body: str) -> list[str]:
    """The login modules of a section, split at the ``;`` outside quotes."""
    out, start, quoted, i = [], 0, False, 0
    while i < len(body):
        c = body[i]
        if c == "\\" and quoted:
            i += 2
            continue
        if c == '"':
            quoted = not quoted
        elif c == ";" and not quoted:
            out.append(body[start:i])
            start = i + 1
        i += 1
    return [e for e in out if e.strip()]
