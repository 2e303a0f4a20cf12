"""The cluster's ACL store on a real etcd: Kafka's ZooKeeper paths and JSON, and a change made through one
store seen by another (another broker) through its watch."""

from __future__ import annotations

import json
import threading

from broker_core.controller.etcd_connect import parse_etcd_connect
from broker_core.controller.etcd_metadata_store import EtcdMetadataStore
from broker_core.security.acl_etcd_store import EtcdAclStore
from tests.broker_core.security.acl_kit import acl


def test_a_change_through_one_store_reaches_another_and_an_emptied_resource_leaves_etcd(etcd_server):
    stores = [EtcdMetadataStore(parse_etcd_connect(etcd_server.connect("/c"))) for _ in range(2)]
    writer, reader = EtcdAclStore(stores[0]), EtcdAclStore(stores[1])
    changed = threading.Event()
    reader.start(changed.set)
    try:
        prefixed = acl("Group:etl-", "Read", pattern="prefixed", principal="User:etl")
        writer.update(add=[acl("Topic:orders", "Write"), prefixed])
        assert changed.wait(10)
        for _ in range(50):
            if len(reader.bindings()) == 2:
                break
            changed.clear()
            changed.wait(0.2)
        assert reader.bindings() == {acl("Topic:orders", "Write"), prefixed}
        assert json.loads(stores[0].get("/kafka-acl-extended/prefixed/Group/etl-").value) == {"version": 1, "acls": [
            {"principal": "User:etl", "permissionType": "Allow", "operation": "Read", "host": "*"}]}
        writer.update(remove=[acl("Topic:orders", "Write")])
        assert stores[0].get("/kafka-acl/Topic/orders") is None
        assert EtcdAclStore(stores[1]).bindings() == {prefixed}
    finally:
        reader.close()
        for store in stores:
            store.close()
