"""Partitions as replicas (Kafka's ``kafka.cluster``): a ``Partition`` as its leader or a follower
keeps it — the followers' fetch state (``replica``), the ISR and the high watermark, ``acks=all``
and ``min.insync.replicas``, the leader epoch requests are fenced with."""
