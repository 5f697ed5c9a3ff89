"""Generate `formats/cluster_codecs.py` from Aeron's official SBE schema XML.

    python tests/tools/gen_sbe_codecs.py ../shared/reference/aeron-schemas/aeron-cluster-codecs.xml \
        > formats/cluster_codecs.py

The layout rules are SBE 1.x as Aeron's sbe-tool applies them: fields packed in declaration order
with no implicit padding unless an explicit ``offset`` says otherwise, the message block length
from ``blockLength`` when given, else the end of the last field.  `parse_schema` is also used by
the conformance test, which checks the generated module against the XML it came from.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from formats.sbe import PRIMITIVES, snake_case  # noqa: E402

SBE_NS = "{http://fixprotocol.io/2016/sbe}"


@dataclass
class XField:
    name: str
    id: int
    type_name: str
    primitive: str
    offset: int
    since_version: int
    presence: str
    null_value: int | None
    enum: str | None


@dataclass
class XVar:
    name: str
    id: int
    is_ascii: bool
    since_version: int


@dataclass
class XBlock:
    name: str
    block_length: int
    fields: list[XField] = field(default_factory=list)
    groups: list[XGroup] = field(default_factory=list)
    var_data: list[XVar] = field(default_factory=list)


@dataclass
class XGroup:
    name: str
    id: int
    since_version: int
    entry: XBlock


@dataclass
class XMessage:
    name: str
    template_id: int
    since_version: int
    deprecated: int | None
    description: str
    block: XBlock


@dataclass
class XSchema:
    id: int
    version: int
    semantic_version: str
    package: str
    enums: dict[str, tuple[str, list[tuple[str, int, int]]]]  # name -> (encoding, [(value name, value, sinceVersion)])
    types: dict[str, tuple[str, str, int | None]]  # name -> (primitive, presence, nullValue)
    var_encodings: dict[str, bool]  # composite name -> is ascii
    messages: list[XMessage]


def _int(text: str | None, default: int = 0) -> int:
    return default if text is None else int(text)


def parse_schema(path: str | Path) -> XSchema:
    root = ET.parse(path).getroot()
    types_el = root.find("types")
    enums: dict[str, tuple[str, list[tuple[str, int, int]]]] = {}
    types: dict[str, tuple[str, str, int | None]] = {}
    var_encodings: dict[str, bool] = {}
    for el in types_el:
        if el.tag == "enum":
            values = [(v.get("name"), int(v.text.strip()), _int(v.get("sinceVersion"))) for v in el.findall("validValue")]
            enums[el.get("name")] = (el.get("encodingType"), values)
        elif el.tag == "type":
            null = el.get("nullValue")
            types[el.get("name")] = (el.get("primitiveType"), el.get("presence", "required"), None if null is None else int(null))
        elif el.tag == "composite":
            children = {c.get("name"): c for c in el}
            if "varData" in children:
                var_encodings[el.get("name")] = children["varData"].get("characterEncoding") is not None

    def resolve(type_name: str) -> tuple[str, str, int | None, str | None]:
        if type_name in PRIMITIVES:
            return type_name, "required", None, None
        if type_name in types:
            primitive, presence, null = types[type_name]
            return primitive, presence, null, None
        if type_name in enums:
            encoding = enums[type_name][0]
            primitive = types[encoding][0] if encoding in types else encoding
            return primitive, "required", None, type_name
        raise ValueError(f"unknown type {type_name}")

    def block(el: ET.Element, name: str, explicit_block_length: int | None) -> XBlock:
        out = XBlock(name=name, block_length=0)
        cursor = 0
        for child in el:
            if child.tag == "field":
                primitive, presence, null, enum = resolve(child.get("type"))
                offset = _int(child.get("offset"), cursor)
                f = XField(
                    name=child.get("name"),
                    id=int(child.get("id")),
                    type_name=child.get("type"),
                    primitive=primitive,
                    offset=offset,
                    since_version=_int(child.get("sinceVersion")),
                    presence=child.get("presence", presence),
                    null_value=null if child.get("nullValue") is None else int(child.get("nullValue")),
                    enum=enum,
                )
                cursor = offset + PRIMITIVES[primitive][1]
                out.fields.append(f)
            elif child.tag == "group":
                group_name = child.get("name")
                entry_name = name + group_name[0].upper() + group_name[1:]
                entry = block(child, entry_name, _int(child.get("blockLength"), 0) or None)
                out.groups.append(XGroup(group_name, int(child.get("id")), _int(child.get("sinceVersion")), entry))
            elif child.tag == "data":
                out.var_data.append(
                    XVar(child.get("name"), int(child.get("id")), var_encodings[child.get("type")], _int(child.get("sinceVersion")))
                )
        out.block_length = explicit_block_length if explicit_block_length else cursor
        return out

    messages = []
    for el in root.findall(f"{SBE_NS}message"):
        deprecated = el.get("deprecated")
        messages.append(
            XMessage(
                name=el.get("name"),
                template_id=int(el.get("id")),
                since_version=_int(el.get("sinceVersion")),
                deprecated=None if deprecated is None else int(deprecated),
                description=(el.get("description") or "").strip(),
                block=block(el, el.get("name"), _int(el.get("blockLength"), 0) or None),
            )
        )
    return XSchema(
        id=int(root.get("id")),
        version=int(root.get("version")),
        semantic_version=root.get("semanticVersion", ""),
        package=root.get("package", ""),
        enums=enums,
        types=types,
        var_encodings=var_encodings,
        messages=messages,
    )


def _class_name(name: str) -> str:
    return name[0].upper() + name[1:]


def _emit_block_class(lines: list[str], block: XBlock, doc: str) -> None:
    for group in block.groups:
        _emit_block_class(lines, group.entry, f"One entry of {block.name}.{group.name}.")
    cls = _class_name(block.name)
    lines.append("")
    lines.append("")
    # The methods a frozen dataclass would generate are written out here instead (`_emit_methods`): the
    # decorator then compiles only the frozen __setattr__/__delattr__, and importing the module costs a
    # third of what it did (59 classes: 23 -> 10 ms), once per command.
    lines.append("@dataclass(frozen=True, slots=True, kw_only=True, init=False, repr=False, eq=False)")
    lines.append(f"class {cls}(SbeMessage):")
    lines.append(f'    """{doc}"""')
    lines.append("")
    attrs: list[tuple[str, str, str | None]] = []  # (name, annotation, default source or None)
    # Required fields first without defaults; optional-presence/since-version fields get the null default.
    for f in block.fields:
        annotation = f"{f.enum} | int" if f.enum else ("float" if f.primitive in ("float", "double") else "int")
        if f.presence == "optional" or f.since_version > 0:
            null = f.null_value if f.null_value is not None else PRIMITIVES[f.primitive][2]
            default = f"{f.enum}._value2member_map_.get({null}, {null})" if f.enum else repr(null)
            attrs.append((snake_case(f.name), annotation, default))
        else:
            attrs.append((snake_case(f.name), annotation, None))
    for group in block.groups:
        attrs.append((snake_case(group.name), f"tuple[{_class_name(group.entry.name)}, ...]", "()"))
    for var in block.var_data:
        annotation, default = ("str", '""') if var.is_ascii else ("bytes", 'b""')
        attrs.append((snake_case(var.name), annotation, default))
    for name, annotation, default in attrs:
        lines.append(f"    {name}: {annotation}" + ("" if default is None else f" = {default}"))
    if attrs:
        lines.append("")
    _emit_methods(lines, attrs)


def _emit_methods(lines: list[str], attrs: list[tuple[str, str, str | None]]) -> None:
    """__init__, __repr__, __eq__ and __hash__ as `dataclasses` (Python 3.11) generates them for a frozen,
    keyword-only dataclass: each field set through ``object.__setattr__``; the repr ``Name(field=value!r,
    ...)`` by qualified name; equal when the classes are the same and the fields' tuples are; the hash of
    the fields' tuple."""
    names = [name for name, _, _ in attrs]
    values = "".join(f"self.{name}, " for name in names).rstrip(" ")
    others = "".join(f"other.{name}, " for name in names).rstrip(" ")
    if len(names) > 1:
        values, others = values.rstrip(","), others.rstrip(",")
    params = ", ".join(f"{name}: {annotation}" + ("" if default is None else f" = {default}")
                       for name, annotation, default in attrs)
    lines.append(f"    def __init__(self, *, {params}) -> None:" if attrs else "    def __init__(self) -> None:")
    for name in names:
        lines.append(f"        object.__setattr__(self, {name!r}, {name})")
    if not names:
        lines.append("        pass")
    lines.append("")
    lines.append("    def __repr__(self) -> str:")
    shown = ", ".join(f"{name}={{self.{name}!r}}" for name in names)
    lines.append(f'        return f"{{self.__class__.__qualname__}}({shown})"')
    lines.append("")
    lines.append("    def __eq__(self, other: object) -> bool:")
    lines.append("        if other.__class__ is self.__class__:")
    lines.append(f"            return ({values}) == ({others})")
    lines.append("        return NotImplemented")
    lines.append("")
    lines.append("    def __hash__(self) -> int:")
    lines.append(f"        return hash(({values}))")


def _spec_expr(block: XBlock, indent: str) -> str:
    inner = indent + "    "
    parts = [f"{inner}name={block.name!r},", f"{inner}block_length={block.block_length},", f"{inner}fields=("]
    for f in block.fields:
        args = [repr(f.name), str(f.offset), repr(f.primitive), repr(f.type_name)]
        kw = []
        if f.since_version:
            kw.append(f"since_version={f.since_version}")
        if f.null_value is not None:
            kw.append(f"null_value={f.null_value}")
        if f.presence != "required":
            kw.append(f"presence={f.presence!r}")
        if f.enum:
            kw.append(f"enum={f.enum}")
        kw.append(f"attr={snake_case(f.name)!r}")
        parts.append(f"{inner}    FieldSpec({', '.join(args + kw)}),")
    parts.append(f"{inner}),")
    if block.groups:
        parts.append(f"{inner}groups=(")
        for g in block.groups:
            parts.append(f"{inner}    GroupSpec(")
            parts.append(f"{inner}        {g.name!r},")
            parts.append(f"{inner}        BlockSpec(")
            parts.append(_spec_expr(g.entry, inner + "        "))
            parts.append(f"{inner}        ),")
            if g.since_version:
                parts.append(f"{inner}        since_version={g.since_version},")
            parts.append(f"{inner}        attr={snake_case(g.name)!r},")
            parts.append(f"{inner}    ),")
        parts.append(f"{inner}),")
    if block.var_data:
        parts.append(f"{inner}var_data=(")
        for v in block.var_data:
            kw = f", since_version={v.since_version}" if v.since_version else ""
            parts.append(f"{inner}    VarDataSpec({v.name!r}, {v.is_ascii}{kw}, attr={snake_case(v.name)!r}),")
        parts.append(f"{inner}),")
    parts.append(f"{inner}cls={_class_name(block.name)},")
    return "\n".join(parts)


def _bind_group_classes(lines: list[str], block: XBlock, path: str) -> None:
    for i, g in enumerate(block.groups):
        entry_path = f"{path}.groups[{i}].entry"
        lines.append(f"{_class_name(g.entry.name)}.BLOCK = {entry_path}")
        _bind_group_classes(lines, g.entry, entry_path)


def generate(schema: XSchema, source_name: str) -> str:
    lines = [
        f'"""Aeron Cluster protocol messages: schema {schema.id} version {schema.version} (semanticVersion',
        f"{schema.semantic_version}), Aeron 1.47.3.",
        "",
        f"GENERATED by tests/tools/gen_sbe_codecs.py from Aeron's {source_name}; do not edit by hand.",
        "One frozen, slotted, keyword-only dataclass per message, named exactly as in the schema, with",
        "snake_case attributes for Aeron's camelCase fields.  Enum fields hold the enum member, or the",
        "raw int when the value is not in the schema (Java's SBE_UNKNOWN), so encoding is byte-exact.",
        "The codec itself is `formats.sbe`.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "import enum",
        "from dataclasses import dataclass",
        "",
        "from formats.sbe import BlockSpec, FieldSpec, GroupSpec, MessageSpec, SbeMessage, VarDataSpec",
        "",
        f"SCHEMA_ID = {schema.id}",
        f"SCHEMA_VERSION = {schema.version}",
        f"SEMANTIC_VERSION = {schema.semantic_version!r}",
    ]
    for name, (encoding, values) in schema.enums.items():
        lines.append("")
        lines.append("")
        lines.append(f"class {name}(enum.Enum):")
        lines.append(f'    """{name} (encodingType {encoding})."""')
        lines.append("")
        for value_name, value, _since in values:
            lines.append(f"    {value_name} = {value}")
    for msg in schema.messages:
        doc = f"{msg.name}: templateId {msg.template_id}, blockLength {msg.block.block_length}."
        if msg.deprecated is not None:
            doc += f" Deprecated since schema version {msg.deprecated}."
        _emit_block_class(lines, msg.block, doc)
    lines.append("")
    lines.append("")
    lines.append("MESSAGES: tuple[MessageSpec, ...] = (")
    for msg in schema.messages:
        lines.append("    MessageSpec(")
        lines.append(f"        template_id={msg.template_id},")
        lines.append("        schema_id=SCHEMA_ID,")
        lines.append("        schema_version=SCHEMA_VERSION,")
        lines.append("        block=BlockSpec(")
        lines.append(_spec_expr(msg.block, "        "))
        lines.append("        ),")
        if msg.since_version:
            lines.append(f"        since_version={msg.since_version},")
        if msg.deprecated is not None:
            lines.append(f"        deprecated={msg.deprecated},")
        lines.append("    ),")
    lines.append(")")
    lines.append("")
    lines.append("for _spec in MESSAGES:")
    lines.append("    _spec.block.cls.SPEC = _spec")
    lines.append("    _spec.block.cls.BLOCK = _spec.block")
    for i, msg in enumerate(schema.messages):
        _bind_group_classes(lines, msg.block, f"MESSAGES[{i}].block")
    lines.append("")
    lines.append("MESSAGES_BY_TEMPLATE_ID: dict[int, MessageSpec] = {s.template_id: s for s in MESSAGES}")
    lines.append("MESSAGES_BY_NAME: dict[str, MessageSpec] = {s.name: s for s in MESSAGES}")
    lines.append("")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        sys.stderr.write("usage: gen_sbe_codecs.py SCHEMA.xml > formats/cluster_codecs.py\n")
        return 2
    schema = parse_schema(argv[1])
    sys.stdout.write(generate(schema, Path(argv[1]).name))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
