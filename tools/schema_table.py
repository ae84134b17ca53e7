"""The field table of every message spec, as a Python module the tests read without the specs.

``generate_protocol.py`` writes it to ``tests/protocol/message_schemas.py`` next to the codec,
and its ``--check`` covers it, so a clone without ``../shared/kafka-protocol`` still draws
values for every message at every version (``tests/protocol/strategies.py``).

Format (one entry per spec, keyed by its name)::

    SCHEMAS["FindCoordinatorRequest"] = (
        "request", 10, (0, 6), (3, None),       # type, api key, valid and flexible versions
        "FindCoordinatorRequest",               # the root struct's name
        {"FindCoordinatorRequest": (             # every struct, by name
            ("Key", "string", (0, 3), (1, 0), (1, 0), None),
            ...                                  # name, type, versions, nullable versions,
        )},                                      # tagged versions, tag
    )

A version range is ``(low, high)``, ``high`` None when open-ended, empty when low > high:
exactly ``protocol_model.Versions``. ``load_specs`` turns the table back into the model's
``Spec`` objects, holding what the strategies use (no defaults, no overrides).
"""

from __future__ import annotations

from pathlib import Path

from protocol_model import Field, Spec, Struct, Versions


def _versions(v: Versions) -> tuple[int, int | None]:
    return (v.low, v.high)


def _field_row(f: Field) -> tuple:
    return (f.name, f.type, _versions(f.versions), _versions(f.nullable), _versions(f.tagged), f.tag)


def table_text(specs: list[Spec], header: str) -> str:
    """The module's text: ``SCHEMAS`` with one entry per spec, as documented above."""
    lines = [header, "# name: (type, api key, valid, flexible, root struct, {struct: fields})",
             "# field: (name, type, versions, nullable versions, tagged versions, tag)", "SCHEMAS = {"]
    for s in specs:
        lines.append(f"    {s.name!r}: (")
        lines.append(f"        {s.type!r}, {s.api_key!r}, {_versions(s.valid)!r}, {_versions(s.flexible)!r},")
        lines.append(f"        {s.root.name!r},")
        lines.append("        {")
        for st in [s.root, *sorted(_nested(s.root), key=lambda t: t.name)]:
            lines.append(f"            {st.name!r}: (")
            lines.extend(f"                {_field_row(f)!r}," for f in st.fields)
            lines.append("            ),")
        lines.append("        },")
        lines.append("    ),")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _nested(root: Struct) -> list[Struct]:
    """Every struct reachable from ``root`` (not ``root`` itself), each once."""
    seen: dict[str, Struct] = {}
    todo = [root]
    while todo:
        for f in todo.pop().fields:
            if f.struct is not None and f.struct.name not in seen:
                seen[f.struct.name] = f.struct
                todo.append(f.struct)
    return list(seen.values())


def load_specs(schemas: dict) -> list[Spec]:
    """The table's specs as ``protocol_model.Spec`` objects, sorted by name."""
    specs = []
    for name, (type_, api_key, valid, flexible, root_name, rows) in schemas.items():
        structs = {sname: Struct(sname, [_field(r) for r in fields]) for sname, fields in rows.items()}
        for st in structs.values():
            for f in st.fields:
                if f.is_struct:
                    f.struct = structs[f.element_type]
        specs.append(Spec(name=name, type=type_, api_key=api_key, valid=Versions(*valid),
                          flexible=Versions(*flexible), root=structs[root_name], structs=structs,
                          path=Path(name)))
    return sorted(specs, key=lambda s: s.name)


def _field(row: tuple) -> Field:
    name, type_, versions, nullable, tagged, tag = row
    return Field(name=name, type=type_, versions=Versions(*versions), nullable=Versions(*nullable),
                 tagged=Versions(*tagged), tag=tag, flexible_override=None, default=None, ignorable=False)
