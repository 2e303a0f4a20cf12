"""``seglog dump --log-dir`` and ``seglog consume --log-dir`` over a tiered log dir: the older segments only
in S3 (SeaweedFS on loopback), the tail on disk."""

import pytest

from format import remote_tier
from format.fs import filesystem_for
from tests.broker_core.cli_kit import run
from tests.format.tiered_log_kit import ORDERS_PER_PARTITION, recopy_overlapping, tiered_orders

pytestmark = pytest.mark.slow

PER_PARTITION = ORDERS_PER_PARTITION


@pytest.fixture()
def tiered(tmp_path, s3_bucket):
    log_dir, url, creds, tiers = tiered_orders(tmp_path, s3_bucket)
    return log_dir, url, creds, [f"--storage-option={k}={v}" for k, v in creds.items()], tiers


def values(partition, first=0, last=PER_PARTITION):
    return [f"orders-{partition}-{n}" for n in range(first, last)]


def test_consume_from_beginning_prints_every_record_of_both_tiers_remote_first(tiered):
    log_dir, url, creds, flags, tiers = tiered
    code, out, err = run("consume", "--log-dir", log_dir, "--topic", "orders", "--partition", "1", "--offset", "0",
                         "--timeout-ms", "500", *flags)
    assert code == 0, err
    assert [line.split(".")[0] for line in out.splitlines()] == values(1)
    assert f"Processed a total of {PER_PARTITION} messages" in err
    assert creds["secret"] not in out + err


def test_consume_all_partitions_from_beginning_prints_each_record_once(tiered):
    log_dir, url, creds, flags, tiers = tiered
    code, out, err = run("consume", "--log-dir", log_dir, "--topic", "orders", "--from-beginning",
                         "--timeout-ms", "500", *flags)
    assert code == 0, err
    got = [line.split(".")[0] for line in out.splitlines()]
    assert sorted(got) == sorted(values(0) + values(1))
    for p in range(2):
        assert [v for v in got if v.startswith(f"orders-{p}-")] == values(p)


def test_dump_of_a_partition_prints_the_remote_segments_then_the_local_ones_with_every_record(tiered):
    log_dir, url, creds, flags, tiers = tiered
    code, out, err = run("dump", "--log-dir", log_dir, "--topic", "orders", "--partition", "0",
                         "--print-data-log", *flags)
    assert code == 0, err
    dumped = [line.split("Dumping ", 1)[1] for line in out.splitlines() if line.startswith("Dumping ")]
    both = {m.base_offset for m in tiers[0].in_both_tiers}
    remote = [m for m in tiers[0].finished if m.base_offset not in both]
    assert dumped[:len(remote)] == [remote_tier.segment_object(url, m, ".log") for m in remote]
    assert all(d.startswith("file://") for d in dumped[len(remote):]) and len(dumped) > len(remote)
    payloads = [line.split("payload: ", 1)[1].split(".")[0] for line in out.splitlines() if "payload: " in line]
    assert payloads == values(0)


def test_a_remote_segment_overlapping_the_one_before_is_dumped_and_consumed_from_past_its_end(tiered):
    log_dir, url, creds, flags, tiers = tiered
    before = tiers[0].finished[0]
    overlapping = recopy_overlapping(url, creds, before, tiers[0].finished[1])
    code, out, err = run("dump", "--log-dir", log_dir, "--topic", "orders", "--partition", "0",
                         "--print-data-log", *flags)
    assert code == 0, err
    assert f"Starting at offset {before.end_offset + 1} (the offsets below it are read from the segment before)" \
        in out
    offsets = [int(line.split("offset: ", 1)[1].split()[0]) for line in out.splitlines() if line.startswith("| offset")]
    assert offsets == list(range(PER_PARTITION))
    assert overlapping.base_offset < before.end_offset
    for first in (0, overlapping.base_offset + 1, before.end_offset + 1):
        code, out, err = run("consume", "--log-dir", log_dir, "--topic", "orders", "--partition", "0", "--offset",
                             str(first), "--timeout-ms", "500", *flags)
        assert code == 0, err
        assert [line.split(".")[0] for line in out.splitlines()] == values(0, first)


def test_a_missing_remote_object_fails_the_dump_and_the_consumer_naming_it(tiered):
    log_dir, url, creds, flags, tiers = tiered
    lost = tiers[0].finished[0]
    obj = remote_tier.segment_object(url, lost, ".log")
    fs, path = filesystem_for(obj, creds)
    fs.rm(path)
    code, out, err = run("dump", "--log-dir", log_dir, "--topic", "orders", "--partition", "0", *flags)
    assert code == 1 and obj in err, err
    code, out, err = run("consume", "--log-dir", log_dir, "--topic", "orders", "--partition", "0", "--offset", "0",
                         "--timeout-ms", "500", *flags)
    assert code == 1 and obj in err, err
    assert creds["secret"] not in out + err


def test_dump_with_log_dir_needs_topic_and_partition(tiered):
    log_dir, url, creds, flags, tiers = tiered
    code, out, err = run("dump", "--log-dir", log_dir, "--topic", "orders")
    assert code == 2 and "--topic and --partition" in err
