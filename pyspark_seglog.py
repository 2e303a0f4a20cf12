"""Makes Spark find the ``seglog`` data source in every session, the spark-sql shell
included: Spark registers the ``DefaultSource`` of any installed ``pyspark_*`` module."""

from connector.source import SeglogDataSource as DefaultSource

__all__ = ["DefaultSource"]
