"""How values become columns (``connector.value_schema``): value formats, a JSON Schema file as a table
schema, additive schema merges, and why a value is a dead letter."""

from __future__ import annotations

import json

import pytest

from connector.option_error import SeglogOptionError
from connector.value_schema import (column_name, describe_json_error, merge_schemas, parse_value_format,
                                    type_name, value_schema_of_table)


def struct(**fields) -> dict:
    return {"type": "struct", "fields": [{"name": n, "type": t, "nullable": True, "metadata": {}}
                                         for n, t in fields.items()]}


def names(schema: dict) -> list[str]:
    return [f["name"] for f in schema["fields"]]


def test_the_first_batch_s_inferred_schema_becomes_the_table_s():
    merge = merge_schemas(None, struct(_corrupt_record="string", id="long", name="string"))
    assert merge.schema == struct(id="long", name="string")
    assert merge.added == ("id", "name") and merge.conflicts == ()


def test_new_fields_are_added_after_the_table_s_and_none_goes_away():
    merge = merge_schemas(struct(id="long", name="string"), struct(city="string", id="long"))
    assert names(merge.schema) == ["id", "name", "city"]
    assert merge.added == ("city",)


def test_a_nested_object_gains_fields_too():
    table = struct(id="long", address=struct(city="string"))
    merge = merge_schemas(table, struct(address=struct(city="string", zip="string")))
    assert type_name(merge.schema["fields"][1]["type"]) == "struct<city:string,zip:string>"
    assert merge.added == ("address.zip",)


def test_a_field_whose_type_changes_keeps_the_table_s_type():
    merge = merge_schemas(struct(qty="long"), struct(qty="string"))
    assert merge.schema == struct(qty="long")
    assert merge.conflicts == (("qty", "long", "string"),)


def test_field_names_compare_case_insensitively_as_delta_s_do():
    assert names(merge_schemas(struct(Name="string"), struct(name="string")).schema) == ["Name"]


def test_a_value_field_named_like_a_kafka_column_is_stored_with_a_prefix():
    assert column_name("offset") == "value_offset"
    assert column_name("Key") == "value_Key"
    assert column_name("date", ("key", "date")) == "value_date"
    assert column_name("amount") == "amount"


def test_the_value_s_fields_are_read_back_from_the_table_s_columns():
    table = struct(id="long", value_offset="long", value_note="string", key="binary", topic="string",
                   date="date")
    assert value_schema_of_table(table, ("key", "topic", "offset", "date")) == struct(
        id="long", offset="long", value_note="string")


def test_a_json_schema_file_gives_the_table_s_columns(tmp_path):
    path = tmp_path / "orders.json"
    path.write_text(json.dumps({"type": "object", "properties": {
        "id": {"type": "integer"}, "price": {"type": "number"}, "note": {"type": ["string", "null"]},
        "at": {"type": "string", "format": "date-time"}, "tags": {"type": "array", "items": {"type": "string"}},
        "paid": {"type": "boolean"}, "buyer": {"type": "object", "properties": {"name": {"type": "string"}}}}}))
    value_format = parse_value_format(f"json-schema={path}")
    assert value_format.kind == "json-schema" and not value_format.evolves
    assert [(f["name"], type_name(f["type"])) for f in value_format.schema["fields"]] == [
        ("id", "long"), ("price", "double"), ("note", "string"), ("at", "timestamp"), ("tags", "array<string>"),
        ("paid", "boolean"), ("buyer", "struct<name:string>")]


def test_a_bad_json_schema_file_is_refused_naming_the_file_and_the_place(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"type": "object", "properties": {"id": {"type": "uuid"}}}))
    with pytest.raises(SeglogOptionError) as refused:
        parse_value_format(f"json-schema={path}")
    assert str(refused.value) == f"{path}: /properties/id: type 'uuid' is not one of object, array, string, " \
                                 f"integer, number, boolean"
    path.write_text("{")
    with pytest.raises(SeglogOptionError, match=r"not JSON at line 1 column 2"):
        parse_value_format(f"json-schema={path}")
    with pytest.raises(SeglogOptionError, match="cannot read the file"):
        parse_value_format(f"json-schema={tmp_path / 'missing.json'}")


@pytest.mark.parametrize("text, reason", [
    ("{not json", "not valid JSON: Expecting property name enclosed in double quotes at line 1 column 2"),
    ("[1, 2]", "a JSON array, not an object"),
    ("42", "a JSON integer, not an object"),
    ('{"qty": "many"}', 'field qty: "many" is a string, the column is long'),
    ('{"buyer": {"age": 1.5}}', "field buyer.age: 1.5 is a number, the column is long"),
    ('{"tags": [1]}', None),  # a number fits a string column (stored as its text)
])
def test_a_dead_letter_says_why_its_value_did_not_decode(text, reason):
    schema = struct(qty="long", buyer=struct(age="long"), tags={"type": "array", "elementType": "string",
                                                               "containsNull": True})
    assert describe_json_error(text, schema) == (reason or "the value does not fit the table's schema")
