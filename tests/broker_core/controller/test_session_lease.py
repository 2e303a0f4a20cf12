"""A broker's session: a lease renewed on its own thread, reported when it is lost, revoked on close."""

from __future__ import annotations

import threading

import pytest

from broker_core.controller.session_lease import SessionLease
from tests.broker_core.controller.store_kit import EtcdCase


def test_a_session_keeps_its_keys_past_the_timeout_while_it_is_renewed(etcd_server):
    # Renewals happen in real time, so this runs on etcd only (a simulated clock would stand still).
    case = EtcdCase(etcd_server.connect())
    store = case.store
    try:
        session = SessionLease(store, 1000, 200)
        store.create("/brokers/ids/1", b"{}", session.lease)
        case.pass_time(2500)
        assert store.get("/brokers/ids/1") is not None and not session.expired.is_set()
        session.close()
        assert store.get("/brokers/ids/1") is None
    finally:
        store.close()


def test_a_session_whose_lease_is_gone_reports_it_expired(store_case):
    store = store_case.store
    lost = []
    done = threading.Event()
    session = SessionLease(store, 5000, 50, on_expired=lambda lease: (lost.append(lease), done.set()))
    store.create("/brokers/ids/1", b"{}", session.lease)
    store.revoke_lease(session.lease)
    assert done.wait(10)
    assert lost == [session.lease] and session.expired.is_set()
    session.close()


def test_closing_without_revoke_leaves_the_keys_to_the_timeout(store_case):
    store = store_case.store
    session = SessionLease(store, 1000, 200)
    store.create("/brokers/ids/1", b"{}", session.lease)
    session.close(revoke=False)
    assert store.get("/brokers/ids/1") is not None
    store_case.pass_time(1000)
    assert store_case.eventually(lambda: store.get("/brokers/ids/1") is None)


def test_a_heartbeat_not_below_the_session_timeout_is_refused(store_case):
    with pytest.raises(ValueError, match="broker.heartbeat.interval.ms \\(9000\\) must be below "
                                         "broker.session.timeout.ms \\(9000\\)"):
        SessionLease(store_case.store, 9000, 9000)
