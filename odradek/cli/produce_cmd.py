"""``odradek produce``: the console producer (``kafka-console-producer.sh``): one record per
line of standard input.

    printf 'k1:hello\\nk2:world\\n' | odradek produce --topic T --property parse.key=true --property key.separator=:

Line format, as Kafka's ``LineMessageReader`` reads it (each part only when asked for)::

    [HEADERS <headers.delimiter>] [KEY <key.separator>] VALUE
    HEADERS = name<headers.key.separator>value <headers.separator> name<headers.key.separator>value ...

Properties (``--property name=value``) and their defaults: ``parse.key`` false,
``key.separator`` TAB, ``parse.headers`` false, ``headers.delimiter`` TAB,
``headers.separator`` ``,``, ``headers.key.separator`` ``:``, ``ignore.error`` false (a
line without a separator is then sent whole as the value), ``null.marker`` unset (a key,
value or header value equal to it is sent as null). Lines end at ``\\n`` (a ``\\r`` before it
is dropped); bytes are sent as they are. A property's value is taken as given, blanks
included (``--property key.separator=<TAB>``); the separators also take a Java properties
file's escapes (``key.separator=\\t`` is a tab), on the command line as in the
``--reader-config`` file (Kafka's KIP-840), whose properties ``--property`` overrides.

``--broker-list`` is the old name of ``--bootstrap-server`` (Kafka's console producer still
takes it; ``--bootstrap-server`` wins when both are given). A send that runs out of
``delivery.timeout.ms`` while the broker refuses it says what the broker answered
(NOT_ENOUGH_REPLICAS when the in-sync replicas are fewer than ``min.insync.replicas``).

Transactions: ``--transactional-id ID`` sends the lines in transactions of that id, committing
every ``--transaction-size`` records (default: all of the input in one transaction) and at the
end of the input; read_committed consumers see nothing of a transaction until it commits. A
failed send aborts the open transaction. (``transactional.id`` and ``transaction.timeout.ms``
may also come as producer properties.)
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

from odradek.cli.common import (
    CommandError,
    add_bootstrap,
    bootstrap_from,
    check_reachable,
    client_config,
    kafka_names,
    one_line,
    parse_pairs,
    read_properties,
    run_command,
    text_of,
    unescape,
)

_DEFAULTS = {
    "parse.key": "false", "key.separator": "\t", "parse.headers": "false", "headers.delimiter": "\t",
    "headers.separator": ",", "headers.key.separator": ":", "ignore.error": "false", "null.marker": None,
}


def add_parser(sub) -> None:
    p = sub.add_parser("produce", help="send lines of standard input as records (console producer)",
                       description=__doc__.replace("``", ""), formatter_class=argparse.RawDescriptionHelpFormatter)
    add_bootstrap(p, "--producer.config", "producer")
    p.add_argument("--broker-list", metavar="HOST:PORT", help="the old name of --bootstrap-server")
    p.add_argument("--topic", required=True, help="the topic to send to")
    p.add_argument("--property", action="append", default=[], metavar="NAME=VALUE",
                   help="line reader settings (parse.key, key.separator, parse.headers, ...), repeatable")
    p.add_argument("--reader-config", metavar="FILE", help="a properties file of line reader settings")
    p.add_argument("--producer-property", action="append", default=[], metavar="NAME=VALUE",
                   help="a producer setting with Kafka's name (acks, linger.ms, ...), repeatable")
    p.add_argument("--compression-codec", nargs="?", const="gzip", metavar="CODEC",
                   choices=("none", "gzip", "snappy", "lz4", "zstd"),
                   help="none, gzip (when given without a value), snappy, lz4 or zstd")
    p.add_argument("--request-required-acks", metavar="ACKS", help="acks: all/-1, 1 or 0")
    p.add_argument("--sync", action="store_true", help="wait for each record to be acknowledged")
    p.add_argument("--transactional-id", metavar="ID", help="send in transactions of this transactional id")
    p.add_argument("--transaction-size", type=int, metavar="N",
                   help="with --transactional-id: commit every N records (default: once, at the end)")


@dataclass(frozen=True, slots=True)
class LineFormat:
    """How lines split into headers, key and value (the properties above, as bytes)."""

    parse_key: bool = False
    key_separator: bytes = b"\t"
    parse_headers: bool = False
    headers_delimiter: bytes = b"\t"
    headers_separator: bytes = b","
    header_key_separator: bytes = b":"
    ignore_error: bool = False
    null_marker: bytes | None = None

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> LineFormat:
        unknown = sorted(set(props) - set(_DEFAULTS))
        if unknown:
            raise CommandError(f"unknown --property {unknown[0]!r} (known: {', '.join(_DEFAULTS)})")
        values = {**_DEFAULTS, **props}
        flags = {}
        for name in ("parse.key", "parse.headers", "ignore.error"):
            if values[name].lower() not in ("true", "false"):
                raise CommandError(f"--property {name} must be true or false, not {values[name]!r}")
            flags[name] = values[name].lower() == "true"
        seps = {}
        for name in ("key.separator", "headers.delimiter", "headers.separator", "headers.key.separator"):
            if not values[name]:
                raise CommandError(f"--property {name} must not be empty")
            seps[name] = unescape(values[name]).encode()
        if seps["headers.separator"] == seps["headers.key.separator"]:
            raise CommandError("headers.separator and headers.key.separator must differ")
        null = values["null.marker"]
        if null is not None and not null:
            raise CommandError("--property null.marker must not be empty")
        return cls(flags["parse.key"], seps["key.separator"], flags["parse.headers"], seps["headers.delimiter"],
                   seps["headers.separator"], seps["headers.key.separator"], flags["ignore.error"],
                   None if null is None else null.encode())

    def parse(self, line: bytes, number: int) -> tuple[bytes | None, bytes | None, list | None]:
        """``(key, value, headers)`` of one line (without its line ending); CommandError for
        a line missing a separator, unless ``ignore_error``."""
        rest, headers = line, None
        if self.parse_headers:
            at = rest.find(self.headers_delimiter)
            if at >= 0:
                headers = self._headers(rest[:at], number)
                rest = rest[at + len(self.headers_delimiter):]
            elif not self.ignore_error:
                raise CommandError(f"No headers delimiter found on line number {number}: '{text_of(line)}'")
        key, value = None, rest
        if self.parse_key:
            at = rest.find(self.key_separator)
            if at >= 0:
                key, value = self._nullable(rest[:at]), rest[at + len(self.key_separator):]
            elif not self.ignore_error:
                raise CommandError(f"No key separator found on line number {number}: '{text_of(line)}'")
        return key, self._nullable(value), headers

    def _headers(self, text: bytes, number: int) -> list | None:
        if not text or text == self.null_marker:
            return None
        headers = []
        for pair in text.split(self.headers_separator):
            at = pair.find(self.header_key_separator)
            if at < 0:
                raise CommandError(f"No header key separator found in pair '{text_of(pair)}' "
                                   f"on line number {number}")
            name = pair[:at]
            if name == self.null_marker:
                raise CommandError(f"Header keys must not be equal to the null marker, on line number {number}")
            headers.append((name.decode("utf-8", "surrogateescape"),
                            self._nullable(pair[at + len(self.header_key_separator):])))
        return headers

    def _nullable(self, data: bytes) -> bytes | None:
        return None if self.null_marker is not None and data == self.null_marker else data


def read_lines(stream):
    """Lines of ``stream`` (binary, or text encoded as UTF-8) without their line endings."""
    binary = getattr(stream, "buffer", stream)
    for line in binary:
        if isinstance(line, str):
            line = line.encode()
        if line.endswith(b"\n"):
            line = line[:-1]
            if line.endswith(b"\r"):
                line = line[:-1]
        yield line


def run(args) -> int:
    return run_command("produce", _run, args)


def _producer_settings(args) -> tuple[str, dict]:
    from odradek.client import AsyncProducer

    args.bootstrap_server = args.bootstrap_server or args.broker_list
    props = read_properties(args.command_config)
    props.update(parse_pairs(args.producer_property, "--producer-property"))
    bootstrap = bootstrap_from(args, props)
    if args.compression_codec is not None:
        props["compression.type"] = args.compression_codec
    if args.request_required_acks is not None:
        props["acks"] = args.request_required_acks
    if args.transactional_id is not None:
        props["transactional.id"] = args.transactional_id
    props.setdefault("client.id", "odradek-console-producer")
    return bootstrap, client_config(AsyncProducer, props, "producer")


def _run(args) -> int:
    from odradek.client import KafkaError, Producer

    reader_props = read_properties(args.reader_config)
    reader_props.update(parse_pairs(args.property, "--property", strip_values=False))
    line_format = LineFormat.from_properties(reader_props)
    bootstrap, config = _producer_settings(args)
    check_reachable(bootstrap)
    failures: list[BaseException] = []

    def delivered(metadata, error) -> None:
        if error is not None and not failures:
            failures.append(error)

    if args.transaction_size is not None and (args.transaction_size <= 0 or "transactional_id" not in config):
        raise CommandError("--transaction-size needs --transactional-id and a positive size")
    producer = Producer(bootstrap, **config)
    try:
        transactions = _Transactions(producer, args.transaction_size) if "transactional_id" in config else None
        for number, line in enumerate(read_lines(sys.stdin), 1):
            key, value, headers = line_format.parse(line, number)
            future = producer.send(args.topic, value, key=key, headers=headers, callback=delivered)
            if args.sync:
                try:
                    future.result()
                except KafkaError as e:  # said below, as a failure the callback saw
                    if not failures:
                        failures.append(e)
            if failures:
                break
            if transactions is not None:
                transactions.sent()
        if transactions is not None:
            transactions.end(failed=bool(failures))
        producer.flush()
    finally:
        producer.close()
    if failures:
        raise CommandError(f"sending to {args.topic} failed: {failure_text(failures[0])}")
    return 0


def failure_text(error: BaseException) -> str:
    """Why a record was not delivered, in Kafka's names: a send that ran out of
    delivery.timeout.ms while being retried says the broker's last refusal
    (``NOT_ENOUGH_REPLICAS for t-0: ...``), not only that time ran out."""
    from odradek.client import BrokerError, KafkaTimeoutError

    cause = error.__cause__
    if isinstance(error, KafkaTimeoutError) and isinstance(cause, BrokerError):
        return f"{one_line(cause)} (retried until delivery.timeout.ms passed)"
    return kafka_names(one_line(error))


class _Transactions:
    """The console producer's transactions: one open from the start, committed every
    ``size`` records (None: only at the end)."""

    def __init__(self, producer, size: int | None) -> None:
        self.producer, self.size, self.count = producer, size, 0
        producer.init_transactions()
        producer.begin_transaction()

    def sent(self) -> None:
        self.count += 1
        if self.size is not None and self.count >= self.size:
            self._commit()
            self.producer.begin_transaction()
            self.count = 0

    def end(self, failed: bool) -> None:
        if failed:
            self.producer.abort_transaction()
        else:
            self._commit()

    def _commit(self) -> None:
        from odradek.client import KafkaError

        try:
            self.producer.commit_transaction()
        except KafkaError as e:
            try:
                self.producer.abort_transaction()
            except KafkaError:
                pass  # fenced or failed for good: the coordinator aborts it
            raise CommandError(f"the transaction was aborted: {e}") from None
