"""The web console's JSON API, through the WSGI app served on loopback, against a running broker with a
known workload (``console_kit``): every figure the pages draw."""

from __future__ import annotations

import json
import time

import pytest

from broker_core.clock import MockTime
from broker_core.console import LagSampler, ServerView, console_app
from tests.broker_core.console.console_kit import (BASE_TIMESTAMP, COMMITTED, EVENTS, EVENTS_RECORDS, GROUP,
                                                    GROUP_LAG, LAG_INTERVAL_MS, ORDERS, ORDERS_P0, ORDERS_P1,
                                                    ORDERS_RETENTION_MS, get)

pytestmark = pytest.mark.slow


def test_the_cluster_names_its_id_its_controller_and_this_broker_with_its_listener(workload):
    status, body = get(workload.base_url, "/api/cluster")
    assert status == 200
    server = workload.server
    assert body["cluster_id"] == server.cluster_id
    assert body["controller_id"] == body["node_id"] == server.config.node_id
    assert body["brokers"] == [{"node_id": server.config.node_id,
                                "endpoints": [f"PLAINTEXT://{server.bootstrap_servers}"], "rack": None}]
    assert body["topics"] == 3  # orders, events and __consumer_offsets
    assert body["groups"] == 1
    assert body["under_replicated_partitions"] == 0
    assert body["size_bytes"] == sum(lg.size for lg in server.broker.log_manager.all_logs().values())


def test_topics_list_partitions_records_sizes_and_retention(workload):
    status, body = get(workload.base_url, "/api/topics")
    assert status == 200
    topics = {t["name"]: t for t in body["topics"]}
    orders = topics[ORDERS]
    assert orders["partitions"] == 2
    assert orders["records"] == ORDERS_P0 + ORDERS_P1
    assert orders["retention_ms"] == ORDERS_RETENTION_MS
    assert orders["retention_bytes"] == -1
    assert orders["cleanup_policy"] == "delete"
    assert orders["size_bytes"] == sum(p.size_bytes for p in workload.server.broker.describe_topic(ORDERS).partitions)
    assert orders["segments"] > 2  # segment.bytes=1024 rolled orders-0
    assert topics[EVENTS]["records"] == EVENTS_RECORDS
    assert topics[EVENTS]["retention_ms"] == 7 * 24 * 3600 * 1000  # Kafka's default


def test_a_topic_shows_each_partitions_offsets_and_its_retention_settings_with_their_source(workload):
    status, body = get(workload.base_url, "/api/topic", topic=ORDERS)
    assert status == 200
    partitions = {p["partition"]: p for p in body["partitions"]}
    assert partitions[0]["log_start_offset"] == 0
    assert partitions[0]["log_end_offset"] == partitions[0]["high_watermark"] == ORDERS_P0
    assert partitions[1]["log_end_offset"] == ORDERS_P1
    assert partitions[0]["replicas"] == partitions[0]["isr"] == [workload.server.config.node_id]
    assert body["config"]["retention.ms"] == str(ORDERS_RETENTION_MS)
    assert body["config"]["segment.bytes"] == "1024"
    assert body["overrides"]["retention.ms"] == str(ORDERS_RETENTION_MS)
    assert "cleanup.policy" not in body["overrides"]


def test_a_partitions_segments_show_the_offsets_and_times_their_indexes_cover(workload):
    status, body = get(workload.base_url, "/api/segments", topic=ORDERS, partition=0)
    assert status == 200
    segments = body["segments"]
    assert [s["base_offset"] for s in segments] == sorted(s["base_offset"] for s in segments)
    assert segments[0]["base_offset"] == 0 and segments[-1]["next_offset"] == ORDERS_P0
    assert [s["active"] for s in segments] == [False] * (len(segments) - 1) + [True]
    for s, following in zip(segments, segments[1:]):
        assert s["next_offset"] == following["base_offset"]
    first = segments[0]
    records_in_first = first["next_offset"] - first["base_offset"]
    # index.interval.bytes=1: every batch (one record each) after a segment's first has an offset and a time
    # index entry (as in Kafka, the first is found from the segment's start).
    assert first["offset_index"]["entries"] == first["time_index"]["entries"] == records_in_first - 1
    assert first["offset_index"]["first_offset"] == first["time_index"]["first_offset"] == 1
    assert first["offset_index"]["last_offset"] == first["next_offset"] - 1
    assert first["time_index"]["first_timestamp"] == BASE_TIMESTAMP + 1000
    assert first["time_index"]["last_timestamp"] == BASE_TIMESTAMP + (first["next_offset"] - 1) * 1000
    assert first["largest_timestamp"] == BASE_TIMESTAMP + (first["next_offset"] - 1) * 1000
    assert sum(s["size_bytes"] for s in segments) == workload.server.broker.describe_topic(ORDERS).partitions[0].size_bytes


def test_a_consumer_group_shows_its_member_assignment_committed_offsets_and_lag(workload):
    status, body = get(workload.base_url, "/api/group", group=GROUP)
    assert status == 200
    assert body["state"] == "Stable"
    assert body["protocol_type"] == "consumer"
    (member,) = body["members"]
    assert member["client_id"] == workload.member_client_id
    assert sorted((a["topic"], a["partition"]) for a in member["assignment"]) == [(ORDERS, 0), (ORDERS, 1)]
    rows = {r["partition"]: r for r in body["partitions"]}
    for partition, committed in COMMITTED.items():
        assert rows[partition]["current_offset"] == committed
        assert rows[partition]["lag"] == GROUP_LAG[partition]
        assert rows[partition]["member_id"] == member["member_id"]
    assert rows[0]["log_end_offset"] == ORDERS_P0
    assert body["lag"] == sum(GROUP_LAG.values())


def test_the_groups_list_shows_each_groups_state_members_and_total_lag(workload):
    status, body = get(workload.base_url, "/api/groups")
    assert status == 200
    assert body["groups"] == [{"group": GROUP, "state": "Stable", "protocol_type": "consumer", "members": 1,
                               "partitions": 2, "lag": sum(GROUP_LAG.values())}]


def test_the_console_lag_matches_what_seglog_groups_describe_prints(workload, capsys):
    from broker_core.cli import main

    assert main(["groups", "describe", "--bootstrap", workload.server.bootstrap_servers, "--group", GROUP]) == 0
    printed = capsys.readouterr().out
    described = {(cols[1], cols[2]): cols[5] for cols in map(str.split, printed.splitlines())
                 if cols[:1] == [GROUP] and cols[1] == ORDERS}
    _, body = get(workload.base_url, "/api/group", group=GROUP)
    shown = {(ORDERS, str(row["partition"])): str(row["lag"]) for row in body["partitions"]}
    assert shown == described == {(ORDERS, str(p)): str(lag) for p, lag in GROUP_LAG.items()}


def test_lag_history_holds_samples_taken_every_interval_since_the_app_started(workload):
    deadline = time.monotonic() + 10
    while True:
        status, body = get(workload.base_url, "/api/lag-history", group=GROUP)
        points = body["series"][GROUP]
        if len(points) >= 3 or time.monotonic() > deadline:
            break
        time.sleep(LAG_INTERVAL_MS / 1000)
    assert status == 200 and body["interval_ms"] == LAG_INTERVAL_MS and body["window_ms"] == 3_600_000
    assert len(points) >= 3
    assert {lag for _, lag in points} == {sum(GROUP_LAG.values())}
    times = [t for t, _ in points]
    assert times == sorted(times) and times[-1] <= body["now_ms"]


def test_the_record_browser_shows_a_page_from_an_offset_with_key_headers_and_pretty_json(workload):
    status, body = get(workload.base_url, "/api/records", topic=ORDERS, partition=0, offset=5, limit=3,
                       format="json")
    assert status == 200
    assert [r["offset"] for r in body["records"]] == [5, 6, 7]
    assert body["next_offset"] == 8 and body["high_watermark"] == ORDERS_P0
    first = body["records"][0]
    assert first["key"] == "k5"  # a key that is not JSON is shown as text
    assert first["value"] == json.dumps({"id": 5, "item": "item-5"}, indent=2)
    assert first["headers"] == [["source", "shop"]]
    assert first["timestamp"] == BASE_TIMESTAMP + 5000


def test_the_record_browser_finds_the_first_record_at_or_after_a_time_through_the_time_index(workload):
    status, body = get(workload.base_url, "/api/records", topic=ORDERS, partition=0,
                       timestamp=BASE_TIMESTAMP + 17_500, limit=2)
    assert status == 200
    assert body["start_offset"] == 18
    assert [r["offset"] for r in body["records"]] == [18, 19]
    assert body["records"][0]["key"] == "k18"


def test_the_record_browser_shows_binary_values_as_hex(workload):
    status, body = get(workload.base_url, "/api/records", topic=EVENTS, partition=0, format="hex", limit=1)
    assert status == 200
    (record,) = body["records"]
    assert record["offset"] == 0
    assert record["value"] == "00 ff 62 69 6e 61 72 79"
    assert record["key"] == "65"


def test_a_record_page_goes_on_across_segments_up_to_the_limit(workload):
    _, segments = get(workload.base_url, "/api/segments", topic=ORDERS, partition=0)
    assert len(segments["segments"]) > 2
    status, body = get(workload.base_url, "/api/records", topic=ORDERS, partition=0, offset=1, limit=ORDERS_P0)
    assert status == 200
    assert [r["offset"] for r in body["records"]] == list(range(1, ORDERS_P0))
    assert body["next_offset"] == ORDERS_P0


def test_a_record_page_never_holds_more_than_the_limit_asked(workload):
    status, body = get(workload.base_url, "/api/records", topic=ORDERS, partition=1, limit=4)
    assert status == 200
    assert [r["offset"] for r in body["records"]] == [0, 1, 2, 3]
    status, body = get(workload.base_url, "/api/records", topic=ORDERS, partition=1, limit=1000)
    assert status == 400 and "limit 1000" in body["message"]


def test_an_unknown_topic_partition_or_group_is_answered_404_naming_it(workload):
    status, body = get(workload.base_url, "/api/topic", topic="nope")
    assert status == 404 and "'nope'" in body["message"]
    status, body = get(workload.base_url, "/api/segments", topic=ORDERS, partition=7)
    assert status == 404 and "no partition '7'" in body["message"]
    status, body = get(workload.base_url, "/api/group", group="ghosts")
    assert status == 404 and body["error"] == "GROUP_ID_NOT_FOUND" and "'ghosts'" in body["message"]
    status, body = get(workload.base_url, "/api/records", topic=ORDERS, partition="x")
    assert status == 400 and "partition='x'" in body["message"]


def test_an_offset_outside_the_log_is_answered_416_naming_it(workload):
    status, body = get(workload.base_url, "/api/records", topic=ORDERS, partition=1, offset=ORDERS_P1 + 5)
    assert (status, body["error"]) == (416, "OFFSET_OUT_OF_RANGE"), body
    assert str(ORDERS_P1 + 5) in body["message"]


def test_the_console_is_read_only_every_method_but_get_and_head_is_refused(workload):
    status, body = get(workload.base_url, "/api/topics", method="POST")
    assert status == 405 and body["error"] == "METHOD_NOT_ALLOWED"
    status, _ = get(workload.base_url, "/api/topics", method="DELETE")
    assert status == 405
    status, body = get(workload.base_url, "/api/topics", method="HEAD")
    assert (status, body) == (200, b"")
    assert ORDERS in workload.server.broker.list_topics()


def test_every_page_and_asset_is_served_from_the_package(workload):
    for path in ("/", "/topics", "/topic", "/partition", "/groups", "/group", "/records"):
        status, body = get(workload.base_url, path)
        assert status == 200, path
        assert b'src="static/console.js"' in body, path
    status, body = get(workload.base_url, "/static/chart.js")
    assert status == 200 and b"drawLineChart" in body
    status, body = get(workload.base_url, "/static/../app.py")
    assert status == 404


def _call(app, path: str, query: str = "") -> tuple[str, dict]:
    """The WSGI app called directly with a minimal environ: its status and JSON body."""
    answered = {}
    body = b"".join(app({"REQUEST_METHOD": "GET", "PATH_INFO": path, "QUERY_STRING": query},
                        lambda status, headers: answered.update(status=status)))
    return answered["status"], json.loads(body)


def test_lag_history_answers_the_samples_of_the_last_hour_by_the_injected_clock(workload):
    clock = MockTime()
    app = console_app(ServerView.of(workload.server), lag_interval_ms=600_000, clock=clock, start=False)
    try:
        for _ in range(8):  # 80 minutes, a sample every 10
            app.sampler.sample()
            clock.sleep(600_000)
        status, body = _call(app, "/api/lag-history", f"group={GROUP}")
    finally:
        app.close()
    assert status == "200 OK"
    now = clock.milliseconds()
    assert body["now_ms"] == now and body["interval_ms"] == 600_000
    # The samples of 80 and 70 minutes ago are more than an hour old.
    assert body["series"][GROUP] == [[now - minutes * 60_000, sum(GROUP_LAG.values())]
                                     for minutes in (60, 50, 40, 30, 20, 10)]


def test_the_lag_sampler_keeps_one_hour_of_samples_in_a_ring():
    clock = MockTime()
    lag = {"g": 0}
    sampler = LagSampler(lambda: dict(lag), interval_ms=60_000, clock=clock)
    for minute in range(90):
        lag["g"] = minute
        sampler.sample()
        clock.sleep(60_000)
    history = sampler.history("g")
    # An hour back from now (90 minutes after the first sample): minutes 30..89.
    assert [v for _, v in history] == list(range(30, 90))


def test_the_lag_sampler_refuses_an_interval_longer_than_its_window():
    with pytest.raises(ValueError, match="lag window of 1000 ms is shorter than the sampling interval of 5000 ms"):
        LagSampler(dict, interval_ms=5000, window_ms=1000)
