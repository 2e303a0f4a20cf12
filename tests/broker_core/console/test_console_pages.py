"""The web console in a real browser: headless Chromium driven by Selenium loads each page against a broker
with a known workload (``console_kit``), checks the figures shown and saves a screenshot of each; the lag
chart's screenshot must show the plotted series."""

from __future__ import annotations

import datetime as dt
import io
import json
import time
import urllib.parse

import pytest

from tests.broker_core.console.console_kit import (BASE_TIMESTAMP, COMMITTED, EVENTS, GROUP, GROUP_LAG,
                                                    LAG_INTERVAL_MS, ORDERS, ORDERS_P0, ORDERS_P1,
                                                    ORDERS_RETENTION_MS, chromium, get, png_pixels)

pytestmark = pytest.mark.slow

SERIES_COLOR = (0x2F, 0x6F, 0xDE)  # chart.js's first palette color


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory):
    return tmp_path_factory.mktemp("console-screenshots")


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    with chromium(str(tmp_path_factory.mktemp("chromium"))) as driver:
        yield driver


def open_page(browser, workload, screenshots, path: str, name: str, **query):
    """Load the page, wait until its script has drawn the API's answer, save a screenshot."""
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(workload.base_url + path + ("?" + urllib.parse.urlencode(query) if query else ""))
    WebDriverWait(browser, 20).until(lambda d: d.find_element("tag name", "body").get_attribute("data-loaded"))
    assert browser.find_element("tag name", "body").get_attribute("data-loaded") == "true", \
        browser.find_element("id", "content").text
    browser.save_screenshot(str(screenshots / f"{name}.png"))
    return browser


def cell(browser, row_selector: str, field: str) -> str:
    return browser.find_element("css selector", f'{row_selector} [data-field="{field}"]').text


def test_the_cluster_page_shows_the_cluster_its_broker_and_the_counts(browser, workload, screenshots):
    page = open_page(browser, workload, screenshots, "/", "cluster")
    server = workload.server
    assert page.find_element("id", "cluster-id").text == server.cluster_id
    assert page.find_element("id", "controller-id").text == str(server.config.node_id)
    assert page.find_element("id", "topic-count").text == "3"
    assert page.find_element("id", "group-count").text == "1"
    assert page.find_element("id", "under-replicated").text == "0"
    assert cell(page, "#brokers tbody tr", "endpoints") == f"PLAINTEXT://{server.bootstrap_servers}"
    size = sum(lg.size for lg in server.broker.log_manager.all_logs().values())
    assert page.find_element("id", "log-size").get_attribute("title") == f"{size} bytes"


def test_the_topics_page_shows_partitions_records_and_retention(browser, workload, screenshots):
    page = open_page(browser, workload, screenshots, "/topics", "topics")
    row = f'tr[data-topic="{ORDERS}"]'
    assert cell(page, row, "partitions") == "2"
    assert cell(page, row, "records") == str(ORDERS_P0 + ORDERS_P1)
    assert cell(page, row, "retention_ms") == "1 h"
    assert page.find_element("css selector", f'{row} [data-field="retention_ms"]').get_attribute("title") == \
        str(ORDERS_RETENTION_MS)
    assert cell(page, row, "retention_bytes") == "unlimited"
    assert cell(page, row, "cleanup_policy") == "delete"
    size = sum(p.size_bytes for p in workload.server.broker.describe_topic(ORDERS).partitions)
    assert page.find_element("css selector", f'{row} [data-field="size_bytes"]').get_attribute("title") == \
        f"{size} bytes"


def test_the_topic_page_shows_each_partitions_offsets_and_the_retention_settings(browser, workload, screenshots):
    page = open_page(browser, workload, screenshots, "/topic", "topic", topic=ORDERS)
    assert cell(page, 'tr[data-partition="0"]', "log_end_offset") == str(ORDERS_P0)
    assert cell(page, 'tr[data-partition="1"]', "high_watermark") == str(ORDERS_P1)
    assert cell(page, 'tr[data-config="retention.ms"]', "value") == f"{ORDERS_RETENTION_MS:d}"
    assert page.find_element("css selector", 'tr[data-config="retention.ms"]').text.endswith("topic")
    assert page.find_element("css selector", 'tr[data-config="cleanup.policy"]').text.endswith("default")


def test_the_partition_page_lists_the_segments_and_their_index_coverage(browser, workload, screenshots):
    _, api = get(workload.base_url, "/api/segments", topic=ORDERS, partition=0)
    page = open_page(browser, workload, screenshots, "/partition", "partition", topic=ORDERS, partition=0)
    rows = page.find_elements("css selector", "#segments tbody tr")
    assert [r.get_attribute("data-base-offset") for r in rows] == [str(s["base_offset"]) for s in api["segments"]]
    first = api["segments"][0]
    index = first["offset_index"]
    assert cell(page, 'tr[data-base-offset="0"]', "offset_index") == \
        f"{index['entries']} entries: {index['first_offset']} … {index['last_offset']}"
    first_indexed = dt.datetime.fromtimestamp((BASE_TIMESTAMP + 1000) / 1000, dt.timezone.utc)
    assert cell(page, 'tr[data-base-offset="0"]', "time_index").startswith(
        f"{first['time_index']['entries']} entries: {first_indexed:%Y-%m-%dT%H:%M:%S}.000Z (offset 1)")


def test_the_groups_page_shows_the_group_its_state_and_lag(browser, workload, screenshots):
    page = open_page(browser, workload, screenshots, "/groups", "groups")
    row = f'tr[data-group="{GROUP}"]'
    assert cell(page, row, "state") == "Stable"
    assert cell(page, row, "members") == "1"
    assert cell(page, row, "lag") == str(sum(GROUP_LAG.values()))


def _chart_points(browser) -> list[tuple[float, float]]:
    return [(float(c.get_attribute("cx")), float(c.get_attribute("cy")))
            for c in browser.find_elements("css selector", f'#lag-chart g[data-series="{GROUP}"] circle.point')]


def _series_pixels(png: bytes) -> int:
    try:
        from PIL import Image
    except ImportError:
        _, _, pixels = png_pixels(png)
    else:
        pixels = list(Image.open(io.BytesIO(png)).convert("RGB").getdata())
    return sum(1 for p in pixels if all(abs(a - b) <= 24 for a, b in zip(p, SERIES_COLOR)))


def test_the_group_page_shows_members_assignments_lag_and_a_lag_chart_that_is_not_empty(browser, workload,
                                                                                         screenshots):
    # Enough samples for a line: the sampler runs every LAG_INTERVAL_MS since the app started.
    deadline = time.monotonic() + 10
    while len(get(workload.base_url, "/api/lag-history", group=GROUP)[1]["series"][GROUP]) < 5:
        assert time.monotonic() < deadline
        time.sleep(LAG_INTERVAL_MS / 1000)
    page = open_page(browser, workload, screenshots, "/group", "group", group=GROUP)
    assert page.find_element("id", "group-state").text == "Stable"
    assert page.find_element("id", "total-lag").text == str(sum(GROUP_LAG.values()))
    member = page.find_element("css selector", "#members tbody tr")
    assert cell(page, "#members tbody tr", "client_id") == workload.member_client_id
    assert cell(page, "#members tbody tr", "assignment") == f"{ORDERS}-0, {ORDERS}-1"
    for partition, committed in COMMITTED.items():
        row = f'tr[data-tp="{ORDERS}-{partition}"]'
        assert cell(page, row, "current_offset") == str(committed)
        assert cell(page, row, "lag") == str(GROUP_LAG[partition])
    assert member.get_attribute("data-member")

    points = _chart_points(page)
    assert len(points) >= 5
    # Every sample has the same lag: the points lie on one horizontal line, above the x axis.
    assert len({y for _, y in points}) == 1
    chart = page.find_element("id", "lag-chart")
    png = chart.screenshot_as_png
    (screenshots / "group-lag-chart.png").write_bytes(png)
    # The series' color is nowhere in the chart but in the plotted line and points: a line across it.
    assert _series_pixels(png) >= 200, f"lag chart screenshot {screenshots / 'group-lag-chart.png'} shows no series"


def test_the_record_browser_shows_records_from_an_offset_as_pretty_json(browser, workload, screenshots):
    page = open_page(browser, workload, screenshots, "/records", "records-json", topic=ORDERS, partition=0,
                     offset=5, limit=3, format="json")
    rows = page.find_elements("css selector", "#records tbody tr")
    assert [r.get_attribute("data-offset") for r in rows] == ["5", "6", "7"]
    assert cell(page, 'tr[data-offset="5"]', "key") == "k5"
    assert cell(page, 'tr[data-offset="5"]', "headers") == "source: shop"
    assert cell(page, 'tr[data-offset="5"]', "value") == json.dumps({"id": 5, "item": "item-5"}, indent=2)
    assert page.find_element("id", "page-range").text == "offsets 5 … 7"


def test_the_record_browser_form_finds_records_by_time_and_shows_them_as_hex(browser, workload, screenshots):
    page = open_page(browser, workload, screenshots, "/records", "records-form")
    form = page.find_element("id", "browse")
    from selenium.webdriver.support.ui import Select

    Select(form.find_element("name", "topic")).select_by_value(ORDERS)
    when = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime((BASE_TIMESTAMP + 17_500) / 1000))  # 17.5 s: offset 18
    page.execute_script("arguments[0].value = arguments[1]", form.find_element("name", "time"), when)
    Select(form.find_element("name", "format")).select_by_value("hex")
    page.execute_script("arguments[0].value = '2'", form.find_element("name", "limit"))
    form.find_element("css selector", "button[type=submit]").click()
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(page, 20).until(lambda d: "timestamp=" in d.current_url and
                                  d.find_element("tag name", "body").get_attribute("data-loaded") == "true")
    page.save_screenshot(str(screenshots / "records-hex.png"))
    rows = page.find_elements("css selector", "#records tbody tr")
    # The time is rounded down to the second: offset 17 is the first at or after it.
    assert [r.get_attribute("data-offset") for r in rows] == ["17", "18"], page.current_url
    assert cell(page, 'tr[data-offset="17"]', "key") == "6b 31 37"  # "k17"


def test_binary_values_show_as_hex_in_the_record_browser(browser, workload, screenshots):
    page = open_page(browser, workload, screenshots, "/records", "records-binary", topic=EVENTS, partition=0,
                     format="hex", limit=1)
    assert cell(page, 'tr[data-offset="0"]', "value") == "00 ff 62 69 6e 61 72 79"
