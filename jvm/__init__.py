"""The JVM peers seglog is checked against: Apache Kafka (broker, tools, Java client),
Spark's Kafka source and Delta Lake, pinned in ``jvm/<name>/pom.xml`` and fetched by
``make jvm`` into ``.jvm/<name>/`` (see ``fetch.py``)."""
