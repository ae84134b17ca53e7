"""What the client-side commands share: connection options, client properties, errors and
output.

Options every client command takes, with Kafka's names::

    --bootstrap-server HOST:PORT[,HOST:PORT]   default $ODRADEK_BOOTSTRAP_SERVER or 127.0.0.1:9092
    --command-config FILE                      client properties (Java properties format)
    --output table|json                        readable rich tables, or JSON for scripts

The bootstrap servers come from ``--bootstrap-server``, else the config file's
``bootstrap.servers``, else the environment variable, else the default.

Client properties use Kafka's names (``linger.ms``, ``compression.type``, ``isolation.level``)
and map onto the keyword arguments of odradek's clients (``linger_ms``, ...); a name the
client does not take is an error, not silently ignored. Values are converted to the type the
argument takes (``true``/``false`` for flags, numbers for numbers, comma lists for lists).

Errors: a command body raises ``CommandError`` (or lets a client ``KafkaError`` through);
``run_command`` prints it as one line, ``odradek <command>: <message>``, and returns 1.
``main`` catches the same type (as ``CliError``) from commands that raise it directly.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import socket
import sys

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
BOOTSTRAP_ENV = "ODRADEK_BOOTSTRAP_SERVER"
# How long the reachability check waits for one bootstrap address: a broker that is up
# accepts a TCP connection in well under a second, even on a loaded 2-core machine.
CONNECT_CHECK_SECONDS = 5.0


class CommandError(Exception):
    """A user-facing failure: printed as one line, exit status 1."""


# --- argparse helpers --------------------------------------------------------------------
def add_bootstrap(parser, config_flag: str = "--command-config", what: str = "admin client") -> None:
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT",
                        help=f"broker(s) to connect to (default ${BOOTSTRAP_ENV} or {DEFAULT_BOOTSTRAP})")
    if config_flag:
        parser.add_argument(config_flag, metavar="FILE", dest="command_config",
                            help=f"a properties file of {what} settings (Kafka's names)")


def add_output(parser, choices=("table", "json")) -> None:
    """``--output``, default the first choice; with both ``table`` and ``text`` (the Kafka
    tool's own plain format) the default is table on a terminal, text otherwise, decided
    when the command runs (``run_command``), as scripts grep Kafka's lines."""
    if "table" in choices and "text" in choices:
        parser.add_argument("--output", choices=choices, default=None,
                            help="output format: table (the default on a terminal), text (Kafka's tool's plain "
                                 "format, the default when standard output is a pipe or file) or json")
        return
    parser.add_argument("--output", choices=choices, default=choices[0],
                        help=f"output format: {' or '.join(choices)} (default {choices[0]})")


def stdout_is_terminal() -> bool:
    """Whether standard output is a terminal (not a pipe, a file, or a test's buffer)."""
    isatty = getattr(sys.stdout, "isatty", None)
    try:
        return bool(isatty and isatty())
    except (OSError, ValueError):  # closed or detached
        return False


# --- key=value parsing -------------------------------------------------------------------
def warn_message_format_version(configs: dict[str, str]) -> None:
    """Kafka's tools' warning (ConfigCommand, TopicCommand) when configs to set carry the
    deprecated ``message.format.version`` (KIP-724), which brokers accept and ignore."""
    if "message.format.version" in configs:
        print(f"WARNING: The configuration message.format.version={configs['message.format.version']} is specified. "
              "This configuration will be ignored if the version is newer than the inter.broker.protocol.version "
              "specified in the broker or if the inter.broker.protocol.version is 3.0 or newer. This configuration "
              "is deprecated and it will be removed in Apache Kafka 4.0.")


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split on ``sep`` outside square brackets (Kafka's syntax for list values:
    ``cleanup.policy=[compact,delete],retention.ms=1000``)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(depth - 1, 0)
        elif ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def parse_pairs(items, what: str, split_commas: bool = False, strip_values: bool = True) -> dict[str, str]:
    """``["k=v", ...]`` (each item may hold several pairs joined by commas when
    ``split_commas``) as a dict; a bracketed value loses its brackets. ``strip_values``
    False keeps a value's blanks (``key.separator=<TAB>`` is a tab, as in Kafka's tools)."""
    out: dict[str, str] = {}
    for item in items or ():
        for pair in (split_top_level(item) if split_commas else [item]):
            key, sep, value = pair.partition("=")
            if not sep or not key.strip():
                raise CommandError(f"{what} needs KEY=VALUE, got {pair!r}")
            if strip_values:
                value = value.strip()
            if split_commas and value.startswith("[") and value.endswith("]"):
                value = value[1:-1]
            out[key.strip()] = value
    return out


def unescape(text: str) -> str:
    """``text`` with the escapes of a Java properties file read: ``\\t`` a tab, ``\\n``,
    ``\\r``, ``\\f``, ``\\uXXXX``, and a backslash before any other character that character
    (so ``--property key.separator=\\t`` is a tab, as ``key.separator=\\t`` in Kafka's
    ``--formatter-config`` / ``--reader-config`` files)."""
    return _ESCAPE.sub(_unescaped, text)


_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)", re.DOTALL)
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescaped(match: re.Match) -> str:
    code = match.group(1)
    return chr(int(code[1:], 16)) if len(code) == 5 else _ESCAPES.get(code, code)


def read_properties(path: str | None) -> dict[str, str]:
    """A Java properties file as a dict (``k=v``, ``k: v`` or ``k v``; ``#``/``!`` comments)."""
    if not path:
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise CommandError(f"cannot read {path}: {e.strerror or e}") from None
    out = {}
    for line in lines:
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        match = _PROPERTY.fullmatch(line)
        if match is None:
            raise CommandError(f"{path}: {line!r} is not a property (key=value)")
        out[match.group(1)] = match.group(2).strip()
    return out


# key, then optional blanks, an optional '=' or ':', optional blanks, and the value.
_PROPERTY = re.compile(r"([^=:\s]+)\s*[=:]?\s*(.*)")


def client_config(client_class, props: dict[str, str], what: str) -> dict:
    """Kafka-named properties as keyword arguments of ``client_class``'s constructor."""
    from odradek.client.client_security import is_security_property

    params = inspect.signature(client_class.__init__).parameters
    accepted = {n: p for n, p in params.items() if p.kind == p.KEYWORD_ONLY and n not in _NOT_PROPERTIES}
    out = {}
    security = {name: raw.strip() for name, raw in props.items() if is_security_property(name)}
    if security:  # security.protocol, ssl.*, sasl.*: the client's one ``security`` mapping
        out["security"] = security
    for name, raw in props.items():
        if is_security_property(name):
            continue
        key = name.replace(".", "_").replace("-", "_")
        if key not in accepted:
            known = ", ".join(sorted(n.replace("_", ".") for n in accepted))
            raise CommandError(f"unknown {what} property {name!r} (known: {known})")
        out[key] = _convert(name, raw, accepted[key])
    return out


# Constructor arguments that take Python objects, not text from a command line or file.
_NOT_PROPERTIES = frozenset({"key_serializer", "value_serializer", "key_deserializer", "value_deserializer",
                             "partitioner", "security"})


def _convert(name: str, raw: str, param):
    """``raw`` as the type the argument takes: its default's type, else its annotation's
    (``int | None``); a tuple default takes a comma-separated list."""
    text = raw.strip()
    default, annotation = param.default, str(param.annotation)
    if isinstance(default, (tuple, list)):
        return tuple(item.strip() for item in text.split(",") if item.strip())
    if isinstance(default, bool) or (default is None and "bool" in annotation):
        if text.lower() not in ("true", "false"):
            raise CommandError(f"property {name} must be true or false, not {raw!r}")
        return text.lower() == "true"
    if isinstance(default, (int, float)) or (default is None and ("int" in annotation or "float" in annotation)):
        try:
            return float(text) if isinstance(default, float) or "float" in annotation else int(text)
        except ValueError:
            raise CommandError(f"property {name} must be a number, not {raw!r}") from None
    return text


# --- connecting --------------------------------------------------------------------------
def check_reachable(bootstrap: str, timeout: float = CONNECT_CHECK_SECONDS) -> None:
    """Fail fast, with one clear line, when no bootstrap address accepts a connection (the
    clients themselves keep retrying for half a minute before giving up)."""
    from odradek.client.cluster import parse_bootstrap

    try:
        addresses = parse_bootstrap(bootstrap)
    except ValueError as e:
        raise CommandError(f"--bootstrap-server: {e}") from None
    problems = []
    for host, port in addresses:
        try:
            socket.create_connection((host, port), timeout=timeout).close()
            return
        except OSError as e:
            problems.append(f"{host}:{port} ({e.strerror or e})")
    raise CommandError("cannot connect to " + ", ".join(problems))


def admin_client(args):
    """An AdminClient for ``args.bootstrap_server`` and ``args.command_config``."""
    from odradek.client import AdminClient, AsyncAdminClient

    props = read_properties(args.command_config)
    bootstrap = bootstrap_from(args, props)
    config = client_config(AsyncAdminClient, props, "admin client")
    check_reachable(bootstrap)
    return AdminClient(bootstrap, **config)


def bootstrap_from(args, props: dict[str, str]) -> str:
    """The bootstrap servers (see the module doc); takes ``bootstrap.servers`` out of
    ``props``, which are then the client's settings only."""
    from_file = props.pop("bootstrap.servers", None)
    return args.bootstrap_server or from_file or os.environ.get(BOOTSTRAP_ENV) or DEFAULT_BOOTSTRAP


# --- running -----------------------------------------------------------------------------
def run_command(name: str, body, args) -> int:
    """Run ``body(args)``; user-facing failures become one line on stderr and status 1."""
    from odradek.client.errors import KafkaError  # here: the client loads only when a command runs

    if getattr(args, "output", "") is None:  # add_output's default: table on a terminal, else Kafka's text
        args.output = "table" if stdout_is_terminal() else "text"
    try:
        return body(args) or 0
    except BrokenPipeError:
        _silence_stdout()  # the reader went away (``| head``): not an error of ours
        return 0
    except ValueError as e:  # a client refused a setting: say it with Kafka's name
        print(f"odradek {name}: {kafka_names(one_line(e))}", file=sys.stderr)
        return 1
    except (CommandError, KafkaError, OSError) as e:
        print(f"odradek {name}: {one_line(e)}", file=sys.stderr)
        return 1


def kafka_names(text: str) -> str:
    """``text`` with the clients' keyword arguments (``compression_type``) named as the
    Kafka properties they come from (``compression.type``)."""
    from odradek.client import AsyncAdminClient, AsyncConsumer, AsyncProducer

    names = set()
    for cls in (AsyncProducer, AsyncConsumer, AsyncAdminClient):
        names.update(n for n, p in inspect.signature(cls.__init__).parameters.items() if p.kind == p.KEYWORD_ONLY)
    return re.sub(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b",
                  lambda m: m.group(0).replace("_", ".") if m.group(0) in names else m.group(0), text)


def one_line(error: BaseException) -> str:
    """The error's message on one line (its type's name when it has none); a broker's error
    names what it is about in words (``topic T``, ``broker 1000``)."""
    from odradek.client import BrokerError, ConfigResource

    text = str(error)
    if isinstance(error, BrokerError) and isinstance(error.subject, ConfigResource):
        kind = error.subject.type.name.lower()
        about = f"{kind} {error.subject.name}" if error.subject.name else f"{kind} defaults"
        name = getattr(error.code, "name", f"error {error.code}")
        text = f"{name} for {about}" + (f": {error.message}" if error.message else "")
    return " ".join(text.split()) or type(error).__name__


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's final flush finds a sink
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # not a real file (tests capture it)
        pass


# --- output ------------------------------------------------------------------------------
def console(stderr: bool = False):
    """A rich Console on the current stdout (or stderr): no wrapping at 80 columns when the
    output is a pipe or file, so scripts get whole lines."""
    from rich.console import Console

    file = sys.stderr if stderr else sys.stdout
    is_tty = hasattr(file, "isatty") and file.isatty()
    return Console(file=file, width=None if is_tty else 100_000, highlight=False, soft_wrap=not is_tty)


def print_table(columns, rows, title: str | None = None) -> None:
    """A table of plain-text cells (no rich markup is interpreted in them)."""
    console().print(make_table(columns, rows, title))


def make_table(columns, rows, title: str | None = None):
    """The rich Table ``print_table`` prints (for a live view that redraws it)."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    table = Table(*columns, title=title, box=box.SIMPLE_HEAD, title_justify="left", pad_edge=False,
                  show_edge=False)
    for row in rows:
        table.add_row(*(Text(_cell(c)) for c in row))
    return table


def _cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def print_json(document) -> None:
    """One JSON document on one line."""
    sys.stdout.write(json.dumps(document, separators=(",", ":"), ensure_ascii=False) + "\n")


def text_of(data: bytes | None, null: str = "null") -> str:
    """Bytes as text: UTF-8, undecodable bytes as ``\\xNN`` escapes."""
    if data is None:
        return null
    return bytes(data).decode("utf-8", "backslashreplace")


def json_bytes(document: dict, name: str, data: bytes | None) -> None:
    """Put ``data`` into ``document``: UTF-8 text under ``name`` (null for None), or, when
    not valid UTF-8, base64 under ``name + "_base64"`` instead."""
    if data is None:
        document[name] = None
        return
    try:
        document[name] = bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        import base64

        document[name + "_base64"] = base64.b64encode(data).decode("ascii")
