"""The group APIs at every version: requests decoded by the protocol package, responses it can encode."""

from __future__ import annotations

from typing import Iterator

import pytest

from coordinator_kit import (INCONSISTENT_GROUP_PROTOCOL, INITIAL_DELAY_MS, LATEST, NONE, SESSION_TIMEOUT_MS,
                             Harness, Member)
from broker_core.protocol import ApiKey


@pytest.fixture
def h() -> Iterator[Harness]:
    harness = Harness()
    yield harness
    harness.close()


@pytest.mark.parametrize("join_version", range(0, LATEST[ApiKey.JOIN_GROUP] + 1))
@pytest.mark.parametrize("sync_version", range(0, LATEST[ApiKey.SYNC_GROUP] + 1))
def test_a_group_forms_at_every_join_and_sync_version(h: Harness, join_version: int, sync_version: int) -> None:
    a, b = Member(), Member()
    joins = [h.join_new(m, version=join_version) for m in (a, b)]
    h.advance(2 * INITIAL_DELAY_MS)
    assert [j.response["generation_id"] for j in joins] == [1, 1]
    assert joins[0].response["protocol_name"] == "range"
    sync_b = h.sync(b, version=sync_version)
    sync_a = h.sync(a, {a.member_id: b"A", b.member_id: b"B"}, version=sync_version)
    assert (sync_a.response["assignment"], sync_b.response["assignment"]) == (b"A", b"B")


def test_join_group_v0_takes_the_session_timeout_as_rebalance_timeout(h: Harness) -> None:
    a = Member()
    h.join(a, version=0, session_timeout_ms=SESSION_TIMEOUT_MS, rebalance_timeout_ms=99_999)
    assert h.group.members[0].rebalance_timeout_ms == SESSION_TIMEOUT_MS


@pytest.mark.parametrize("version,protocol_name", [(6, ""), (7, None)])
def test_a_failed_join_has_no_protocol_name_in_each_versions_spelling(h: Harness, version: int,
                                                                      protocol_name: str | None) -> None:
    response = h.join(Member(), protocol_type="", version=version).response
    assert (response["error_code"], response["protocol_name"], response["generation_id"]) == (
        INCONSISTENT_GROUP_PROTOCOL, protocol_name, -1)


@pytest.mark.parametrize("version", range(0, LATEST[ApiKey.HEARTBEAT] + 1))
def test_heartbeat_at_every_version(h: Harness, version: int) -> None:
    a = Member()
    h.form_group(a)
    assert h.heartbeat(a, version=version) == NONE


@pytest.mark.parametrize("version", range(0, LATEST[ApiKey.LEAVE_GROUP] + 1))
def test_leave_group_at_every_version(h: Harness, version: int) -> None:
    a, b = Member(), Member()
    h.form_group(a, b)
    assert h.leave(b, version=version)["error_code"] == NONE
    assert h.group.member_ids == [a.member_id]


@pytest.mark.parametrize("version", range(2, LATEST[ApiKey.OFFSET_COMMIT] + 1))
def test_offset_commit_at_every_version(h: Harness, version: int) -> None:
    a = Member()
    h.form_group(a)
    assert h.commit({("orders", 0): 5, ("orders", 1): 6}, a, version=version) == {("orders", 0): NONE,
                                                                                  ("orders", 1): NONE}
    assert h.committed() == {("orders", 0): 5, ("orders", 1): 6}


@pytest.mark.parametrize("version", range(0, LATEST[ApiKey.DELETE_GROUPS] + 1))
def test_delete_groups_at_every_version(h: Harness, version: int) -> None:
    h.commit({("orders", 0): 5})
    assert h.delete("group", version=version) == {"group": NONE}
