"""Broker and RemoteBroker share one declared interface, so the seglog commands need not ask
which one they hold."""

import inspect

import pytest

from format.layout import TopicPartition

from broker_core import Broker
from broker_core.broker_api import BrokerApi
from broker_core.client.remote_broker import RemoteBroker

MEMBERS = sorted(name for name, value in vars(BrokerApi).items()
                 if callable(value) and (not name.startswith("_") or name in ("__enter__", "__exit__")))


def _parameters(function) -> list[tuple[str, object]]:
    return [(p.name, p.default) for p in inspect.signature(function).parameters.values()]


def test_the_interface_declares_what_the_commands_call():
    assert {"create_topic", "produce", "fetch", "list_offsets", "describe_group", "reset_offsets"} <= set(MEMBERS)


@pytest.mark.parametrize("implementation", [Broker, RemoteBroker], ids=["Broker", "RemoteBroker"])
@pytest.mark.parametrize("member", MEMBERS)
def test_broker_and_remote_broker_take_each_call_of_the_interface_with_its_parameters(implementation, member):
    assert _parameters(getattr(implementation, member)) == _parameters(getattr(BrokerApi, member))


def test_the_embedded_broker_describes_and_resets_a_group_as_the_remote_one_does(tmp_path):
    with Broker([str(tmp_path)], background=False) as broker:
        broker.create_topic("t", 1)
        broker.produce("t", [b"a", b"b", b"c"], partition=0)
        broker.commit_offsets("app", {TopicPartition("t", 0): 3})
        broker.reset_offsets("app", {TopicPartition("t", 0): 1})
        described = broker.describe_group("app")
    assert [(r.topic, r.partition, r.current_offset, r.log_end_offset, r.lag) for r in described.partitions] == [
        ("t", 0, 1, 3, 2)]
