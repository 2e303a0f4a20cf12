"""The README's examples, copied out of README.md and run as written.

Every fenced block runs, in the README's order, against one temporary
directory standing for ``/data``, unless an ``<!-- illustrative: reason -->``
comment stands right before it. Python blocks run as a user's own script does
(``.venv/bin/python my_job.py`` from another directory, no virtualenv active),
shell blocks from the checkout with the virtualenv active (its ``bin/`` on
``PATH``), SQL blocks in ``seglog sql -e``. Then the test checks that the log
dir holds what the examples say they wrote.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from broker_core import Broker
from format.layout import TopicPartition
from tests.shell_kit import VENV_BIN, run_to_end, user_environment

REPO = Path(__file__).resolve().parents[1]
TIMEOUT_S = 300

# The first test's setup runs every block, each within TIMEOUT_S.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.MULTILINE | re.DOTALL)
_MARK = re.compile(r"<!-- illustrative: [^>]*-->\s*$")


@dataclass(frozen=True)
class Block:
    section: str
    language: str
    text: str
    illustrative: bool

    @property
    def name(self) -> str:
        return f"{self.section}: {self.text.strip().splitlines()[0][:60]}"


def readme_blocks(readme: str) -> list[Block]:
    blocks = []
    for match in _FENCE.finditer(readme):
        before = readme[:match.start()]
        headings = re.findall(r"^## (.+)$", before, re.MULTILINE)
        blocks.append(Block(headings[-1] if headings else "top", match.group(1), match.group(2),
                            _MARK.search(before) is not None))
    return blocks


BLOCKS = readme_blocks((REPO / "README.md").read_text())
RUNNABLE = [b for b in BLOCKS if not b.illustrative]


def test_the_readme_runs_most_of_its_blocks_and_marks_the_others():
    assert len(RUNNABLE) >= 6
    assert {b.language for b in RUNNABLE} == {"python", "sql", ""}
    for block in BLOCKS:
        assert block.language in ("", "python", "sql"), block.name


def run_block(block: Block, data: Path, scratch: Path) -> subprocess.CompletedProcess:
    text = block.text.replace("/data/", f"{data}/")
    if block.language == "python":
        script = scratch / "my_job.py"
        script.write_text(text)
        return run_to_end([sys.executable, str(script)], scratch, user_environment(venv_active=False), TIMEOUT_S)
    if block.language == "sql":
        return run_to_end([os.path.join(VENV_BIN, "seglog"), "sql", "--conf", "spark.ui.enabled=false", "-e", text],
                          scratch, user_environment(venv_active=False), TIMEOUT_S)
    return run_to_end(["bash", "-euo", "pipefail", "-c", text], REPO, user_environment(venv_active=True), TIMEOUT_S)


@pytest.fixture(scope="module")
def readme_run(tmp_path_factory) -> tuple[Path, list[subprocess.CompletedProcess]]:
    """Every runnable block, in order, on one ``/data`` (later blocks read what earlier ones wrote)."""
    root = tmp_path_factory.mktemp("readme")
    data = root / "data"
    (data / "logs").mkdir(parents=True)
    results = []
    for i, block in enumerate(RUNNABLE):
        scratch = root / f"block-{i}"
        scratch.mkdir()
        results.append(run_block(block, data, scratch))
    return data, results


@pytest.mark.parametrize("index", range(len(RUNNABLE)), ids=[b.name for b in RUNNABLE])
def test_the_readme_example_runs_as_written(readme_run, index):
    block, result = RUNNABLE[index], readme_run[1][index]
    assert result.returncode == 0, f"{block.name} failed:\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}"
    assert "Traceback" not in result.stderr


def test_the_readme_examples_left_what_they_describe(readme_run):
    data, _ = readme_run
    with Broker(str(data / "logs"), background=False) as broker:
        assert broker.partitions_for("orders") == 3
        assert broker.partitions_for("refunds") == 1  # created by the write, num.partitions=1
        refunds = broker.fetch("refunds", 0, 0).decoded(0)
        assert [(r.key, r.value) for r in refunds] == [(b"alice", b'{"amount": -12}')]
        committed = broker.committed_offsets("orders-etl")
        ends = {TopicPartition("orders", p): broker.list_offsets("orders", p, "latest").offset for p in range(3)}
    assert {tp: c.offset for tp, c in committed.items()} == ends  # the stream read everything
    assert sum(ends.values()) == 1
    assert list((data / "pipeline" / "data").glob("*.parquet"))


def test_the_examples_show_progress_as_they_run(readme_run):
    _, results = readme_run
    [examples] = [results[i] for i, b in enumerate(RUNNABLE) if b.section == "Examples"]
    lines = examples.stderr.splitlines()
    assert any(re.fullmatch(r"\[ *\d+\.\ds\] starting Spark \(local\[2\]\)", line) for line in lines)
    assert any(re.fullmatch(r"\[ *\d+\.\ds\] micro-batch 0: 1 records", line) for line in lines)
    assert any(line.endswith("] reading orders between 2026-01-01T00:00:00 and 2100-01-01T00:00:00")
               for line in lines)
