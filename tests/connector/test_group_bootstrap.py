"""Group offsets through a running broker: a query's commits go to its coordinator, and come back from it."""

import pytest

from format.record import SimpleRecord
from tests.broker_core.server.server_kit import committed_offsets, start_broker
from tests.connector.conftest import T0, produce_numbered

pytestmark = pytest.mark.slow


@pytest.fixture()
def running(tmp_path):
    produce_numbered(str(tmp_path / "logs"), "events", 2, 30)
    server = start_broker(tmp_path / "logs")
    try:
        yield server
    finally:
        server.shutdown()


def run_available_now(spark, bootstrap: str, checkpoint: str, seen: list, **options) -> None:
    reader = spark.readStream.format("seglog").option("bootstrap", bootstrap).option("subscribe", "events") \
        .option("groupId", "etl")
    for key, value in options.items():
        reader = reader.option(key, value)
    query = reader.load().writeStream \
        .foreachBatch(lambda batch, _: seen.extend((r.partition, r.offset) for r in batch.collect())) \
        .option("checkpointLocation", checkpoint).trigger(availableNow=True).start()
    assert query.awaitTermination(240)


def test_a_streaming_query_commits_through_the_coordinator_and_resumes_from_it(spark, running, tmp_path):
    bootstrap = running.bootstrap_servers
    seen: list = []
    run_available_now(spark, bootstrap, str(tmp_path / "first"), seen, startingOffsets="earliest")
    assert len(seen) == 60
    # What any Kafka tool sees: the committed offsets, through OffsetFetch.
    assert committed_offsets(bootstrap, "etl", "events") == {0: 30, 1: 30}
    described = running.group_coordinator.describe_group("etl")[1]
    assert described.state == "Empty"  # offsets only, no members: the connector assigns partitions itself

    running.broker.produce("events", [SimpleRecord(b"late", None, T0)], partition=1)
    resumed: list = []
    # A new query (new checkpoint) of the same group starts where the group stands.
    run_available_now(spark, bootstrap, str(tmp_path / "second"), resumed, startingOffsets="group")
    assert resumed == [(1, 30)]
    assert committed_offsets(bootstrap, "etl", "events") == {0: 30, 1: 31}
