"""Committing a query's group offsets into a log directory, with no running broker."""

from __future__ import annotations

import pytest

from broker_core import Broker
from broker_core.errors import LogDirInUseError
from broker_core.group_offsets import read_committed_offsets
from connector.group_commit import commit_group_offsets
from connector.options import parse_options
from format.layout import TopicPartition
from tests.connector.conftest import produce_numbered


def test_offsets_are_committed_into_a_log_dir_no_broker_holds(tmp_path):
    d = str(tmp_path / "logs")
    produce_numbered(d, "orders", 3, 5)
    options = parse_options({"path": d, "subscribe": "orders", "groupId": "offline"})
    commit_group_offsets(options, {TopicPartition("orders", 2): 4})
    assert {tp: o.offset for tp, o in read_committed_offsets(None, d, "offline")["offline"].items()} == {
        TopicPartition("orders", 2): 4}
    with Broker(d, background=False):
        with pytest.raises(LogDirInUseError, match="in use"):
            commit_group_offsets(options, {TopicPartition("orders", 2): 5})
