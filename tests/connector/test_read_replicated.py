"""Reading a replicated partition through Spark: never a record above the high watermark — from the files
(the broker's checkpoint), from the leader (``bootstrap``), and from any replica's log dir."""

import json
import os

import pytest

from broker_core.config import BrokerConfig, LogConfig
from broker_core.log.log import FetchIsolation
from broker_core.log.log_manager import LogManager
from format import layout
from format.layout import TopicPartition
from tests.connector.conftest import hold_high_watermarks, produce_numbered
from tests.connector.test_read_batch import rows
from tests.connector.test_read_stream import expected, run_available_now, stream

pytestmark = pytest.mark.slow

P0, P1 = TopicPartition("events", 0), TopicPartition("events", 1)


def read(spark, **options):
    reader = spark.read.format("seglog")
    for k, v in options.items():
        reader = reader.option(k, v if isinstance(v, str) else json.dumps(v))
    return reader.load()


def test_a_batch_read_of_a_replicated_log_dir_returns_exactly_the_records_below_the_high_watermark(spark, tmp_path):
    d = str(tmp_path / "logs")
    produce_numbered(d, "events", 2, 30)
    hold_high_watermarks(d, {P0: 12, P1: 25})
    assert rows(read(spark, path=d, subscribe="events")) == expected("events", (0,), 0, 12) + expected(
        "events", (1,), 0, 25)
    # Asking past the high watermark is answered up to it only.
    assert rows(read(spark, path=d, subscribe="events", endingOffsets={"events": {"0": 20, "1": -1}})) == \
        expected("events", (0,), 0, 12) + expected("events", (1,), 0, 25)
    offsets = {r.partition: (r.log_end_offset, r.high_watermark, r.last_stable_offset)
               for r in read(spark, path=d, view="offsets").collect()}
    assert offsets == {0: (30, 12, 12), 1: (30, 25, 25)}


def test_a_stream_over_a_replicated_log_dir_reads_the_rest_once_the_checkpoint_moves(spark, tmp_path):
    d = str(tmp_path / "logs")
    produce_numbered(d, "events", 2, 30)
    hold_high_watermarks(d, {P0: 12, P1: 0})
    checkpoint = str(tmp_path / "ckpt")
    first = run_available_now(stream(spark, d, subscribe="events", startingOffsets="earliest"), checkpoint)
    assert sorted(r for b in first for r in b) == expected("events", (0,), 0, 12)
    hold_high_watermarks(d, {P0: 30, P1: 17})
    second = run_available_now(stream(spark, d, subscribe="events", startingOffsets="earliest"), checkpoint)
    assert sorted(r for b in second for r in b) == expected("events", (0,), 12, 30) + expected("events", (1,), 0, 17)


def test_a_followers_log_dir_reads_the_same_as_the_leaders_up_to_its_own_checkpointed_high_watermark(
        spark, tmp_path):
    leader_dir, follower_dir = str(tmp_path / "leader"), str(tmp_path / "follower")
    produce_numbered(leader_dir, "events", 1, 30)
    leader = LogManager(BrokerConfig(log_dirs=(leader_dir,)), sole_replica=False)
    follower = LogManager(BrokerConfig(log_dirs=(follower_dir,)), sole_replica=False)
    try:
        leader.load_logs()
        follower.load_logs()
        source, replica = leader.log_or_raise(P0), follower.get_or_create_log(P0, LogConfig())
        while replica.log_end_offset < source.log_end_offset:  # the replica fetcher's loop, without the network
            fetched = source.read(replica.log_end_offset, 256, isolation=FetchIsolation.LOG_END)
            replica.append_as_follower(bytes(fetched.records))
        replica.update_high_watermark(20)  # the leader's, as the follower last learned it
    finally:
        leader.shutdown()
        follower.shutdown()
    name = layout.partition_dir_name(P0)
    for file_name in os.listdir(os.path.join(leader_dir, name)):
        if file_name.endswith(layout.LOG_FILE_SUFFIX):
            with open(os.path.join(leader_dir, name, file_name), "rb") as a, \
                    open(os.path.join(follower_dir, name, file_name), "rb") as b:
                assert a.read() == b.read()  # the same bytes
    full = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    from_leader = [tuple(r) for r in read(spark, path=leader_dir, subscribe="events").select(*full)
                   .orderBy("offset").collect()]
    from_follower = [tuple(r) for r in read(spark, path=follower_dir, subscribe="events").select(*full)
                     .orderBy("offset").collect()]
    assert len(from_leader) == 30 and from_follower == from_leader[:20]


def test_with_bootstrap_the_leaders_high_watermark_bounds_reads_from_files_and_over_the_protocol(
        spark, tmp_path, broker_server):
    broker = broker_server.broker
    d = broker.log_manager.log_dirs[0]
    broker.create_topic("events", 1)
    broker.produce("events", [(None, b"events-0-%d" % n) for n in range(10)], partition=0)
    lg = broker.log_manager.get_log(P0)
    lg.sole_replica = False  # a replicated partition: appends wait for the in-sync replicas
    broker.produce("events", [(None, b"events-0-%d" % n) for n in range(10, 16)], partition=0)
    bootstrap = broker_server.bootstrap_servers
    assert lg.high_watermark == 10 and lg.log_end_offset == 16
    assert rows(read(spark, bootstrap=bootstrap, subscribe="events")) == expected("events", (0,), 0, 10)
    assert rows(read(spark, bootstrap=bootstrap, path=d, subscribe="events")) == expected("events", (0,), 0, 10)
    lg.maybe_increment_high_watermark(14)
    assert rows(read(spark, bootstrap=bootstrap, subscribe="events")) == expected("events", (0,), 0, 14)
