"""How a record's value becomes table columns, and how the table's schema grows: plain functions.

Value formats (``--value-format``):

- ``raw``: the value as it is, one binary column ``value``;
- ``json``: each value a JSON object whose fields become top-level columns. The
  schema is inferred from the first records seen and grows additively: a field
  seen for the first time becomes a new column (Delta's ``mergeSchema``); a
  column never changes its type or goes away;
- ``json-schema=FILE``: JSON objects with the schema of a JSON Schema document
  (``type``/``properties``/``items``); the schema is fixed, fields it does not
  name are not stored.

A value that is not a JSON object, or whose field does not fit its column's
type, is a dead letter: ``describe_json_error`` says why, for the dead-letter
table.

Schemas are Spark's own JSON form (``StructType.jsonValue()``), so these
functions need no Spark: ``{"type": "struct", "fields": [{"name", "type",
"nullable", "metadata"}]}`` with types such as ``"long"``, ``"string"`` or
nested ``{"type": "array", ...}`` / ``{"type": "struct", ...}``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Sequence

from .option_error import SeglogOptionError

VALUE_FORMATS = ("raw", "json", "json-schema=FILE")
# The columns every table has besides the value's (Spark's Kafka source's names), and the
# record date the table is partitioned by by default.
KAFKA_COLUMNS = ("key", "topic", "partition", "offset", "timestamp", "headers")
# A value field named like one of those is stored under this prefix.
CLASH_PREFIX = "value_"
EMPTY_SCHEMA = {"type": "struct", "fields": []}
# Spark's name for the text of a value that does not parse.
CORRUPT_RECORD = "_corrupt_record"


@dataclass(frozen=True)
class ValueFormat:
    kind: str  # "raw" | "json" | "json-schema"
    schema: dict | None = None  # json-schema: the fixed Spark schema
    schema_file: str | None = None

    @property
    def is_json(self) -> bool:
        return self.kind != "raw"

    @property
    def evolves(self) -> bool:
        return self.kind == "json"


def parse_value_format(text: str) -> ValueFormat:
    value = text.strip()
    if value.lower() in ("raw", "json"):
        return ValueFormat(value.lower())
    name, _, path = value.partition("=")
    if name.lower() == "json-schema" and path:
        try:
            with open(path) as f:
                doc = json.load(f)
        except OSError as exc:
            raise SeglogOptionError(f"--value-format json-schema={path}: cannot read the file: {exc.strerror}") \
                from None
        except json.JSONDecodeError as exc:
            raise SeglogOptionError(f"--value-format json-schema={path}: not JSON at line {exc.lineno} column "
                                    f"{exc.colno}: {exc.msg}") from None
        return ValueFormat("json-schema", schema_of_json_schema(doc, path), path)
    raise SeglogOptionError(f"--value-format must be one of {', '.join(VALUE_FORMATS)}, not {text!r}")


_JSON_SCHEMA_TYPES = {"string": "string", "integer": "long", "number": "double", "boolean": "boolean"}
_STRING_FORMATS = {"date-time": "timestamp", "date": "date"}


def _field(name: str, data_type) -> dict:
    return {"name": name, "type": data_type, "nullable": True, "metadata": {}}


def _spark_type(node, file: str, pointer: str):
    if not isinstance(node, dict):
        raise SeglogOptionError(f"{file}: {pointer or '/'} must be a JSON Schema object, not {node!r}")
    kind = node.get("type")
    if isinstance(kind, list):  # ["string", "null"]: every column is nullable anyway
        kinds = [k for k in kind if k != "null"]
        kind = kinds[0] if len(kinds) == 1 else kind
    if kind == "object":
        properties = node.get("properties", {})
        if not isinstance(properties, dict):
            raise SeglogOptionError(f"{file}: {pointer}/properties must be an object")
        return {"type": "struct", "fields": [_field(name, _spark_type(sub, file, f"{pointer}/properties/{name}"))
                                             for name, sub in properties.items()]}
    if kind == "array":
        return {"type": "array", "elementType": _spark_type(node.get("items", {"type": "string"}), file,
                                                            f"{pointer}/items"), "containsNull": True}
    if kind == "string" and node.get("format") in _STRING_FORMATS:
        return _STRING_FORMATS[node["format"]]
    if isinstance(kind, str) and kind in _JSON_SCHEMA_TYPES:
        return _JSON_SCHEMA_TYPES[kind]
    raise SeglogOptionError(f"{file}: {pointer or '/'}: type {kind!r} is not one of object, array, string, integer, "
                            f"number, boolean")


def schema_of_json_schema(doc, file: str) -> dict:
    """The Spark schema of a JSON Schema document whose root is an object; errors name the file and the
    JSON pointer of the bad node."""
    schema = _spark_type(doc, file, "")
    if not (isinstance(schema, dict) and schema.get("type") == "struct"):
        raise SeglogOptionError(f"{file}: the root must be a JSON Schema of type object (a record's value is a "
                                f"JSON object)")
    return schema


@dataclass(frozen=True)
class SchemaMerge:
    """The table's schema after a batch: ``schema``, with the fields ``added`` (dotted paths) and the fields
    whose type the batch disagrees with (``(path, table type, batch type)``: the table's type stays)."""

    schema: dict
    added: tuple[str, ...]
    conflicts: tuple[tuple[str, str, str], ...]


def type_name(data_type) -> str:
    """A type as Spark's DDL shows it: ``long``, ``array<string>``, ``struct<a:long>``."""
    if isinstance(data_type, str):
        return data_type
    if data_type["type"] == "array":
        return f"array<{type_name(data_type['elementType'])}>"
    if data_type["type"] == "map":
        return f"map<{type_name(data_type['keyType'])},{type_name(data_type['valueType'])}>"
    return "struct<" + ",".join(f"{f['name']}:{type_name(f['type'])}" for f in data_type["fields"]) + ">"


def _merge_type(table, batch, path: str, added: list, conflicts: list):
    if table == batch:
        return table
    if isinstance(table, dict) and isinstance(batch, dict) and table["type"] == batch["type"] == "struct":
        return _merge_struct(table, batch, path + ".", added, conflicts)
    if isinstance(table, dict) and isinstance(batch, dict) and table["type"] == batch["type"] == "array":
        element = _merge_type(table["elementType"], batch["elementType"], path + "[]", added, conflicts)
        return {**table, "elementType": element}
    conflicts.append((path, type_name(table), type_name(batch)))
    return table


def _merge_struct(table: dict, batch: dict, prefix: str, added: list, conflicts: list) -> dict:
    fields = []
    by_name = {f["name"].lower(): f for f in batch["fields"] if f["name"] != CORRUPT_RECORD}
    for f in table["fields"]:
        other = by_name.pop(f["name"].lower(), None)
        fields.append(f if other is None else
                      {**f, "type": _merge_type(f["type"], other["type"], prefix + f["name"], added, conflicts)})
    for f in batch["fields"]:
        if f["name"].lower() in by_name:  # new: it goes at the end, nullable (older rows have no value)
            added.append(prefix + f["name"])
            fields.append({**f, "nullable": True})
    return {"type": "struct", "fields": fields}


def merge_schemas(table: dict | None, batch: dict) -> SchemaMerge:
    """The additive merge of the table's value schema with a batch's inferred one: fields the table has
    keep their place and type (a nested struct gains fields too), new fields are added after them,
    Spark's corrupt-record column is left out. Names compare case-insensitively, as Delta's do."""
    added: list[str] = []
    conflicts: list[tuple[str, str, str]] = []
    schema = _merge_struct(table or EMPTY_SCHEMA, batch, "", added, conflicts)
    return SchemaMerge(schema, tuple(added), tuple(conflicts))


def column_name(field: str, reserved: Sequence[str] = KAFKA_COLUMNS) -> str:
    """The table column of a top-level value field: its own name, or ``value_<name>`` where that is a
    Kafka column's (or the partition column's) name."""
    return CLASH_PREFIX + field if field.lower() in {r.lower() for r in reserved} else field


def value_schema_of_table(table: dict, reserved: Sequence[str] = KAFKA_COLUMNS) -> dict:
    """The value's fields among a table's columns: the ``reserved`` columns (Kafka's, the date) left
    out, a field stored as ``value_<name>`` named ``<name>`` again (``column_name`` undone)."""
    names = {r.lower() for r in reserved}
    fields = []
    for f in table["fields"]:
        if f["name"].lower() in names:
            continue
        original = f["name"][len(CLASH_PREFIX):] if f["name"].startswith(CLASH_PREFIX) else f["name"]
        fields.append({**f, "name": original if original.lower() in names else f["name"]})
    return {"type": "struct", "fields": fields}


def _json_kind(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


_FITS = {"long": ("integer",), "integer": ("integer",), "short": ("integer",), "double": ("integer", "number"),
         "float": ("integer", "number"), "boolean": ("boolean",), "timestamp": ("string",), "date": ("string",)}


def _misfit(value, data_type, path: str) -> str | None:
    kind = _json_kind(value)
    if kind == "null" or data_type == "string":
        return None  # Spark stores any JSON value in a string column as its text
    if isinstance(data_type, str):
        if kind in _FITS.get(data_type, ()):
            return None
        return f"field {path}: {json.dumps(value)[:60]} is {'an' if kind[0] in 'aeiou' else 'a'} {kind}, the " \
               f"column is {data_type}"
    if data_type["type"] == "struct":
        if kind != "object":
            return f"field {path or 'value'}: a JSON {kind}, the column is {type_name(data_type)}"
        fields = {f["name"].lower(): f["type"] for f in data_type["fields"]}
        for name, sub in value.items():
            if name.lower() in fields:
                found = _misfit(sub, fields[name.lower()], f"{path}.{name}" if path else name)
                if found:
                    return found
        return None
    if data_type["type"] == "array":
        if kind != "array":
            return f"field {path}: a JSON {kind}, the column is {type_name(data_type)}"
        for n, item in enumerate(value):
            found = _misfit(item, data_type["elementType"], f"{path}[{n}]")
            if found:
                return found
    return None


def describe_json_error(text: str | None, schema: dict | None) -> str:
    """Why a value is a dead letter: not JSON (where), not an object, or a field that does not fit its
    column's type in ``schema``."""
    if text is None:
        return "the value is null"
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
    except RecursionError:
        return "not valid JSON: nested too deeply"
    if not isinstance(value, dict):
        return f"a JSON {_json_kind(value)}, not an object"
    return _misfit(value, schema or EMPTY_SCHEMA, "") or "the value does not fit the table's schema"
