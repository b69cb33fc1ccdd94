"""The rows the source returns: Spark's Kafka source columns, built as Arrow batches.

Spark's ``format("kafka")`` gives key, value, topic, partition, offset, timestamp and
timestampType, plus headers when ``includeHeaders`` is true; so does this source, so
that code ported from the Kafka source sees the same columns. Readers hand Spark
``pyarrow.RecordBatch`` objects (far cheaper than Python tuples); their schema must be
exactly the one pyspark derives from the Spark schema, so it is derived the same way.
"""

from __future__ import annotations

BASE_DDL = ("key binary, value binary, topic string, partition int, offset bigint, "
            "timestamp timestamp, timestampType int")
HEADERS_DDL = "headers array<struct<key:string,value:binary>>"

# Kafka's TimestampType ids, as the Kafka source reports them.
CREATE_TIME = 0
LOG_APPEND_TIME = 1

ROWS_PER_BATCH = 8192


def ddl(include_headers: bool) -> str:
    return f"{BASE_DDL}, {HEADERS_DDL}" if include_headers else BASE_DDL


def spark_schema(include_headers: bool):
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
        fields.append(StructField("headers", ArrayType(header)))
    return StructType(fields)


class RowBuffer:
    """Collects rows column by column and emits ``pyarrow.RecordBatch`` objects."""

    __slots__ = ("topic", "partition", "include_headers", "_schema", "keys", "values", "offsets",
                 "timestamps", "types", "headers")

    def __init__(self, topic: str, partition: int, include_headers: bool) -> None:
        from pyspark.sql.pandas.types import to_arrow_schema

        self.topic = topic
        self.partition = partition
        self.include_headers = include_headers
        self._schema = to_arrow_schema(spark_schema(include_headers), timezone="UTC")
        self._reset()

    def _reset(self) -> None:
        self.keys: list = []
        self.values: list = []
        self.offsets: list[int] = []
        self.timestamps: list[int] = []
        self.types: list[int] = []
        self.headers: list = []

    def __len__(self) -> int:
        return len(self.offsets)

    def add(self, key, value, offset: int, timestamp_ms: int, timestamp_type: int, headers) -> None:
        self.keys.append(key)
        self.values.append(value)
        self.offsets.append(offset)
        self.timestamps.append(timestamp_ms)
        self.types.append(timestamp_type)
        if self.include_headers:
            self.headers.append([{"key": k, "value": v} for k, v in headers or ()])

    def flush(self):
        """The rows so far as one RecordBatch (None when empty); the buffer restarts."""
        import pyarrow as pa
        import pyarrow.compute as pc

        n = len(self.offsets)
        if not n:
            return None
        s = self._schema
        ts = pa.array(self.timestamps, pa.int64())
        arrays = [
            pa.array(self.keys, s.field("key").type),
            pa.array(self.values, s.field("value").type),
            pa.array([self.topic] * n, s.field("topic").type),
            pa.array([self.partition] * n, s.field("partition").type),
            pa.array(self.offsets, s.field("offset").type),
            # Kafka timestamps are milliseconds; Spark's timestamps are microseconds.
            pc.multiply(ts, 1000).cast(s.field("timestamp").type),
            pa.array(self.types, s.field("timestampType").type),
        ]
        if self.include_headers:
            arrays.append(pa.array(self.headers, s.field("headers").type))
        self._reset()
        return pa.RecordBatch.from_arrays(arrays, schema=s)
