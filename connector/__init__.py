"""Spark's side of seglog: the ``seglog`` Python data source and its jobs.

The batch and streaming reader and the writer (``source``, ``sink``), offset
planning and reading (``planning``, ``reading``, ``remote``), group offset
commits, the SQL inspection views, the distributed compaction job and topics
as Delta tables (``tables``: the sync job; ``table_options``, ``value_schema``). The
only package that imports pyspark; it builds on ``format`` and ``broker_core``.
"""
