"""The Spark row schema covers every field of the stored record as rmq.protocol.schema declares it."""

from __future__ import annotations

from rmq.protocol import schema as wire
from rmq_spark.schema import COLUMNS, MESSAGE_SCHEMA, RECORD_FIELD_COLUMNS, arrow_schema


def test_every_record_field_has_a_column() -> None:
    record_fields = [c.name for c in wire.COMMITLOG_RECORD.subcons if c.name]
    assert sorted(record_fields) == sorted(RECORD_FIELD_COLUMNS)
    for field, column in RECORD_FIELD_COLUMNS.items():
        assert column is None or column in COLUMNS, field
    # Only the magic code (which says nothing about the message) is left out.
    assert [f for f, c in RECORD_FIELD_COLUMNS.items() if c is None] == ["magic_code"]


def test_arrow_schema_matches_the_spark_schema() -> None:
    arrow = arrow_schema()
    assert arrow.names == list(COLUMNS) == MESSAGE_SCHEMA.fieldNames()
    assert str(arrow.field("store_timestamp").type) == "timestamp[us, tz=UTC]"
    assert str(arrow.field("properties").type).startswith("map<string, string")
