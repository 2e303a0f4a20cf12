"""The ``store_case`` fixture: every contract test runs on the in-memory store and on a real etcd."""

from __future__ import annotations

import pytest

from tests.broker_core.controller.store_kit import EtcdCase, InMemoryCase


@pytest.fixture(params=["in-memory", "etcd"])
def store_case(request):
    if request.param == "in-memory":
        case = InMemoryCase()
    else:
        case = EtcdCase(request.getfixturevalue("etcd_server").connect("/seglog"))
    try:
        yield case
    finally:
        case.store.close()
