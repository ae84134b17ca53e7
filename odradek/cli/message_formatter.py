"""How ``odradek consume`` prints a record: Kafka's ``DefaultMessageFormatter``, configured by
the same properties (``--property NAME=VALUE``, or a ``--formatter-config`` file).

Fields, in this order, each only when its flag is set, the one after another separated by
``key.separator`` (TAB), and the record ended by ``line.separator`` (newline)::

    CreateTime:<ms> | Partition:<p> | Offset:<o> | <headers> | <key> | <value>

``print.value`` is on by default, the other flags (``print.timestamp``, ``print.partition``,
``print.offset``, ``print.headers``, ``print.key``) off; a record printing no field prints
nothing, not even the line separator (``kafka.tools.NoOpMessageFormatter`` is that).
Timestamps print as ``CreateTime:<ms>`` or ``LogAppendTime:<ms>`` (the topic's
``message.timestamp.type``), ``NO_TIMESTAMP`` when there is none. Headers print as
``name:value`` pairs joined by ``headers.separator`` (``,``; the ``:`` is odradek's
``headers.key.separator``), ``NO_HEADERS`` when there are none. A null key, value or header
value prints as ``null.literal`` (``null``). Keys and values are written as their bytes,
unless a deserializer is named (``key.deserializer``, ``value.deserializer``,
``headers.deserializer``): of Kafka's ``org.apache.kafka.common.serialization`` classes,
``StringDeserializer`` and ``ByteArrayDeserializer`` (the bytes), ``IntegerDeserializer``,
``LongDeserializer``, ``ShortDeserializer`` (big-endian signed integers, printed in decimal),
``UUIDDeserializer`` and ``VoidDeserializer``.

A separator's value is taken as given, blanks included (``key.separator=<TAB>``), and with a
Java properties file's escapes (``key.separator=\\t`` is a tab, ``line.separator=\\r\\n``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from odradek.cli.common import CommandError, unescape

# The --formatter class names Kafka's console consumer takes for these formats (3.x, then
# 3.7+ after the tools moved to org.apache.kafka.tools.consumer).
FORMATTERS = {
    "kafka.tools.DefaultMessageFormatter": "default",
    "org.apache.kafka.tools.consumer.DefaultMessageFormatter": "default",
    "kafka.tools.NoOpMessageFormatter": "none",
    "org.apache.kafka.tools.consumer.NoOpMessageFormatter": "none",
}
FLAGS = ("print.timestamp", "print.key", "print.offset", "print.partition", "print.headers", "print.value")
SEPARATORS = {"key.separator": "\t", "line.separator": "\n", "headers.separator": ",", "headers.key.separator": ":"}
_PACKAGE = "org.apache.kafka.common.serialization."
# Kafka's serializers of numbers write them big-endian, signed: their struct formats.
_NUMBERS = {"IntegerDeserializer": ">i", "LongDeserializer": ">q", "ShortDeserializer": ">h"}
# Printed as the bytes themselves (UUIDSerializer sends a UUID as its text).
_AS_BYTES = ("StringDeserializer", "ByteArrayDeserializer", "UUIDDeserializer")
_DESERIALIZER_PROPERTIES = ("key.deserializer", "value.deserializer", "headers.deserializer")
KNOWN = FLAGS + tuple(SEPARATORS) + ("null.literal",) + _DESERIALIZER_PROPERTIES


@dataclass(frozen=True, slots=True)
class RecordFormat:
    """What of a record is printed and how (see the module doc)."""

    flags: frozenset
    key_separator: bytes
    line_separator: bytes
    headers_separator: bytes
    header_key_separator: bytes
    null_literal: bytes
    key_deserializer: str = "ByteArrayDeserializer"
    value_deserializer: str = "ByteArrayDeserializer"
    headers_deserializer: str = "ByteArrayDeserializer"

    @classmethod
    def from_properties(cls, props: dict[str, str], formatter: str = "kafka.tools.DefaultMessageFormatter"
                        ) -> RecordFormat:
        """The format ``--formatter`` and the properties give; CommandError for a formatter,
        property or value odradek does not know."""
        kind = FORMATTERS.get(formatter)
        if kind is None:
            raise CommandError(f"--formatter {formatter} is not one odradek has (it has: {', '.join(FORMATTERS)})")
        unknown = sorted(set(props) - set(KNOWN))
        if unknown:
            raise CommandError(f"unknown --property {unknown[0]!r} (known: {', '.join(KNOWN)})")
        flags = {"print.value"}
        for name in FLAGS:
            value = props.get(name)
            if value is None:
                continue
            if value.strip().lower() not in ("true", "false"):
                raise CommandError(f"--property {name} must be true or false, not {value!r}")
            (flags.add if value.strip().lower() == "true" else flags.discard)(name)
        seps = {name: unescape(props.get(name, default)).encode() for name, default in SEPARATORS.items()}
        deserializers = [_deserializer(props, name) for name in _DESERIALIZER_PROPERTIES]
        return cls(frozenset(flags) if kind == "default" else frozenset(), seps["key.separator"],
                   seps["line.separator"], seps["headers.separator"], seps["headers.key.separator"],
                   props.get("null.literal", "null").encode(), *deserializers)

    def line(self, partition: int, record, timestamp_type: str) -> bytes:
        """One record as Kafka's console consumer prints it, line separator included."""
        fields = []
        flags = self.flags
        if "print.timestamp" in flags:
            ts = record.timestamp
            fields.append(b"NO_TIMESTAMP" if ts < 0 else f"{timestamp_type}:{ts}".encode())
        if "print.partition" in flags:
            fields.append(b"Partition:%d" % partition)
        if "print.offset" in flags:
            fields.append(b"Offset:%d" % record.offset)
        if "print.headers" in flags:
            fields.append(self._headers(record.headers))
        if "print.key" in flags:
            fields.append(self._data(record.key, self.key_deserializer))
        if "print.value" in flags:
            fields.append(self._data(record.value, self.value_deserializer))
        return self.key_separator.join(fields) + self.line_separator if fields else b""

    def _headers(self, headers) -> bytes:
        if not headers:
            return b"NO_HEADERS"
        return self.headers_separator.join(
            name.encode("utf-8", "surrogateescape") + self.header_key_separator
            + self._data(value, self.headers_deserializer) for name, value in headers)

    def _data(self, data, deserializer: str) -> bytes:
        if data is None or deserializer == "VoidDeserializer":
            return self.null_literal
        data = bytes(data)
        if deserializer in _AS_BYTES:
            return data
        number = _NUMBERS[deserializer]
        if len(data) != struct.calcsize(number):
            raise CommandError(f"Size of data received by {deserializer} is not {struct.calcsize(number)}")
        return str(struct.unpack(number, data)[0]).encode()


def _deserializer(props: dict[str, str], name: str) -> str:
    """The short class name of the ``name`` property's deserializer (bytes when not set)."""
    value = props.get(name, _PACKAGE + "ByteArrayDeserializer").strip()
    short = value.removeprefix(_PACKAGE)
    if short not in _AS_BYTES + tuple(_NUMBERS) + ("VoidDeserializer",):
        raise CommandError(f"--property {name}: {value} is not a deserializer odradek has "
                           f"(it has {_PACKAGE}String/ByteArray/Integer/Long/Short/UUID/VoidDeserializer)")
    return short
