"""The broker server: what runs the requests the network layer brings in.

``BrokerServer`` (``broker_server``) assembles the socket server
(``broker_core.network``) around an embedded ``Broker``; ``kafka_apis`` is the
request handler (Kafka's ``KafkaApis``), run by the ``handler_pool`` threads;
``delayed_fetch`` parks fetches in purgatory until data arrives;
``producer_id_manager`` hands out producer ids and ``config_admin_manager``
applies config changes; ``txn_marker_sender`` sends a transaction coordinator's
markers to the partitions' leaders on other brokers. Replica and transaction
managers belong here.
"""
