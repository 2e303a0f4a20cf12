"""Cluster metadata in etcd and the controller (cluster mode, ``etcd.connect``; off by default).

Kafka's ZooKeeper-era controller, with etcd in ZooKeeper's place:

* ``metadata_store`` — the boundary: get, prefix range, compare-and-set on
  ``mod_revision``, leases, watches; ``etcd_metadata_store`` (etcd 3.5 through
  etcd3gw) and ``in_memory_metadata_store`` (a clock-driven fake) implement it;
* ``etcd_connect`` — ``etcd.connect=host:port[,...][/chroot]``;
* ``zk_data`` — Kafka's ZooKeeper paths and JSON; ``partition_state`` — a
  partition's leader, leader epoch, ISR and controller epoch;
* ``kafka_zk_client`` / ``admin_zk_client`` — typed reads and writes, topic
  creation and partition increases; ``replica_assignment`` — where replicas go;
* ``session_lease`` — a broker's session (its lease, kept alive);
* ``election`` — the leader elections as pure functions; ``kafka_controller``
  — the controller's decisions, output as ``PartitionStateChange`` lists;
  ``controller_event_manager`` — the thread that runs it.

Only the etcd store imports the etcd client, so the single broker and the
embedded ``Broker`` never load it.
"""
