"""The model of Kafka's message specifications, read from ``../shared/kafka-protocol``.

A spec file (JSON with ``//`` comments) declares one message: its ``apiKey`` (for requests and
responses), ``type``, ``validVersions``, ``flexibleVersions`` and a tree of fields. Each field
has a ``type`` (a primitive, ``[]T`` for arrays, or the name of a struct declared inline by a
``fields`` list or in ``commonStructs``), the ``versions`` it exists in, and optionally
``nullableVersions``, ``taggedVersions`` + ``tag``, ``default``, ``flexibleVersions`` (an
override: ``none`` keeps a field non-compact in flexible versions) and ``ignorable``.

This module only parses; ``generate_protocol.py`` turns the model into Python, and the tests
use the model to draw values for every message at every version.
"""

from __future__ import annotations

import json
import keyword
import re
from dataclasses import dataclass, field
from pathlib import Path

PRIMITIVES = {
    # name: (struct code or None, fixed width or None)
    "bool": ("?", 1),
    "int8": ("b", 1),
    "int16": ("h", 2),
    "uint16": ("H", 2),
    "int32": ("i", 4),
    "uint32": ("I", 4),
    "int64": ("q", 8),
    "float64": ("d", 8),
    "uuid": (None, 16),
    "string": (None, None),
    "bytes": (None, None),
    "records": (None, None),
}


@dataclass(frozen=True)
class Versions:
    """An inclusive version range; ``high`` None means open-ended; empty when low > high."""

    low: int
    high: int | None

    @classmethod
    def parse(cls, text: str | None) -> "Versions":
        if text is None or text == "none":
            return cls(1, 0)
        text = text.strip()
        if text.endswith("+"):
            return cls(int(text[:-1]), None)
        if "-" in text:
            low, high = text.split("-")
            return cls(int(low), int(high))
        return cls(int(text), int(text))

    def __contains__(self, version: int) -> bool:
        return self.low <= version and (self.high is None or version <= self.high)

    def __iter__(self):
        assert self.high is not None
        return iter(range(self.low, self.high + 1))


def snake_case(name: str) -> str:
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s).lower()
    return s + "_" if keyword.iskeyword(s) else s


@dataclass
class Field:
    name: str
    type: str
    versions: Versions
    nullable: Versions
    tagged: Versions
    tag: int | None
    flexible_override: Versions | None
    default: object
    ignorable: bool
    struct: "Struct | None" = None

    @property
    def attr(self) -> str:
        return snake_case(self.name)

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element_type(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        return self.element_type not in PRIMITIVES


@dataclass
class Struct:
    name: str
    fields: list[Field] = field(default_factory=list)


@dataclass
class Spec:
    name: str
    type: str
    api_key: int | None
    valid: Versions
    flexible: Versions
    root: Struct
    structs: dict[str, Struct]
    path: Path

    @property
    def module(self) -> str:
        return snake_case(self.name)


def _strip_comments(text: str) -> str:
    return re.sub(r"^\s*//.*$", "", text, flags=re.M)


def _default(raw: dict, type_: str, nullable: Versions) -> object:
    d = raw.get("default")
    if type_.startswith("[]"):
        return None if d == "null" else []
    if type_ not in PRIMITIVES:
        return None
    if d == "null":
        return None
    if type_ == "bool":
        return str(d).lower() == "true" if d is not None else False
    if type_ in ("string",):
        return d if d is not None else ""
    if type_ == "bytes":
        return b""
    if type_ == "records":
        return None
    if type_ == "uuid":
        return "ZERO_UUID"
    if type_ == "float64":
        return float(d) if d is not None else 0.0
    return int(str(d), 0) if d is not None else 0


def _field(raw: dict, structs: dict[str, Struct]) -> Field:
    nullable = Versions.parse(raw.get("nullableVersions"))
    f = Field(
        name=raw["name"],
        type=raw["type"],
        versions=Versions.parse(raw.get("versions")),
        nullable=nullable,
        tagged=Versions.parse(raw.get("taggedVersions")),
        tag=raw.get("tag"),
        flexible_override=(
            Versions.parse(raw["flexibleVersions"]) if "flexibleVersions" in raw else None
        ),
        default=_default(raw, raw["type"], nullable),
        ignorable=bool(raw.get("ignorable", False)),
    )
    if "fields" in raw:
        st = Struct(f.element_type, [_field(r, structs) for r in raw["fields"]])
        structs[st.name] = st
    return f


def _bind(fields: list[Field], structs: dict[str, Struct]) -> None:
    for f in fields:
        if f.is_struct:
            f.struct = structs[f.element_type]
            _bind(f.struct.fields, structs)


def load_raw(path: Path) -> dict:
    """One spec file as the dict its JSON holds (comments stripped)."""
    return json.loads(_strip_comments(path.read_text()))


def load_spec(path: Path) -> Spec:
    return build_spec(load_raw(path), path)


def build_spec(raw: dict, path: Path) -> Spec:
    """The model of one spec given as a dict in the JSON's shape (``path`` names its source)."""
    structs: dict[str, Struct] = {}
    for common in raw.get("commonStructs", []):
        structs[common["name"]] = Struct(
            common["name"], [_field(r, structs) for r in common["fields"]]
        )
    root = Struct(raw["name"], [_field(r, structs) for r in raw["fields"]])
    _bind(root.fields, structs)
    return Spec(
        name=raw["name"],
        type=raw["type"],
        api_key=raw.get("apiKey"),
        valid=Versions.parse(raw["validVersions"]),
        flexible=Versions.parse(raw["flexibleVersions"]),
        root=root,
        structs=structs,
        path=path,
    )


def load_all(protocol_dir: Path, supplement=None) -> list[Spec]:
    """Every message, header and coordinator record spec, sorted by name.

    ``supplement``, if given, takes ``{path: raw dict}`` of the specs read and returns it
    amended and extended (``protocol_supplement.apply``: what newer Kafka versions changed)."""
    paths = sorted((protocol_dir / "messages").glob("*.json"))
    paths += sorted((protocol_dir / "records").glob("*.json"))
    raws = {p: load_raw(p) for p in paths}
    if supplement is not None:
        raws = supplement(raws)
    return sorted((build_spec(raw, p) for p, raw in raws.items()), key=lambda s: s.name)


def load_errors(protocol_dir: Path) -> list[tuple[int, str, bool]]:
    rows = []
    for line in (protocol_dir / "errors.tsv").read_text().splitlines()[1:]:
        if line.strip():
            code, name, retriable = line.split("\t")
            rows.append((int(code), name, retriable.strip() == "yes"))
    return rows
