"""Kafka's on-disk bytes, without a broker.

RecordBatch v2 (varints, CRC-32C, compression codecs, control batches), the
segment files and their ``.index`` / ``.timeindex`` / ``.txnindex``, the
checkpoint files, the names of files and directories in a log dir, access
through fsspec, and decoding batches into Arrow. Pure code: no threads, no
sockets, no global state; ``broker_core`` and ``connector`` build on it.
"""
