"""Read Kafka topics into PySpark: ``spark.read.format("minibroker")`` and ``readStream``.

A Python data source (Spark 4's ``pyspark.sql.datasource``) with the options and columns
of Spark's own Kafka source, read_committed by default, from a running broker through
confluent-kafka (minibroker or any Kafka-compatible broker) or offline from a data
directory (option ``path``). Install with ``pip install 'minibroker[spark]'``, then::

    from minibroker.spark import register
    register(spark)
    df = (spark.read.format("minibroker")
          .option("kafka.bootstrap.servers", "localhost:9092")
          .option("subscribe", "events")
          .load())

Importing this package loads neither pyspark nor a Kafka client; ``register`` does.
"""

from __future__ import annotations

from .options import SOURCE_NAME

__all__ = ["SOURCE_NAME", "register"]


def register(spark) -> str:
    """Register the data source with ``spark`` (a SparkSession); returns its format name.

    Raises ``SparkExtraMissing`` (an ``ImportError``) saying how to install the extra when
    pyspark or pyarrow is missing."""
    from .extra import require_spark

    require_spark("minibroker.spark")
    from .source import MinibrokerDataSource

    spark.dataSource.register(MinibrokerDataSource)
    return SOURCE_NAME
