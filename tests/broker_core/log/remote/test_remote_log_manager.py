"""The remote log manager writing the remote tier: against SeaweedFS on loopback, driven round by round."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import fsspec
import pytest
import s3fs

from broker_core import Broker
from broker_core.clock import MockTime
from broker_core.config import BrokerConfig
from broker_core.errors import InvalidConfigurationError
from format import remote_tier
from format.layout import TopicPartition

from tests.broker_core.log.remote.remote_tier_kit import (T0, TIERED_TOPIC, TOPIC, assert_tier_whole, manager_over,
                                                          open_broker, produce, tier_round, view)


@pytest.fixture()
def tier(s3_bucket):
    bucket, options = s3_bucket
    return f"s3://{bucket}/tier", options, s3fs.S3FileSystem(**options)


@pytest.fixture()
def local_tier(tmp_path):
    """A remote tier in a local directory: its URL and filesystem."""
    (tmp_path / "remote").mkdir()
    return (tmp_path / "remote").as_uri(), fsspec.filesystem("file")


class Crash(BaseException):
    """The process dying at a chosen remote-tier operation (no handler survives it)."""


class CrashingFileSystem:
    """The remote tier's filesystem, dying at its ``crash_at``-th write or delete (counting from 0)."""

    WRITES = ("pipe_file", "put_file", "rm_file")

    def __init__(self, fs, crash_at: int | None = None):
        self._fs = fs
        self.crash_at = crash_at
        self.writes = 0

    def __getattr__(self, name):
        found = getattr(self._fs, name)
        if name not in self.WRITES:
            return found

        def write(*args, **kwargs):
            if self.writes == self.crash_at:
                raise Crash(f"crash at write {self.writes}: {name}{args[:1]}")
            self.writes += 1
            return found(*args, **kwargs)
        return write


def test_after_producing_most_segments_are_only_in_the_remote_tier_and_local_disk_holds_the_tail(tmp_path, tier):
    url, options, fs = tier
    with open_broker(tmp_path / "logs", url, options) as broker:
        broker.create_topic(TOPIC, 1, TIERED_TOPIC)
        produce(broker, 0, 60)
        tier_round(broker, broker.remote_log_manager)
        v = assert_tier_whole(broker, fs, url)
        lg = v.log
        local = lg.segments
        assert len(v.remote) >= 10 and len(local) <= 4
        assert lg.log_start_offset == 0 and v.remote[0].base_offset == 0
        assert lg.local_log_start_offset >= v.remote[-3].end_offset  # copied segments left local disk
        assert lg.highest_offset_in_remote_storage == v.remote[-1].end_offset
        assert sum(s.size for s in local[:-1]) <= 2000  # local.retention.bytes
        # the metadata names the segment's epochs and objects, and the log dir names the tier, without secrets
        assert v.remote[0].segment_leader_epochs == {0: 0}
        assert {".log", ".index", ".timeindex", ".snapshot", ".leader_epoch_checkpoint"} <= set(v.remote[0].objects)
        text = open(os.path.join(tmp_path / "logs", remote_tier.REMOTE_TIER_FILE)).read()
        assert text == f"remote.storage.url={url}\n"  # the URL only: no credentials on disk


def test_segments_not_below_the_high_watermark_or_still_active_are_not_copied(tmp_path, tier):
    url, options, fs = tier
    with open_broker(tmp_path / "logs", url, options) as broker:
        broker.create_topic(TOPIC, 1, TIERED_TOPIC)
        produce(broker, 0, 3)  # one active segment only
        tier_round(broker, broker.remote_log_manager)
        assert view(broker, fs, url).remote == []
        lg = broker.log_manager.get_log(TopicPartition(TOPIC, 0))
        produce(broker, 3, 20)
        lg.sole_replica = False
        committed = lg.segments[1].base_offset
        lg.update_high_watermark(committed)  # only the first segment is committed
        tier_round(broker, broker.remote_log_manager)
        remote = view(broker, fs, url).remote
        assert [(m.base_offset, m.end_offset) for m in remote] == [(0, committed - 1)]


def test_local_retention_never_deletes_a_segment_not_yet_copied(tmp_path, tier):
    url, options, fs = tier
    with open_broker(tmp_path / "logs", url, options) as broker:
        broker.create_topic(TOPIC, 1, TIERED_TOPIC)
        produce(broker, 0, 40)
        broker.log_manager.cleanup_logs()  # no remote log manager round yet
        lg = broker.log_manager.get_log(TopicPartition(TOPIC, 0))
        assert lg.local_log_start_offset == 0 and lg.log_start_offset == 0


def test_total_retention_deletes_remote_segments_and_moves_the_log_start_offset(tmp_path, tier):
    url, options, fs = tier
    clock = MockTime(current_time_ms=T0)
    with open_broker(tmp_path / "logs", url, options, clock) as broker:
        broker.create_topic(TOPIC, 1, TIERED_TOPIC)
        produce(broker, 0, 60)
        tier_round(broker, broker.remote_log_manager)
        before = view(broker, fs, url).remote
        broker.alter_topic_config(TOPIC, {"retention.bytes": "5000"})
        tier_round(broker, broker.remote_log_manager)
        v = assert_tier_whole(broker, fs, url)
        assert len(v.remote) < len(before)
        assert v.log.log_start_offset == v.remote[0].base_offset > 0
        local_only = sum(s.size for s in v.log.segments if s.base_offset > v.log.highest_offset_in_remote_storage)
        # as Kafka: whole segments go while the excess over retention.bytes covers them
        assert 0 <= sum(m.size_in_bytes for m in v.remote) + local_only - 5000 < v.remote[0].size_in_bytes
        # retention.ms counts from each segment's largest timestamp
        broker.alter_topic_config(TOPIC, {"retention.bytes": "-1", "retention.ms": "60000"})
        clock.sleep(120_000)
        tier_round(broker, broker.remote_log_manager)
        v = view(broker, fs, url)
        assert v.remote == [] and v.objects == []
        assert v.log.log_start_offset == v.log.local_log_start_offset


def test_the_log_start_offset_survives_a_restart_as_the_remote_tiers_first_offset(tmp_path, tier):
    url, options, fs = tier
    with open_broker(tmp_path / "logs", url, options) as broker:
        broker.create_topic(TOPIC, 1, {**TIERED_TOPIC, "retention.bytes": "6000"})
        produce(broker, 0, 60)
        tier_round(broker, broker.remote_log_manager)
        first_remote = view(broker, fs, url).remote[0].base_offset
        local_start = broker.log_manager.get_log(TopicPartition(TOPIC, 0)).local_log_start_offset
    with open_broker(tmp_path / "logs", url, options) as broker:
        lg = broker.log_manager.get_log(TopicPartition(TOPIC, 0))
        assert (lg.log_start_offset, lg.local_log_start_offset) == (first_remote, local_start)


def _crash_scenario(broker, manager) -> None:
    produce(broker, 0, 16)
    tier_round(broker, manager)
    broker.alter_topic_config(TOPIC, {"retention.bytes": "1800", "local.retention.bytes": "900"})
    tier_round(broker, manager)


def test_a_crash_at_each_copy_and_delete_step_then_a_restart_leaves_no_lost_and_no_orphaned_segment(
        tmp_path, tier):
    url, options, fs = tier
    counting = CrashingFileSystem(fs)
    with open_broker(tmp_path / "count", url + "/count", options) as broker:
        broker.create_topic(TOPIC, 1, TIERED_TOPIC)
        _crash_scenario(broker, manager_over(broker, counting, url + "/count"))
        assert_tier_whole(broker, fs, url + "/count")
    steps = counting.writes
    assert steps >= 20  # copies (metadata, objects, metadata) and deletes (metadata, objects, metadata)
    left_behind = set()
    for step in range(steps):
        where, log_dir = f"{url}/crash-{step}", tmp_path / f"crash-{step}"
        with open_broker(log_dir, where, options) as broker:
            broker.create_topic(TOPIC, 1, TIERED_TOPIC)
            broker.remote_log_manager.close()
            with pytest.raises(Crash):
                _crash_scenario(broker, manager_over(broker, CrashingFileSystem(fs, crash_at=step), where))
            crashed = view(broker, fs, where)
            left_behind |= {m.state.name for m in crashed.remote}
            described = {n.split(".", 1)[0] for n in crashed.objects if n.endswith(".metadata.json")}
        with open_broker(log_dir, where, options) as broker:  # the restart: recovery, then the rounds go on
            lg = broker.log_manager.get_log(TopicPartition(TOPIC, 0))
            start = lg.log_start_offset
            tier_round(broker, broker.remote_log_manager)
            produce(broker, 16, 8)
            tier_round(broker, broker.remote_log_manager)
            v = assert_tier_whole(broker, fs, where)
            assert v.log.log_start_offset >= start and v.log.log_end_offset == 24, f"step {step}"
            # every offset from the log start is in the remote tier or on local disk
            assert v.log.local_log_start_offset <= (v.remote[-1].end_offset + 1 if v.remote else start)
    # the crashes did leave every kind of unfinished work for the restart to find
    assert {"COPY_SEGMENT_STARTED", "DELETE_SEGMENT_STARTED"} <= left_behind, left_behind


def test_objects_no_metadata_names_are_removed_as_orphans_at_start_up(tmp_path, tier):
    url, options, fs = tier
    with open_broker(tmp_path / "logs", url, options) as broker:
        broker.create_topic(TOPIC, 1, TIERED_TOPIC)
        produce(broker, 0, 20)
        tier_round(broker, broker.remote_log_manager)
        kept = view(broker, fs, url)
        directory = kept.objects[0].rpartition("/")[0]
        orphan = f"{directory}/{0:020d}-{remote_tier.new_segment_id()}.log"  # a copy dead before its first PUT
        fs.pipe_file(orphan, b"partial")
        tier_round(broker, manager_over(broker, fs, url))  # a restart's manager
        assert view(broker, fs, url).objects == kept.objects


def test_metadata_staged_by_a_put_that_crashed_before_its_rename_is_removed_at_start_up(tmp_path, local_tier):
    url, fs = local_tier
    with open_broker(tmp_path / "logs", url, {}) as broker:
        broker.create_topic(TOPIC, 1, TIERED_TOPIC)
        produce(broker, 0, 20)
        tier_round(broker, broker.remote_log_manager)
        kept = view(broker, fs, url)
        # A state change of a kept segment and the first PUT of a new copy, each dead before its rename.
        staged = [f"{kept.objects[0].split('.', 1)[0]}.metadata.json.tmp",
                  f"{kept.objects[0].rpartition('/')[0]}/{0:020d}-{remote_tier.new_segment_id()}.metadata.json.tmp"]
        for name in staged:
            fs.pipe_file(name, b'{"state": "DELETE_SEGMENT')
        tier_round(broker, manager_over(broker, fs, url))  # a restart's manager
        assert view(broker, fs, url).objects == kept.objects


def test_an_unreachable_remote_tier_makes_copying_retry_with_back_off_and_deletes_nothing_local(tmp_path, caplog):
    url = "s3://unreachable/tier"
    options = {"endpoint_url": "http://127.0.0.1:9", "key": "k", "secret": "s"}
    clock = MockTime(current_time_ms=T0)
    with open_broker(tmp_path / "logs", url, options, clock, **{
            "remote.log.manager.task.retry.backoff.ms": "100",
            "remote.log.manager.task.retry.backoff.max.ms": "300"}) as broker:
        broker.remote_log_manager.close()
        # the same endpoint, with the client's own retries off so that the test is quick
        unreachable = s3fs.S3FileSystem(**options, config_kwargs={"retries": {"max_attempts": 1}})
        manager = manager_over(broker, unreachable, url)
        broker.create_topic(TOPIC, 1, TIERED_TOPIC)
        produce(broker, 0, 40)
        caplog.set_level(logging.WARNING, logger="broker_core.log.remote.remote_log_manager")
        backoffs = []
        for _ in range(5):
            caplog.clear()
            tier_round(broker, manager)
            warnings = [r.getMessage() for r in caplog.records]
            assert len(warnings) == 1 and url in warnings[0] and "Could not connect" in warnings[0], warnings
            backoffs.append(int(warnings[0].split("retrying in ")[1].split(" ms")[0]))
            caplog.clear()
            tier_round(broker, manager)  # within the back-off: no attempt
            assert caplog.records == []
            clock.sleep(backoffs[-1])
        assert backoffs == [100, 200, 300, 300, 300]
        lg = broker.log_manager.get_log(TopicPartition(TOPIC, 0))
        assert lg.local_log_start_offset == 0 and lg.highest_offset_in_remote_storage == -1


def test_a_follower_copies_nothing_and_a_new_leader_continues_from_the_listed_metadata(tmp_path, local_tier):
    url, fs = local_tier
    with open_broker(tmp_path / "logs", url, {}) as broker:
        broker.remote_log_manager.close()
        broker.create_topic(TOPIC, 1, TIERED_TOPIC)
        produce(broker, 0, 30)
        follower = manager_over(broker, fs, url, is_leader=lambda tp: False)
        tier_round(broker, follower)
        assert view(broker, fs, url).remote == []
        first_leader = manager_over(broker, fs, url)
        first_leader.run_once()
        copied = view(broker, fs, url).remote
        produce(broker, 30, 30)
        new_leader = manager_over(broker, fs, url)  # as after a leader change: nothing in memory
        tier_round(broker, new_leader)
        after = assert_tier_whole(broker, fs, url).remote
        assert after[:len(copied)] == copied and len(after) > len(copied)


def test_a_follower_counts_as_remote_only_the_offsets_its_own_leader_epochs_share_with_the_remote_tier(tmp_path, local_tier):
    url, fs = local_tier
    with open_broker(tmp_path / "logs", url, {}) as broker:
        broker.remote_log_manager.close()
        broker.create_topic(TOPIC, 1, TIERED_TOPIC)
        produce(broker, 0, 40)
        manager_over(broker, fs, url).run_once()  # the leader copies, in epoch 0
        remote = view(broker, fs, url).remote
        lg = broker.log_manager.get_log(TopicPartition(TOPIC, 0))
        assert len(remote) >= 5 and remote[-1].end_offset > 20
        follower = manager_over(broker, fs, url, is_leader=lambda tp: False)
        lg.highest_offset_in_remote_storage = -1
        follower.run_once()
        assert lg.highest_offset_in_remote_storage == remote[-1].end_offset
        # A log whose epoch 0 ended at offset 12 (epoch 1 from there) shares only offsets 0..11 with the tier.
        lg.highest_offset_in_remote_storage = -1
        lg.leader_epoch_cache.assign(1, 12)
        broker.alter_topic_config(TOPIC, {"retention.bytes": "3000"})  # total retention is the leader's work
        tier_round(broker, follower)
        assert lg.highest_offset_in_remote_storage == 11
        assert lg.local_log_start_offset <= 12
        assert view(broker, fs, url).remote == remote and lg.log_start_offset == 0  # nothing remote deleted


# --- configuration ------------------------------------------------------------------------------


def test_remote_storage_on_a_compacted_topic_is_refused_as_kafka_refuses_it(tmp_path):
    with open_broker(tmp_path / "logs", (tmp_path / "remote").as_uri(), {}) as broker:
        with pytest.raises(InvalidConfigurationError,
                           match="Remote log storage is unsupported for the compacted topics"):
            broker.create_topic(TOPIC, 1, {"remote.storage.enable": "true", "cleanup.policy": "compact"})


def test_remote_storage_on_a_broker_without_the_remote_log_storage_system_is_refused(tmp_path):
    with Broker(str(tmp_path / "logs"), background=False) as broker:
        with pytest.raises(InvalidConfigurationError, match="Tiered Storage functionality is disabled in the broker"):
            broker.create_topic(TOPIC, 1, {"remote.storage.enable": "true"})


def test_disabling_remote_storage_on_a_topic_is_refused_as_kafka_3_refuses_it(tmp_path):
    with open_broker(tmp_path / "logs", (tmp_path / "remote").as_uri(), {}) as broker:
        broker.create_topic(TOPIC, 1, TIERED_TOPIC)
        for change in ({"set_configs": {"remote.storage.enable": "false"}},
                       {"delete_configs": ["remote.storage.enable"]}):
            with pytest.raises(InvalidConfigurationError) as raised:
                broker.alter_topic_config(TOPIC, **change)
            assert str(raised.value) == "Disabling remote storage feature on the topic level is not supported."
        assert broker.describe_topic(TOPIC).config["remote.storage.enable"] == "true"
        broker.alter_topic_config(TOPIC, {"local.retention.bytes": "3000"})  # other changes go through


REMOTE_STORAGE_STILL_USED = ("You have to delete all topics with the property remote.storage.enable=true before "
                             "disabling tiered storage cluster-wide")


def test_a_broker_without_the_remote_log_storage_system_refuses_to_start_over_a_topic_with_remote_storage(tmp_path):
    log_dir = tmp_path / "logs"
    with open_broker(log_dir, (tmp_path / "remote").as_uri(), {}) as broker:
        broker.create_topic(TOPIC, 1, TIERED_TOPIC)
        broker.create_topic("plain", 1)
    with pytest.raises(InvalidConfigurationError) as raised:
        Broker(str(log_dir), background=False)
    assert str(raised.value).startswith(REMOTE_STORAGE_STILL_USED)
    assert f"topics with it in {log_dir}: {TOPIC}" in str(raised.value)
    done = subprocess.run([sys.executable, "-m", "broker_core.cli", "broker", "--log-dir", str(log_dir),
                           "--listeners", "PLAINTEXT://127.0.0.1:0"], capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and REMOTE_STORAGE_STILL_USED in done.stderr, done.stderr
    assert "Error:" not in done.stderr.replace("ERROR", "")  # no Python class name for the user
    # A reader of the log dir (nothing it does needs the remote log storage system) still opens it.
    with Broker(str(log_dir), read_only=True) as reader:
        assert reader.describe_topic(TOPIC).config["remote.storage.enable"] == "true"


@pytest.mark.parametrize("props, message", [
    ({"retention.ms": "1000", "local.retention.ms": "2000"},
     "Invalid value 2000 for configuration local.retention.ms: Value must not be more than retention.ms property "
     "value: 1000"),
    ({"retention.bytes": "1000", "local.retention.bytes": "2000"},
     "Invalid value 2000 for configuration local.retention.bytes: Value must not be more than retention.bytes "
     "property value: 1000"),
    ({"retention.bytes": "1000", "local.retention.bytes": "-1"},
     "Invalid value -1 for configuration local.retention.bytes: Value must not be -1 as retention.bytes value is "
     "set as 1000"),
    ({"local.retention.ms": "-3"}, "Invalid value -3 for configuration local.retention.ms: Value must be at least -2"),
])
def test_local_retention_above_the_total_is_refused_with_kafkas_message(tmp_path, props, message):
    with open_broker(tmp_path / "logs", (tmp_path / "remote").as_uri(), {}) as broker:
        with pytest.raises(InvalidConfigurationError) as raised:
            broker.create_topic(TOPIC, 1, {"remote.storage.enable": "true", **props})
        assert str(raised.value) == message


def test_remote_storage_options_stay_out_of_the_broker_configs_extra_and_need_a_url():
    config = BrokerConfig.from_props({"remote.log.storage.system.enable": "true", "remote.storage.url": "s3://b/p",
                                      "remote.storage.options.secret": "hush"})
    assert dict(config.remote_storage_options) == {"secret": "hush"} and "hush" not in repr(config)
    assert dict(config.extra) == {} and config.remote_log_manager_task_interval_ms == 30_000
    with pytest.raises(InvalidConfigurationError, match="remote.storage.url"):
        BrokerConfig.from_props({"remote.log.storage.system.enable": "true"})
