"""The metadata store contract, run against the in-memory store and a real etcd alike; then what only etcd
does (restarts, unreachable endpoints, chroots)."""

from __future__ import annotations

import pytest

from broker_core.controller.etcd_connect import parse_etcd_connect
from broker_core.controller.etcd_metadata_store import EtcdMetadataStore
from broker_core.controller.metadata_store import (Compare, Delete, LeaseNotFoundError, MetadataStoreUnavailableError,
                                                   Put, WatchEventType)
from tests.broker_core.controller.store_kit import EtcdCase


def test_an_absent_key_reads_as_none(store_case):
    assert store_case.store.get("/brokers/ids/1") is None
    assert store_case.store.get_prefix("/brokers/ids/") == []


def test_create_writes_only_when_the_key_is_absent(store_case):
    store = store_case.store
    first = store.create("/controller", b"1")
    assert first is not None
    assert store.create("/controller", b"2") is None
    found = store.get("/controller")
    assert (found.value, found.mod_revision, found.create_revision) == (b"1", first, first)


def test_compare_and_set_writes_only_at_the_current_mod_revision(store_case):
    store = store_case.store
    created = store.create("/controller_epoch", b"1")
    updated = store.compare_and_set("/controller_epoch", b"2", created)
    assert updated is not None and updated > created
    assert store.compare_and_set("/controller_epoch", b"3", created) is None
    found = store.get("/controller_epoch")
    assert (found.value, found.mod_revision, found.create_revision) == (b"2", updated, created)


def test_compare_and_set_at_revision_zero_creates_only_an_absent_key(store_case):
    store = store_case.store
    assert store.compare_and_set("/cluster/id", b"a", 0) is not None
    assert store.compare_and_set("/cluster/id", b"b", 0) is None
    assert store.get("/cluster/id").value == b"a"


def test_a_commit_applies_all_its_operations_or_none(store_case):
    store = store_case.store
    epoch = store.create("/controller_epoch", b"1")
    store.create("/old", b"x")
    refused = store.commit([Compare("/controller_epoch", epoch), Compare("/controller", 5)],
                           [Put("/controller", b"1"), Delete("/old")])
    assert refused is None
    assert store.get("/controller") is None and store.get("/old").value == b"x"
    done = store.commit([Compare("/controller_epoch", epoch), Compare("/controller", 0)],
                        [Put("/controller", b"1"), Delete("/old")])
    assert done is not None
    assert store.get("/controller").mod_revision == done
    assert store.get("/old") is None


def test_get_prefix_returns_only_the_keys_under_the_prefix_in_key_order(store_case):
    store = store_case.store
    for key in ["/brokers/ids/2", "/brokers/ids/10", "/brokers/ids/1", "/brokers/idsx", "/brokers/topics/t"]:
        store.create(key, key.encode())
    assert [kv.key for kv in store.get_prefix("/brokers/ids/")] == ["/brokers/ids/1", "/brokers/ids/10",
                                                                    "/brokers/ids/2"]
    assert [kv.value for kv in store.get_prefix("/brokers/topics/")] == [b"/brokers/topics/t"]


def test_delete_at_a_stale_mod_revision_is_refused(store_case):
    store = store_case.store
    first = store.create("/controller", b"1")
    second = store.compare_and_set("/controller", b"2", first)
    assert store.delete("/controller", first) is False
    assert store.get("/controller").value == b"2"
    assert store.delete("/controller", second) is True
    assert store.get("/controller") is None
    assert store.delete("/controller") is False


def test_keys_under_a_lease_vanish_when_it_is_not_kept_alive(store_case):
    store = store_case.store
    lease = store.grant_lease(1000)
    store.create("/brokers/ids/1", b"{}", lease)
    store.create("/brokers/ids/2", b"{}")
    assert store.get("/brokers/ids/1").lease == lease
    store_case.pass_time(1000)
    assert store_case.eventually(lambda: store.get("/brokers/ids/1") is None)
    assert store.get("/brokers/ids/2") is not None
    assert store.keep_alive(lease) is False


def test_keep_alive_holds_the_keys_past_the_ttl(store_case):
    store = store_case.store
    lease = store.grant_lease(2000)
    store.create("/brokers/ids/1", b"{}", lease)
    for _ in range(3):
        store_case.pass_time(1000)
        assert store.keep_alive(lease) is True
    assert store.get("/brokers/ids/1") is not None


def test_revoking_a_lease_deletes_its_keys_at_once(store_case):
    store = store_case.store
    lease = store.grant_lease(60_000)
    store.create("/controller", b"1", lease)
    store.create("/brokers/ids/1", b"{}", lease)
    store.revoke_lease(lease)
    assert store.get("/controller") is None and store.get("/brokers/ids/1") is None
    store.revoke_lease(lease)  # a second revoke is no error
    assert store.keep_alive(lease) is False


def test_a_put_under_an_expired_lease_is_refused(store_case):
    store = store_case.store
    lease = store.grant_lease(60_000)
    store.revoke_lease(lease)
    with pytest.raises(LeaseNotFoundError) as refused:
        store.create("/brokers/ids/1", b"{}", lease)
    assert refused.value.lease == lease
    assert store.get("/brokers/ids/1") is None


def test_rewriting_a_key_without_its_lease_detaches_it(store_case):
    store = store_case.store
    lease = store.grant_lease(60_000)
    created = store.create("/controller", b"1", lease)
    store.compare_and_set("/controller", b"2", created)
    store.revoke_lease(lease)
    found = store.get("/controller")
    assert (found.value, found.lease) == (b"2", 0)


def test_a_watch_sees_puts_and_deletes_under_its_prefix_in_order(store_case):
    store = store_case.store
    watch = store.watch_prefix("/brokers/ids/")
    first = store.create("/brokers/ids/1", b"a")
    store.create("/brokers/topics/t", b"outside")
    second = store.compare_and_set("/brokers/ids/1", b"b", first)
    store.delete("/brokers/ids/1")
    events = store_case.events(watch, 3)
    assert [(e.type, e.key, e.value) for e in events] == [
        (WatchEventType.PUT, "/brokers/ids/1", b"a"),
        (WatchEventType.PUT, "/brokers/ids/1", b"b"),
        (WatchEventType.DELETE, "/brokers/ids/1", b""),
    ]
    assert [e.mod_revision for e in events[:2]] == [first, second]
    assert events[2].mod_revision > second


def test_a_watch_sees_the_deletes_of_an_expired_lease(store_case):
    store = store_case.store
    lease = store.grant_lease(1000)
    store.create("/brokers/ids/3", b"{}", lease)
    watch = store.watch_prefix("/brokers/")
    store_case.pass_time(1000)
    events = store_case.events(watch, 1)
    assert [(e.type, e.key) for e in events] == [(WatchEventType.DELETE, "/brokers/ids/3")]


def test_a_cancelled_watch_sees_nothing_more(store_case):
    store = store_case.store
    watch = store.watch_prefix("/")
    watch.cancel()
    store.create("/controller", b"1")
    assert watch.poll() == []


def test_after_etcd_restarts_the_keys_leases_and_watches_carry_on(etcd_server):
    case = EtcdCase(etcd_server.connect("/seglog"))
    store = case.store
    try:
        lease = store.grant_lease(5000)
        created = store.create("/brokers/ids/1", b"{}", lease)
        watch = store.watch_prefix("/brokers/")
        etcd_server.restart()
        assert store.get("/brokers/ids/1").mod_revision == created
        assert store.keep_alive(lease) is True
        store.create("/brokers/ids/2", b"{}")
        events = case.events(watch, 1)
        assert [(e.type, e.key) for e in events] == [(WatchEventType.PUT, "/brokers/ids/2")]
    finally:
        store.close()


def test_an_unreachable_etcd_is_reported_with_its_endpoints(etcd_server):
    store = EtcdMetadataStore(parse_etcd_connect(etcd_server.connect("/seglog")), request_timeout_ms=500)
    try:
        etcd_server.stop()
        with pytest.raises(MetadataStoreUnavailableError,
                           match=f"etcd at {etcd_server.endpoint}/seglog: get /controller got no answer within 500 ms"):
            store.get("/controller")
    finally:
        store.close()


def test_the_chroot_keeps_two_clusters_apart(etcd_server):
    first = EtcdMetadataStore(parse_etcd_connect(etcd_server.connect("/a")))
    second = EtcdMetadataStore(parse_etcd_connect(etcd_server.connect("/b")))
    try:
        first.create("/controller", b"1")
        assert second.get("/controller") is None
        assert second.create("/controller", b"2") is not None
        assert first.get("/controller").value == b"1"
        assert [kv.key for kv in first.get_prefix("/")] == ["/controller"]
    finally:
        first.close()
        second.close()
