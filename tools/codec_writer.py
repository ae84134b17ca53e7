"""One message spec's Python code, for tools/generate_protocol.py: a slotted dataclass per
struct (``class_text``) and, per distinct wire layout, one straight-line ``_read_*`` and
``_write_*`` function (``ModuleWriter``). Versions whose layout is identical share a function;
consecutive fixed-width fields are read and written with a single precompiled
``struct.Struct`` (``FIXED``: a primitive's ``struct`` code and width).

generate_protocol.py assembles the module around what this emits (imports, constants,
``READERS`` / ``WRITERS`` tables indexed by version).
"""

from __future__ import annotations

from protocol_model import PRIMITIVES, Field, Spec, Struct

FIXED = {k: v for k, v in PRIMITIVES.items() if v[0] is not None}


class ModuleWriter:
    """Emits one spec's module: classes, then deduplicated read/write functions."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self.structs: dict[str, Struct] = {}
        self.funcs: dict[tuple, str] = {}
        self.func_text: list[str] = []
        self.structs_used: dict[str, Struct] = {}
        self.needed: set[str] = set()
        self.defaults: set[str] = set()  # structs whose default instance tagged fields compare to

    # --- naming ---------------------------------------------------------------------------
    def struct_code(self, code: str) -> str:
        name = "_S_" + code.replace("?", "o")
        self.needed.add(code)
        return name

    def flexible(self, version: int) -> bool:
        return version in self.spec.flexible

    # --- functions ------------------------------------------------------------------------
    def reader(self, st: Struct, v: int) -> str:
        body = self._read_body(st, v)
        return self._register("read", st, v, body)

    def writer(self, st: Struct, v: int) -> str:
        body = self._write_body(st, v)
        return self._register("write", st, v, body)

    def _register(self, kind: str, st: Struct, v: int, body: list[str]) -> str:
        key = (kind, st.name, tuple(body))
        if key not in self.funcs:
            name = f"_{kind}_{st.name}_v{v}"
            self.funcs[key] = name
            sig = "(r, p)" if kind == "read" else "(o, w)"
            self.func_text.append(f"def {name}{sig}:\n" + "\n".join(body) + "\n")
        return self.funcs[key]

    def _present(self, st: Struct, v: int) -> tuple[list[Field], list[Field]]:
        regular, tagged = [], []
        for f in st.fields:
            if v not in f.versions:
                continue
            if self.flexible(v) and v in f.tagged:
                tagged.append(f)
            else:
                regular.append(f)
        return regular, sorted(tagged, key=lambda f: f.tag)

    def _field_flexible(self, f: Field, v: int) -> bool:
        if not self.flexible(v):
            return False
        return f.flexible_override is None or v in f.flexible_override

    # --- reading --------------------------------------------------------------------------
    def _read_body(self, st: Struct, v: int) -> list[str]:
        lines: list[str] = []
        regular, tagged = self._present(st, v)
        run: list[Field] = []

        def flush_run() -> None:
            if not run:
                return
            code = "".join(FIXED[f.type][0] for f in run)
            width = sum(FIXED[f.type][1] for f in run)
            targets = ", ".join(f"f_{f.attr}" for f in run) + ("," if len(run) == 1 else "")
            lines.append(f"    {targets} = {self.struct_code(code)}.unpack_from(r, p)")
            lines.append(f"    p += {width}")
            run.clear()

        for f in regular:
            if f.type in FIXED:
                run.append(f)
                continue
            flush_run()
            lines.extend(self._read_value(f, v, f"f_{f.attr}", "r"))
        flush_run()
        lines.append(f"    o = {st.name}({self._init_args(st, regular)})")
        if self.flexible(v):
            lines.extend(self._read_tags(tagged, v))
        lines.append("    return o, p")
        return lines

    def _init_args(self, st: Struct, present: list[Field]) -> str:
        """Positional arguments for the dataclass: the fields read, and defaults for those
        between them that this version lacks. (Calling a class with keywords makes a dict
        of them on every call; a decoder builds one object per struct it reads.)"""
        have = {f.attr for f in present}
        args = []
        for f in st.fields:
            if f.attr in have:
                args.append(f"f_{f.attr}")
            elif f.is_array:
                args.append("None" if f.default is None else "[]")
            elif f.is_struct:
                nullable = f.nullable.low <= (f.nullable.high if f.nullable.high is not None else 10**9)
                args.append("None" if nullable else f"{f.struct.name}()")
            else:
                args.append(default_literal(f))
        while args and st.fields[len(args) - 1].attr not in have:
            args.pop()  # trailing fields keep the class's defaults
        return ", ".join(args)

    def _read_tags(self, tagged: list[Field], v: int) -> list[str]:
        if not tagged:
            # An empty tag section is one zero byte: skip it without a call.
            return [
                "    if r[p] == 0:",
                "        p += 1",
                "    else:",
                "        o.unknown_tagged_fields, p = read_unknown_tagged_fields(r, p)",
            ]
        lines = [
            "    n, p = read_unsigned_varint(r, p)",
            "    for _ in range(n):",
            "        tag, end, p = read_tag_header(r, p)",
        ]
        for i, f in enumerate(tagged):
            lines.append(f"        {'if' if i == 0 else 'elif'} tag == {f.tag}:")
            body = self._read_value(f, v, "x", "r[:end]")
            lines.extend("        " + ln for ln in body)
            lines.append(f"            o.{f.attr} = x")
        lines += [
            "        else:",
            "            if o.unknown_tagged_fields is None:",
            "                o.unknown_tagged_fields = []",
            "            o.unknown_tagged_fields.append((tag, bytes(r[p:end])))",
            "        p = end",
        ]
        return lines

    def _read_value(self, f: Field, v: int, target: str, buf: str) -> list[str]:
        flex = self._field_flexible(f, v)
        nullable = v in f.nullable
        c = "compact_" if flex else ""
        if f.is_array:
            return self._read_array(f, v, target, buf, flex, nullable)
        if f.is_struct:
            fn = self.reader(f.struct, v)
            if nullable:
                return [
                    f"    if {self.struct_code('b')}.unpack_from({buf}, p)[0] < 0:",
                    f"        {target} = None; p += 1",
                    "    else:",
                    f"        {target}, p = {fn}({buf}, p + 1)",
                ]
            return [f"    {target}, p = {fn}({buf}, p)"]
        t = f.type
        if t in FIXED:
            code, width = FIXED[t]
            return [f"    {target}, = {self.struct_code(code)}.unpack_from({buf}, p)", f"    p += {width}"]
        if t == "uuid":
            return [f"    {target}, p = read_uuid({buf}, p)"]
        if t == "records":
            return [f"    {target}, p = read_{c}records({buf}, p)"]
        n = "nullable_" if nullable else ""
        return [f"    {target}, p = read_{c}{n}{t}({buf}, p)"]

    def _read_array(self, f, v, target, buf, flex, nullable) -> list[str]:
        c = "compact_" if flex else ""
        lines = [f"    n, p = read_{c}array_length({buf}, p)", "    if n < 0:"]
        if nullable:
            lines.append(f"        {target} = None")
        else:
            lines.append(f"        raise DecodeError('null array {f.name}')")
        et = f.element_type
        lines.append("    else:")
        if et in FIXED and et != "bool":
            code, width = FIXED[et]
            lines.append(f"        {target}, p = read_int_array({buf}, p, n, {code!r}, {width})")
            return lines
        lines.append(f"        {target} = []")
        lines.append("        for _ in range(n):")
        if f.is_struct:
            fn = self.reader(f.struct, v)
            lines.append(f"            e, p = {fn}({buf}, p)")
        elif et in FIXED:
            code, width = FIXED[et]
            lines.append(f"            e, = {self.struct_code(code)}.unpack_from({buf}, p); p += {width}")
        elif et == "uuid":
            lines.append(f"            e, p = read_uuid({buf}, p)")
        else:
            lines.append(f"            e, p = read_{c}{et}({buf}, p)")
        lines.append(f"            {target}.append(e)")
        return lines

    # --- writing --------------------------------------------------------------------------
    def _write_body(self, st: Struct, v: int) -> list[str]:
        lines: list[str] = []
        regular, tagged = self._present(st, v)
        run: list[Field] = []

        def flush_run() -> None:
            if not run:
                return
            code = "".join(FIXED[f.type][0] for f in run)
            values = ", ".join(f"o.{f.attr}" for f in run)
            lines.append(f"    w += {self.struct_code(code)}.pack({values})")
            run.clear()

        for f in regular:
            if f.type in FIXED:
                run.append(f)
                continue
            flush_run()
            lines.extend(self._write_value(f, v, f"o.{f.attr}", "w"))
        flush_run()
        if self.flexible(v):
            lines.extend(self._write_tags(tagged, v))
        if not lines:
            lines.append("    pass")
        return lines

    def _write_tags(self, tagged: list[Field], v: int) -> list[str]:
        if not tagged:
            return [
                "    if o.unknown_tagged_fields:",
                "        write_tagged_fields(w, o.unknown_tagged_fields)",
                "    else:",
                "        w.append(0)",
            ]
        lines = ["    tags = []"]
        for f in tagged:
            lines.append(f"    if {self._non_default(f)}:")
            lines.append("        t = EncodeBuffer()")
            lines.extend("    " + ln for ln in self._write_value(f, v, f"o.{f.attr}", "t"))
            lines.append(f"        tags.append(({f.tag}, t))")
        lines += [
            "    if o.unknown_tagged_fields:",
            "        tags.extend(o.unknown_tagged_fields)",
            "        tags.sort(key=lambda item: item[0])",
            "    write_tagged_fields(w, tags)",
        ]
        return lines

    def _non_default(self, f: Field) -> str:
        if f.is_struct and not f.is_array:
            self.defaults.add(f.struct.name)
            return f"o.{f.attr} is not None and o.{f.attr} != _DEFAULT_{f.struct.name}"
        return f"o.{f.attr} != {default_literal(f)}"

    def _write_value(self, f: Field, v: int, value: str, out: str) -> list[str]:
        flex = self._field_flexible(f, v)
        nullable = v in f.nullable
        c = "compact_" if flex else ""
        if f.is_array:
            return self._write_array(f, v, value, out, flex)
        if f.is_struct:
            fn = self.writer(f.struct, v)
            if nullable:
                return [
                    f"    if {value} is None:",
                    f"        {out}.append(255)",
                    "    else:",
                    f"        {out}.append(1)",
                    f"        {fn}({value}, {out})",
                ]
            return [f"    {fn}({value}, {out})"]
        t = f.type
        if t in FIXED:
            return [f"    {out} += {self.struct_code(FIXED[t][0])}.pack({value})"]
        if t == "uuid":
            return [f"    {out} += {value}.bytes"]
        if t == "records":
            return [f"    write_{c}records({out}, {value})"]
        n = "nullable_" if nullable else ""
        return [f"    write_{c}{n}{t}({out}, {value})"]

    def _write_array(self, f, v, value, out, flex) -> list[str]:
        c = "compact_" if flex else ""
        lines = [f"    a = {value}", f"    write_{c}array_length({out}, a)"]
        et = f.element_type
        if et in FIXED and et != "bool":
            lines.append(f"    if a: write_int_array({out}, a, {FIXED[et][0]!r})")
            return lines
        lines.append("    if a:")
        lines.append("        for e in a:")
        if f.is_struct:
            lines.append(f"            {self.writer(f.struct, v)}(e, {out})")
        elif et in FIXED:
            lines.append(f"            {out} += {self.struct_code(FIXED[et][0])}.pack(e)")
        elif et == "uuid":
            lines.append(f"            {out} += e.bytes")
        else:
            lines.append(f"            write_{c}{et}({out}, e)")
        return lines

    # --- classes --------------------------------------------------------------------------
    def classes(self) -> list[str]:
        order: list[Struct] = []
        seen: set[str] = set()

        def visit(st: Struct) -> None:
            if st.name in seen:
                return
            seen.add(st.name)
            for f in st.fields:
                if f.struct is not None:
                    visit(f.struct)
            order.append(st)

        visit(self.spec.root)
        return [class_text(st) for st in order]


def default_literal(f: Field) -> str:
    if f.is_array:
        return "None" if f.default is None else "[]"
    if f.default == "ZERO_UUID":
        return "ZERO_UUID"
    return repr(f.default)


def py_type(f: Field) -> str:
    base = {
        "bool": "bool", "int8": "int", "int16": "int", "uint16": "int", "int32": "int",
        "uint32": "int", "int64": "int", "float64": "float", "uuid": "UUID", "string": "str",
        "bytes": "bytes", "records": "Records",
    }.get(f.element_type, f.element_type)
    t = f"list[{base}]" if f.is_array else base
    nullable = f.nullable.low <= (f.nullable.high if f.nullable.high is not None else 10**9)
    return f"{t} | None" if nullable or f.default is None else t


def class_text(st: Struct) -> str:
    lines = ["@dataclass(slots=True)", f"class {st.name}:"]
    for f in st.fields:
        if f.is_array:
            default = "None" if f.default is None else "field(default_factory=list)"
        elif f.is_struct:
            nullable = f.nullable.low <= (f.nullable.high if f.nullable.high is not None else 10**9)
            default = "None" if nullable else f"field(default_factory=lambda: {f.struct.name}())"
        else:
            default = default_literal(f)
        lines.append(f"    {f.attr}: {py_type(f)} = {default}")
    lines.append(
        "    unknown_tagged_fields: list | None = field(default=None, repr=False, compare=False)"
    )
    return "\n".join(lines) + "\n"
