"""``seglog compact``: compact topics now.

    seglog compact --log-dir D [--topic T ...]                       the broker's cleaner, in this process
    seglog compact --spark --log-dir D|URL --topic T [--master M]    the Spark job, through spark-submit
    seglog compact --spark --log-dir D --bootstrap H:P ...           the job, on a log dir a broker runs on

In-process, the log dir is opened as an embedded broker (so it must not be
in use) and its cleaner cleans every compacted partition (of the topics
given) until nothing cleanable is left, whatever ``min.cleanable.dirty.ratio``
says, with its progress on standard error (a bar on a terminal, a line every
few seconds elsewhere) and a before/after table on standard output. With
``--spark`` the same is asked of the compaction job; the broker package does
not import Spark, it starts ``spark-submit``.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import time
from typing import Sequence, TextIO

from ..key_values import parse_key_values
from .arguments import CommandError, UsageError, non_negative
from .broker_access import add_command_config_argument
from .progress import DEFAULT_REPORTING_INTERVAL_MS, ProgressLine


class ProgressBar:
    """A one-line progress bar on a terminal; elsewhere a line every ``interval_ms`` while an item
    runs (nothing for a short one), and a line per finished item."""

    WIDTH = 30

    def __init__(self, stream: TextIO | None = None, interval_ms: int = DEFAULT_REPORTING_INTERVAL_MS):
        self.stream = stream if stream is not None else sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.interval_ms = interval_ms
        self.label = ""
        self.total = 1
        self.done = 0
        self._last_draw = 0.0
        self._lines = ProgressLine(self._describe, interval_ms=interval_ms, stream=self.stream)

    def start(self, label: str, total: int) -> None:
        self.label, self.total, self.done = label, max(1, total), 0
        self._lines = ProgressLine(self._describe, interval_ms=0 if self.tty else self.interval_ms,
                                   stream=self.stream)
        self._draw(force=True)

    def advance(self, n: int) -> None:
        self.done += n
        self._lines.update(self.done)
        self._draw()

    def _describe(self, done: int, elapsed_ms: int) -> str:
        share = min(1.0, done / self.total)
        return f"{self.label}: {100 * share:.1f}% of {self.total / 1e6:,.1f} MB after {elapsed_ms / 1000:,.0f} s"

    def _draw(self, force: bool = False) -> None:
        if not self.tty or not self.interval_ms:
            return
        now = time.monotonic()
        if not force and now - self._last_draw < 0.1:
            return
        self._last_draw = now
        share = min(1.0, self.done / self.total)
        filled = int(share * self.WIDTH)
        self.stream.write(f"\r{self.label:<24} [{'#' * filled}{'.' * (self.WIDTH - filled)}] {100 * share:5.1f}% "
                          f"{self.done / 1e6:,.1f}/{self.total / 1e6:,.1f} MB")
        self.stream.flush()

    def finish(self, message: str) -> None:
        if self.tty and self.interval_ms:
            self.stream.write("\r" + " " * (self.WIDTH + 60) + "\r")
        self.stream.write(message + "\n")
        self.stream.flush()


def _table(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]


def summary_lines(before: dict, after: dict, offsets: dict) -> list[str]:
    rows = [("PARTITION", "CLEANED-OFFSETS", "BYTES-BEFORE", "BYTES-AFTER", "REDUCTION")]
    for tp in sorted(before, key=lambda t: (t.topic, t.partition)):
        b, a = before[tp], after[tp]
        rows.append((str(tp), offsets.get(tp, "-"), f"{b:,}", f"{a:,}", f"{100 * (1 - a / b):.1f}%" if b else "-"))
    total_b, total_a = sum(before.values()), sum(after.values())
    rows.append(("total", "", f"{total_b:,}", f"{total_a:,}",
                 f"{100 * (1 - total_a / total_b):.1f}%" if total_b else "-"))
    return _table(rows)


def compact_in_process(log_dirs: list[str], topics: list[str] | None, broker_config: dict[str, str],
                       stream: TextIO | None = None,
                       reporting_interval_ms: int = DEFAULT_REPORTING_INTERVAL_MS) -> int:
    from ..broker import Broker
    from ..errors import InvalidRequestError, UnknownTopicOrPartitionError
    from ..log.cleaner import LogCleaner

    with Broker(log_dirs, broker_config, background=False) as broker:
        names = topics or [t for t in broker.list_topics() if broker.log_config(t).compact]
        for name in names:
            if broker.topics.get(name) is None:
                raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
            if not broker.log_config(name).compact:
                raise InvalidRequestError(f"topic {name!r} has cleanup.policy="
                                          f"{','.join(broker.log_config(name).cleanup_policy)}; only compacted "
                                          f"topics are compacted")
        manager = broker.log_manager
        cleaner = manager.cleaner or LogCleaner(broker.config, manager.log_dirs, manager.all_logs, broker.clock)
        logs = {tp: lg for tp, lg in manager.all_logs().items() if tp.topic in set(names)}
        before = {tp: lg.size for tp, lg in logs.items()}
        offsets: dict = {}
        bar = ProgressBar(stream, reporting_interval_ms)
        worker = cleaner.cleaner(0)
        worker.progress = lambda phase, n: bar.advance(n)

        def on_start(to_clean) -> None:
            bar.start(f"{to_clean.topic_partition}", to_clean.cleanable_bytes + to_clean.total_bytes)

        started = time.monotonic()
        results = cleaner.compact(names, on_start=on_start) if names else []
        for r in results:
            first = offsets.get(r.topic_partition, f"{r.first_dirty_offset}..").split("..")[0]
            offsets[r.topic_partition] = f"{first}..{r.end_offset}"
            status = f"error: {r.error}" if r.error else (f"{r.bytes_before:,} -> {r.bytes_after:,} bytes")
            bar.finish(f"{r.topic_partition}: offsets {r.first_dirty_offset}..{r.end_offset} cleaned, {status}")
        # Cleaned-away segments are deleted after file.delete.delay.ms; an operator's run waits for no one.
        broker.log_manager.scheduler.run_all()
        after = {tp: lg.size for tp, lg in logs.items()}
        elapsed = time.monotonic() - started
        if not results:
            print(f"Nothing to compact in {', '.join(names) or 'this log dir'}.")
        for line in summary_lines(before, after, offsets):
            print(line)
        total = sum(r.stats.bytes_read for r in results if r.stats)
        print(f"Compacted {len({r.topic_partition for r in results})} partitions in {elapsed:.1f} s "
              f"({total / 1e6 / elapsed if elapsed > 0 and total else 0:,.1f} MB/s read).")
        return 1 if any(r.error for r in results) else 0


#: The Spark compaction job, found by its module name: the connector sits above this package,
#: so the job is located (not imported) when the command runs.
COMPACTION_JOB_MODULE = "connector.compaction_job"


def compaction_job_file() -> str:
    """The file spark-submit runs for ``COMPACTION_JOB_MODULE``. Finding it runs the connector package's
    ``__init__`` (a docstring) but imports neither the job nor Spark."""
    try:
        spec = importlib.util.find_spec(COMPACTION_JOB_MODULE)
    except ModuleNotFoundError:
        spec = None
    if spec is None or not spec.origin or not os.path.isfile(spec.origin):
        raise CommandError(f"the Spark compaction job ({COMPACTION_JOB_MODULE}) is not installed")
    return spec.origin


def _project_root(job_file: str) -> str:
    # spark_conf/ sits beside the connector package; spark-submit runs from there.
    return os.path.dirname(os.path.dirname(os.path.abspath(job_file)))


def spark_submit_prefix(root: str, *, master: str | None = None, conf: Sequence[str] = ()) -> list[str]:
    """spark-submit with seglog's settings (``root``/spark_conf, this interpreter for the Python workers),
    ``--master`` and the ``--conf`` settings given; the job and its arguments go after."""
    submit = shutil.which("spark-submit") or os.path.join(os.path.dirname(sys.executable), "spark-submit")
    command = [submit, "--properties-file", os.path.join(root, "spark_conf", "spark-defaults.conf"),
               "--conf", f"spark.pyspark.python={sys.executable}",
               "--conf", f"spark.pyspark.driver.python={sys.executable}"]
    if master:
        command += ["--master", master]
    for item in conf:
        command += ["--conf", item]
    return command


def spark_submit_command(path: str, topics: list[str], *, master: str | None = None,
                         storage: Sequence[str] = (), broker_config: Sequence[str] = (),
                         conf: Sequence[str] = (), bootstrap: str | None = None,
                         command_config: str | None = None) -> tuple[list[str], str]:
    """The spark-submit command running the compaction job, and the directory to run it from."""
    job = compaction_job_file()
    root = _project_root(job)
    command = spark_submit_prefix(root, master=master, conf=conf)
    command += [job, "--path", path, "--topics", ",".join(topics)]
    for item in storage:
        command += ["--storage", item]
    for item in broker_config:
        command += ["--broker-config", item]
    if bootstrap:
        command += ["--bootstrap", bootstrap]
    if command_config:
        command += ["--command-config", os.path.abspath(command_config)]
    return command, root


def compact_with_spark(args: argparse.Namespace) -> int:
    if len(args.log_dir) != 1:
        raise UsageError("--spark compacts one log dir at a time")
    path = args.log_dir[0]
    if "://" not in path:
        path = os.path.abspath(path)
    topics = list(args.topic or [])
    if not topics:
        from format.fs import is_local_url

        if not is_local_url(path):
            raise UsageError("--spark on object storage needs --topic")
        from ..config import BrokerConfig
        from ..log.topic_store import TopicStore

        props = {"log.dirs": path, **parse_key_values(args.broker_config, "--broker-config")}
        defaults = BrokerConfig.from_props(props).log_config_defaults()
        topics = [t.name for t in TopicStore([path.removeprefix("file://")]).all()
                  if defaults.with_overrides(t.config).compact]
        if not topics:
            print("Nothing to compact: no topic of this log dir is compacted.")
            return 0
    command, root = spark_submit_command(path, topics, master=args.master, storage=args.storage or (),
                                         broker_config=args.broker_config or (), conf=args.conf or (),
                                         bootstrap=args.bootstrap, command_config=args.command_config)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    return subprocess.call(command, cwd=root, env=env)


def run(args: argparse.Namespace) -> int:
    if args.spark:
        return compact_with_spark(args)
    if args.master or args.storage or args.conf or args.bootstrap or args.command_config:
        raise UsageError("--master, --storage, --conf, --command-config and --bootstrap go with --spark (a running "
                         "broker cleans its own logs)")
    return compact_in_process(args.log_dir, args.topic, parse_key_values(args.broker_config, "--broker-config"),
                              reporting_interval_ms=args.reporting_interval)


def add_parser(commands) -> None:
    compact = commands.add_parser("compact", help="compact topics now (the broker's cleaner, or the Spark job)")
    compact.add_argument("--log-dir", required=True, action="append",
                         help="a log directory (with --spark also a file:// or s3:// URL)")
    compact.add_argument("--topic", action="append", help="a topic to compact (repeatable; default: every "
                                                          "compacted topic)")
    compact.add_argument("--broker-config", action="append", metavar="KEY=VALUE",
                         help="a broker setting, e.g. log.cleaner.dedupe.buffer.size=268435456")
    compact.add_argument("--reporting-interval", type=non_negative, default=DEFAULT_REPORTING_INTERVAL_MS,
                         metavar="MS", help=f"a progress line on standard error every MS ms where it is not a "
                                            f"terminal (default {DEFAULT_REPORTING_INTERVAL_MS}; 0: none)")
    compact.add_argument("--spark", action="store_true", help="run the Spark compaction job (spark-submit)")
    compact.add_argument("--master", help="--spark: the Spark master (default: spark-submit's)")
    compact.add_argument("--storage", action="append", metavar="KEY=VALUE",
                         help="--spark: a filesystem option, e.g. endpoint_url=http://127.0.0.1:8333")
    compact.add_argument("--conf", action="append", metavar="KEY=VALUE", help="--spark: a Spark setting")
    compact.add_argument("--bootstrap", metavar="HOST:PORT",
                         help="--spark: the listener of the broker running on the log dir; the job leases the "
                              "partitions from it and the broker swaps the cleaned segments in")
    add_command_config_argument(compact)
    compact.set_defaults(run=run)
