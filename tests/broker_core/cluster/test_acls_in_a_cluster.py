"""ACLs in a cluster: kept in etcd in Kafka's ZooKeeper layout, and an ACL written through one broker governs
every broker at once."""

from __future__ import annotations

import json

import pytest

from broker_core.security.acl_etcd_store import EtcdAclStore
from broker_core.controller.etcd_connect import parse_etcd_connect
from broker_core.controller.etcd_metadata_store import EtcdMetadataStore
from broker_core.errors import NONE, TopicAuthorizationFailedError
from tests.broker_core.cli_kit import run
from tests.broker_core.cluster.cluster_kit import ClusterKit
from tests.broker_core.security.acl_kit import AUTHORIZER, acl
from tests.broker_core.server.server_kit import create_topic

pytestmark = pytest.mark.slow


def test_an_acl_added_through_one_broker_governs_the_other_and_is_kept_in_etcd_as_kafka_keeps_it(tmp_path,
                                                                                                  etcd_server):
    connect = etcd_server.connect("/seglog")
    store = EtcdMetadataStore(parse_etcd_connect(connect))
    try:
        # The brokers (User:ANONYMOUS too, on PLAINTEXT) may replicate, create topics and manage ACLs.
        EtcdAclStore(store).update(add=[acl("Cluster", op) for op in ("ClusterAction", "Create", "Alter",
                                                                      "Describe")])
        kit = ClusterKit(tmp_path, connect, size=2, **AUTHORIZER)
        kit.start_all()
        try:
            def orders_at(node_id: int) -> int:
                (topic,) = kit.metadata(["orders"], node_id)["topics"]
                return topic["error_code"]

            with kit.client(1) as client:
                create_topic(client, "orders")  # CREATE on the cluster
            # It exists, but the principal may not describe it.
            assert orders_at(2) == TopicAuthorizationFailedError.code
            code, _, err = run("acls", "add", "--bootstrap", f"127.0.0.1:{kit.ports[1]}", "--allow-principal",
                               "User:ANONYMOUS", "--operation", "Describe", "--topic", "orders")
            assert code == 0, err
            kit.wait_until(lambda: orders_at(2) == NONE, "broker 2 applies the ACL added through broker 1",
                           timeout_s=20)
            found = store.get("/kafka-acl/Topic/orders")
            assert json.loads(found.value) == {"version": 1, "acls": [
                {"principal": "User:ANONYMOUS", "permissionType": "Allow", "operation": "Describe", "host": "*"}]}
        finally:
            kit.close()
    finally:
        store.close()
