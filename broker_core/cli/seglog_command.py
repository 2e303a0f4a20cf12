"""The ``seglog`` command line: Kafka's tools in one command.

    seglog topics create|list|describe|delete|alter --log-dir D ...
    seglog produce --log-dir D --topic T [--key-separator S]     (lines from stdin)
    seglog consume --log-dir D --topic T [--from-beginning | --partition P --offset O] [--max-messages N]
                   [--timeout-ms T] [--isolation-level L]        (follows the log until interrupted)
                   [--storage-option K=V ...] [--remote-storage-url U]  (the remote tier under the log dir)
    seglog dump FILE... | --log-dir D --topic T --partition P   (a partition: the remote tier's segments first)
    seglog groups list|describe|reset-offsets|delete --log-dir D [--group G] ...
    seglog transactions list|describe|describe-producers --log-dir D [--transactional-id T]
                        [--topic T --partition P] ...                      (as kafka-transactions.sh)
    seglog compact --log-dir D [--topic T] [--spark [--master M]]   (the broker's cleaner, or the Spark job)
    seglog broker --log-dir D --listeners PLAINTEXT://127.0.0.1:9092 [--node-id N] [--config k=v]
    seglog sql [--metastore DIR] [spark-sql arguments]   (the spark-sql shell, set up for seglog)
    seglog users add|delete|list --log-dir D|--bootstrap H:P [--user U --password P --mechanism SCRAM-SHA-512]
    seglog tables sync --table URL --topic T --log-dir D|--bootstrap H:P [--value-format json] ...
    seglog tables list|describe [--table URL] --log-dir D|--bootstrap H:P    (topics as Delta tables)

topics, produce, consume, groups and transactions take --bootstrap HOST:PORT instead of
--log-dir to work through a running broker (whose log dir is locked); groups
then asks the broker's group coordinator, which knows the live members.

Errors print one line on stderr — the message, Kafka's error name where there
is one, the file where a file is at fault — and exit 1 (2 for a command line
that cannot work); SEGLOG_DEBUG=1 adds the traceback.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import traceback
from contextlib import contextmanager
from typing import Callable, Iterator, Sequence

from ..key_values import parse_key_values
from .arguments import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_USAGE, CommandError, UsageError, non_negative
from .broker_access import add_command_config_argument, open_broker
from .progress import DEFAULT_REPORTING_INTERVAL_MS, ProgressLine, rate_text
from .tables import aligned
from .tiered_reads import add_remote_tier_arguments

DEBUG_ENV = "SEGLOG_DEBUG"


def error_message(exc: BaseException) -> str:
    """What went wrong, for people: the message, with Kafka's error name where the error has one
    and the file of a failed system call; never a Python class name."""
    if isinstance(exc, OSError) and exc.strerror:
        files = " -> ".join(os.fsdecode(f) for f in (exc.filename, exc.filename2) if f is not None)
        return f"{files}: {exc.strerror}" if files else exc.strerror
    text = str(exc)
    name = getattr(exc, "kafka_error_name", None)
    if name:
        return f"{name}: {text}" if text else name
    return text or "failed without a message"


def _is_socket_error(args: argparse.Namespace, exc: BaseException) -> bool:
    return bool(getattr(args, "bootstrap", None)) and isinstance(exc, OSError) and exc.filename is None


def _failure_text(args: argparse.Namespace, exc: BaseException) -> str:
    """``error_message``, naming the broker of ``--bootstrap`` when a socket error names no address."""
    if _is_socket_error(args, exc) and exc.strerror:
        return f"the broker at {args.bootstrap}: {exc.strerror}"
    return error_message(exc)


def _is_unavailable(p) -> bool:
    return p.leader < 0


def _describe_lines(description, only=None) -> list[str]:
    """kafka-topics.sh --describe's lines; with ``only`` (a test of a partition), as its
    ``--under-replicated-partitions`` and ``--unavailable-partitions``: the matching partitions' lines alone."""
    overrides = ",".join(f"{k}={v}" for k, v in sorted(description.config.items()))
    factor = len(description.partitions[0].replicas or (0,)) if description.partitions else 1
    lines = [] if only else [
        f"Topic: {description.name}\tTopicId: {description.topic_id}\t"
        f"PartitionCount: {description.partition_count}\tReplicationFactor: {factor}\tConfigs: {overrides}"]
    for p in description.partitions:
        if only is not None and not only(p):
            continue
        replicas = ",".join(str(b) for b in p.replicas or (p.leader,))
        isr = ",".join(str(b) for b in p.isr or (p.leader,))
        line = (f"\tTopic: {description.name}\tPartition: {p.partition}\tLeader: {p.leader}\t"
                f"Replicas: {replicas}\tIsr: {isr}\tLogStartOffset: {p.log_start_offset}\t"
                f"LogEndOffset: {p.log_end_offset}")
        # What is not known (the segments of a partition on a remote broker) is left out, not made up.
        if p.size_bytes is not None:
            line += f"\tSize: {p.size_bytes}"
        if p.segments is not None:
            line += f"\tSegments: {p.segments}"
        if p.local_log_start_offset is not None:  # a broker with a remote tier: both tiers
            line += f"\tLocalLogStartOffset: {p.local_log_start_offset}"
        if p.remote_log_start_offset is not None:  # left out while the tier cannot be listed
            line += f"\tRemoteLogStartOffset: {p.remote_log_start_offset}"
        if p.remote_segments is not None:  # known where the tier is read (not over the Kafka protocol)
            line += f"\tRemoteSize: {p.remote_size_bytes}\tRemoteSegments: {p.remote_segments}"
        lines.append(line)
    return lines


def _topics(args: argparse.Namespace) -> int:
    with open_broker(args, read_only=args.action in ("list", "describe")) as broker:
        if args.action == "create":
            broker.create_topic(args.topic, args.partitions, parse_key_values(args.config),
                                replication_factor=args.replication_factor)
            print(f"Created topic {args.topic}.")
        elif args.action == "list":
            for name in broker.list_topics():
                print(name)
        elif args.action == "describe":
            names = [args.topic] if args.topic else broker.list_topics()
            only = None
            if args.under_replicated_partitions:
                only = lambda p: p.is_under_replicated  # noqa: E731 - the one filter of a flag
            elif args.unavailable_partitions:
                only = _is_unavailable
            for name in names:
                for line in _describe_lines(broker.describe_topic(name), only):
                    print(line)
        elif args.action == "delete":
            broker.delete_topic(args.topic)
            print(f"Deleted topic {args.topic}.")
        elif args.action == "alter":
            if args.partitions is not None:
                broker.create_partitions(args.topic, args.partitions)
            if args.config or args.delete_config:
                broker.alter_topic_config(args.topic, parse_key_values(args.config), args.delete_config or ())
            print(f"Altered topic {args.topic}.")
    return 0


def _produce(args: argparse.Namespace) -> int:
    from format.record import SimpleRecord

    sep = args.key_separator.encode() if args.key_separator else None
    produced = 0
    progress = ProgressLine(lambda n, ms: f"Produced {rate_text(n, ms, 'records')} to {args.topic} so far",
                            interval_ms=args.reporting_interval)
    try:
        with open_broker(args) as broker:
            broker.partitions_for(args.topic)

            def send(records: list) -> None:
                nonlocal produced
                if records:
                    produced += len(broker.produce(args.topic, records, partition=args.partition))
                    progress.update(produced)

            pending = []
            for number, raw in enumerate(sys.stdin.buffer, start=1):
                line = raw.rstrip(b"\r\n")
                if sep is not None:
                    key, found, value = line.partition(sep)
                    if not found:
                        send(pending)  # the lines before this one go in, as Kafka's console producer sends them
                        pending = []
                        raise ValueError(f"line {number} has no key separator {args.key_separator!r}: "
                                         f"{line[:80].decode('utf-8', 'replace')!r}")
                    pending.append(SimpleRecord(value, key))
                else:
                    pending.append(SimpleRecord(line))
                if len(pending) >= args.batch_size:
                    send(pending)
                    pending = []
            if pending:
                send(pending)
    except KeyboardInterrupt:
        raise CommandError(f"Produced {produced} records to {args.topic} before being interrupted",
                           EXIT_INTERRUPTED) from None
    except Exception as exc:
        raise CommandError(f"Produced {produced} records to {args.topic} before failing: "
                           f"{_failure_text(args, exc)}") from exc
    print(f"Produced {produced} records to {args.topic}.", file=sys.stderr)
    return 0


@contextmanager
def _stopping_on_signals(stop: Callable[[], None]) -> Iterator[None]:
    """SIGINT and SIGTERM call ``stop`` (which only sets a flag) instead of killing the command."""
    previous = {}
    try:
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, lambda *_: stop())
    except ValueError:  # not the main thread: the default handlers stay
        pass
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _consume(args: argparse.Namespace) -> int:
    from ..errors import OffsetOutOfRangeError
    from .console_consumer import ConsoleConsumer

    if args.offset is not None and args.partition is None:
        raise UsageError("--offset needs --partition")
    if args.offset is not None and args.from_beginning:
        raise UsageError("--offset and --from-beginning exclude each other")
    with open_broker(args, read_only=True) as opened:
        broker = opened
        if not args.bootstrap:
            from .tiered_reads import TieredReads, tiered_log_directory

            # Offsets below the local log: from the remote tier, when the log dir has one.
            broker = TieredReads(opened, [tiered_log_directory(args, d) for d in args.log_dir])
        count = broker.partitions_for(args.topic)
        partitions = [args.partition] if args.partition is not None else list(range(count))
        positions = {}
        for p in partitions:
            if args.offset is not None:
                earliest = broker.list_offsets(args.topic, p, "earliest").offset
                latest = broker.list_offsets(args.topic, p, "latest", args.isolation_level).offset
                if not earliest <= args.offset <= latest:
                    raise OffsetOutOfRangeError(f"offset {args.offset} of {args.topic}-{p} is outside "
                                                f"[{earliest}, {latest}]")
                positions[p] = args.offset
            else:
                positions[p] = broker.list_offsets(args.topic, p, "earliest" if args.from_beginning
                                                   else "latest", args.isolation_level).offset
        # Records go to standard output: a progress line only when that is not the terminal.
        progress = None if sys.stdout.isatty() else ProgressLine(
            lambda n, ms: f"Processed {rate_text(n, ms, 'messages')} so far", interval_ms=args.reporting_interval)
        consumer = ConsoleConsumer(broker, args.topic, positions, max_messages=args.max_messages,
                                   timeout_ms=args.timeout_ms, isolation_level=args.isolation_level,
                                   progress=progress,
                                   warn=lambda line: print(line, file=sys.stderr))

        def show(records) -> None:
            lines = []
            for record in records:
                value = "null" if record.value is None else record.value.decode("utf-8", "replace")
                if args.print_key:
                    key = "null" if record.key is None else record.key.decode("utf-8", "replace")
                    lines.append(f"{key}{args.key_separator}{value}\n")
                else:
                    lines.append(value + "\n")
            sys.stdout.write("".join(lines))
            sys.stdout.flush()

        try:
            with _stopping_on_signals(consumer.stop):
                consumer.run(show)
        except BrokenPipeError:
            raise
        except Exception as exc:
            raise CommandError(f"Processed a total of {consumer.consumed} messages before failing: "
                               f"{_failure_text(args, exc)}") from exc
    print(f"Processed a total of {consumer.consumed} messages", file=sys.stderr)
    return 0


def _record_decoder(args: argparse.Namespace, path: str):
    """The decoder of ``path``'s records: ``__transaction_state``'s with ``--transaction-log-decoder``
    or for a segment of that topic's partitions; else none (keys and values printed as text)."""
    from ..coordinator.transaction.transaction_log import TRANSACTION_STATE_TOPIC, format_record

    directory = os.path.basename(os.path.dirname(os.path.abspath(path)))
    topic, _, partition = directory.rpartition("-")
    if args.transaction_log_decoder or (topic == TRANSACTION_STATE_TOPIC and partition.isdigit()):
        return format_record
    return None


def _dump(args: argparse.Namespace) -> int:
    from format.dump import dump_file

    if args.log_dir:
        return _dump_partition(args)
    if args.topic is not None or args.partition is not None:
        raise UsageError("--topic and --partition go with --log-dir")
    if not args.files:
        raise UsageError("dump needs files, or --log-dir with --topic and --partition")
    corrupt = False
    for path in args.files:
        result = dump_file(path, print_data=args.print_data_log, decoder=_record_decoder(args, path))
        for line in result.lines:
            print(line)
        corrupt |= result.corrupt
    return 1 if corrupt else 0


def _dump_partition(args: argparse.Namespace) -> int:
    """Every segment of a partition of a log dir, the remote tier's first (``--log-dir`` with ``--topic`` and
    ``--partition``)."""
    from format.dump import dump_segment
    from format.layout import TopicPartition

    from ..coordinator.transaction.transaction_log import TRANSACTION_STATE_TOPIC, format_record
    from .tiered_reads import tiered_log_directory

    if args.files or args.topic is None or args.partition is None:
        raise UsageError("dump --log-dir takes --topic and --partition, and no files")
    tp = TopicPartition(args.topic, args.partition)
    directory = tiered_log_directory(args, args.log_dir)
    if not directory.fs.isdir(directory.partition_dir(tp)):
        raise CommandError(f"{args.log_dir} has no partition {tp}")
    decoder = format_record if args.transaction_log_decoder or tp.topic == TRANSACTION_STATE_TOPIC else None
    corrupt = False
    listed = directory.segments(tp)
    for i, segment in enumerate(listed):
        location = directory.location(tp, segment)
        # A remote segment is dumped where the log reads it: from the first offset it serves (past the end of
        # a segment before that it overlaps) up to the next segment.
        served = {} if segment.remote is None else {
            "from_offset": segment.base_offset, "until_offset": listed[i + 1].base_offset if i + 1 < len(listed)
            else None}
        try:
            with directory.reader(tp, segment) as reader:
                result = dump_segment(reader, location, print_data=args.print_data_log, decoder=decoder, **served)
        except FileNotFoundError:
            raise CommandError(f"{location} is missing (segment {segment.base_offset} of {tp}, "
                               f"{segment.tier} tier)") from None
        for line in result.lines:
            print(line)
        corrupt |= result.corrupt
    return 1 if corrupt else 0


def _reset_plan(args: argparse.Namespace, broker) -> dict:
    """The new offset of each partition asked for, clamped to its log as Kafka's tool clamps it."""
    from format.layout import TopicPartition

    if not (args.to_earliest or args.to_latest or args.to_offset is not None):
        raise UsageError("groups reset-offsets needs --to-earliest, --to-latest or --to-offset")
    partitions: list[TopicPartition] = []
    if args.all_topics:
        partitions = sorted(broker.committed_offsets(args.group))
    for spec in args.topic or ():
        # "topic" or Kafka's "topic:0,2" for some partitions only.
        name, _, listed = spec.partition(":")
        count = broker.partitions_for(name)
        try:
            numbers = [int(p) for p in listed.split(",")] if listed else range(count)
        except ValueError:
            raise UsageError(f"--topic {spec}: give a topic, or a topic and its partitions as topic:0,2") from None
        partitions.extend(TopicPartition(name, p) for p in numbers)
    if not partitions:
        raise UsageError("groups reset-offsets needs --topic or --all-topics")
    plan = {}
    for tp in partitions:
        start = broker.list_offsets(tp.topic, tp.partition, "earliest").offset
        end = broker.list_offsets(tp.topic, tp.partition, "latest").offset
        if args.to_earliest:
            plan[tp] = start
        elif args.to_latest:
            plan[tp] = end
        else:
            plan[tp] = min(max(args.to_offset, start), end)
            if plan[tp] != args.to_offset:
                side = "lower than the earliest" if args.to_offset < start else "higher than the latest"
                print(f"WARN: New offset ({args.to_offset}) is {side} offset for topic partition {tp}. "
                      f"Value will be set to {plan[tp]}", file=sys.stderr)
    return plan


def _assignment_text(partitions) -> str:
    by_topic: dict[str, list[str]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(str(tp.partition))
    return ",".join(f"{topic}({','.join(ps)})" for topic, ps in by_topic.items()) or None


def _print_group(description, args: argparse.Namespace) -> None:
    """``kafka-consumer-groups.sh --describe`` (default, ``--members`` or ``--state``) for one group."""
    from format.layout import TopicPartition

    d = description
    if args.state:
        print("\n" + "\n".join(aligned([("GROUP", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"),
                                        (d.group, d.protocol or None, d.state, len(d.members))])))
        return
    if not d.members:
        print(f"\nConsumer group '{d.group}' has no active members.")
    if args.members:
        print("\n" + "\n".join(aligned([("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT")]
                                        + [(d.group, m.member_id, m.client_host, m.client_id, len(m.assignment),
                                            _assignment_text(m.assignment)) for m in d.members])))
        return
    rows: list[tuple] = [("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
                          "HOST", "CLIENT-ID")]
    for r in d.partitions:
        owner = d.owner(TopicPartition(r.topic, r.partition))
        rows.append((d.group, r.topic, r.partition, r.current_offset, r.log_end_offset, r.lag,
                     *((owner.member_id, owner.client_host, owner.client_id) if owner else (None, None, None))))
    # A member that owns nothing still shows, as in Kafka's tool.
    rows.extend((d.group, None, None, None, None, None, m.member_id, m.client_host, m.client_id)
                for m in d.members if not m.assignment)
    print("\n" + "\n".join(aligned(rows)))


def _groups(args: argparse.Namespace) -> int:
    from .. import group_offsets

    if args.action != "list" and not args.group:
        raise UsageError(f"groups {args.action} needs --group")
    if args.action == "list":
        if args.bootstrap:
            with open_broker(args) as broker:
                groups = broker.list_groups()
        else:
            # Reading needs no lock: this works beside a running broker.
            groups = group_offsets.list_groups(args.log_dir)
        for group in groups:
            print(group)
    elif args.action == "describe":
        if args.bootstrap:
            with open_broker(args) as broker:
                description = broker.describe_group(args.group)
        else:
            # The members of the generation last written to __consumer_offsets.
            description = group_offsets.describe_consumer_group(args.log_dir, args.group)
        _print_group(description, args)
    elif args.action == "reset-offsets":
        if args.execute and args.dry_run:
            raise UsageError("--execute and --dry-run exclude each other")
        with open_broker(args, read_only=not args.execute) as broker:
            plan = _reset_plan(args, broker)
            if args.execute:
                broker.reset_offsets(args.group, plan)  # a running broker refuses while the group has members
            elif not args.dry_run:
                print("WARN: No action will be performed as the --execute option is missing.", file=sys.stderr)
        print("\n".join(aligned([("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")]
                                + [(args.group, tp.topic, tp.partition, offset) for tp, offset in plan.items()])))
    elif args.action == "delete":
        with open_broker(args) as broker:
            broker.delete_group(args.group)
        print(f"Deletion of requested consumer groups ('{args.group}') was successful.")
    return 0


def _sql(args: argparse.Namespace) -> int:
    from connector.sql_shell import run_spark_sql  # the Spark side; it starts spark-sql, imports no Spark

    return run_spark_sql(args.spark_sql_args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="seglog", description="A Kafka-compatible commit log that Spark reads.")
    commands = parser.add_subparsers(dest="command", required=True)

    def with_log_dir(p: argparse.ArgumentParser) -> None:
        where = p.add_mutually_exclusive_group(required=True)
        where.add_argument("--log-dir", action="append", help="a log directory of the broker (repeat for several)")
        where.add_argument("--bootstrap", metavar="HOST:PORT", help="a running broker to ask instead of a log dir")
        add_command_config_argument(p)
        p.add_argument("--broker-config", action="append", metavar="KEY=VALUE",
                       help="a broker setting, e.g. num.partitions=3")

    def with_reporting_interval(p: argparse.ArgumentParser) -> None:
        p.add_argument("--reporting-interval", type=non_negative, default=DEFAULT_REPORTING_INTERVAL_MS, metavar="MS",
                       help=f"a progress line on standard error every MS ms (default "
                            f"{DEFAULT_REPORTING_INTERVAL_MS}; 0: none)")

    topics = commands.add_parser("topics", help="create, list, describe, delete or alter topics")
    topics.add_argument("action", choices=["create", "list", "describe", "delete", "alter"])
    with_log_dir(topics)
    topics.add_argument("--topic")
    topics.add_argument("--partitions", type=int)
    topics.add_argument("--replication-factor", type=int, help="replicas of each partition (a cluster, with "
                                                                "--bootstrap; default default.replication.factor)")
    topics.add_argument("--config", action="append", metavar="KEY=VALUE", help="a topic setting (repeatable)")
    topics.add_argument("--delete-config", action="append", metavar="KEY", help="remove a topic override")
    only = topics.add_mutually_exclusive_group()
    only.add_argument("--under-replicated-partitions", action="store_true",
                      help="describe: only the partitions whose ISR is smaller than their replicas")
    only.add_argument("--unavailable-partitions", action="store_true",
                      help="describe: only the partitions without a live leader")
    topics.set_defaults(run=_topics)

    produce = commands.add_parser("produce", help="produce the lines of standard input")
    with_log_dir(produce)
    produce.add_argument("--topic", required=True)
    produce.add_argument("--partition", type=int)
    produce.add_argument("--key-separator", help="split each line into key and value at this string")
    produce.add_argument("--batch-size", type=int, default=500, help="records per batch")
    with_reporting_interval(produce)
    produce.set_defaults(run=_produce)

    consume = commands.add_parser("consume", help="print records of a topic")
    with_log_dir(consume)
    consume.add_argument("--topic", required=True)
    consume.add_argument("--from-beginning", action="store_true")
    consume.add_argument("--partition", type=int)
    consume.add_argument("--offset", type=int)
    consume.add_argument("--max-messages", type=int, default=-1,
                         help="stop after this many messages (default -1: no limit)")
    consume.add_argument("--timeout-ms", type=non_negative,
                         help="stop when no message came for this long (default: follow until interrupted)")
    consume.add_argument("--isolation-level", choices=("read_uncommitted", "read_committed"),
                         default="read_uncommitted",
                         help="read_committed: only committed transactions, up to the last stable offset")
    consume.add_argument("--print-key", action="store_true")
    consume.add_argument("--key-separator", default="\t")
    add_remote_tier_arguments(consume)
    with_reporting_interval(consume)
    consume.set_defaults(run=_consume)

    dump = commands.add_parser("dump", help="print the batches of .log files and the entries of index and "
                                          "producer snapshot files")
    dump.add_argument("files", nargs="*", help=".log, .index, .timeindex, .txnindex or .snapshot files")
    dump.add_argument("--log-dir", help="dump a partition of this log dir instead: every segment, the remote "
                                        "tier's first (with --topic and --partition)")
    dump.add_argument("--topic")
    dump.add_argument("--partition", type=int)
    dump.add_argument("--print-data-log", action="store_true", help="print every record, not only batch headers")
    dump.add_argument("--transaction-log-decoder", action="store_true",
                      help="decode records as __transaction_state's (the default for that topic's segments)")
    add_remote_tier_arguments(dump)
    dump.set_defaults(run=_dump)

    groups = commands.add_parser("groups", help="list, describe, reset the offsets of or delete consumer groups")
    groups.add_argument("action", choices=["list", "describe", "reset-offsets", "delete"])
    with_log_dir(groups)
    groups.add_argument("--group")
    groups.add_argument("--topic", action="append", metavar="TOPIC[:P,...]",
                        help="reset-offsets: a topic, optionally some partitions (repeatable)")
    groups.add_argument("--all-topics", action="store_true", help="reset-offsets: every topic the group committed")
    target = groups.add_mutually_exclusive_group()
    target.add_argument("--to-earliest", action="store_true")
    target.add_argument("--to-latest", action="store_true")
    target.add_argument("--to-offset", type=int, metavar="N")
    groups.add_argument("--execute", action="store_true", help="reset-offsets: apply the plan (else a dry run)")
    groups.add_argument("--dry-run", action="store_true", help="reset-offsets: only print the plan")
    shown = groups.add_mutually_exclusive_group()
    shown.add_argument("--members", action="store_true", help="describe: the members and their assignments")
    shown.add_argument("--state", action="store_true", help="describe: the group's state and assignor")
    groups.set_defaults(run=_groups)

    from .broker_command import add_broker_parser
    add_broker_parser(commands)

    # Every argument after "sql" is spark-sql's ("+" as the prefix keeps argparse off them).
    sql = commands.add_parser("sql", prefix_chars="+", help="the spark-sql shell with seglog's source, from any "
                              "directory", usage="seglog sql [--metastore DIR] [spark-sql arguments: -e SQL, "
                              "-f FILE, -d NAME=VALUE, --conf KEY=VALUE ...]")
    sql.add_argument("spark_sql_args", nargs=argparse.REMAINDER)
    sql.set_defaults(run=_sql)

    from .compact_command import add_parser as add_compact_parser
    add_compact_parser(commands)

    from .transactions_command import add_parser as add_transactions_parser
    add_transactions_parser(commands, with_log_dir)

    from .cluster_command import add_parser as add_cluster_parser
    add_cluster_parser(commands)

    from .acls_command import add_parser as add_acls_parser
    add_acls_parser(commands)

    from .users_command import add_parser as add_users_parser
    add_users_parser(commands)

    from .tables_command import add_parser as add_tables_parser
    add_tables_parser(commands, with_log_dir)
    return parser


def report_error(command: str, exc: BaseException) -> int:
    """Print ``exc`` as one line on standard error (after its traceback with SEGLOG_DEBUG set) and
    return the exit code: 2 for a command line that cannot work, else 1."""
    from format.errors import FormatError

    from ..errors import KafkaError

    if os.environ.get(DEBUG_ENV):
        traceback.print_exception(exc)
    if isinstance(exc, UsageError):
        print(f"seglog {command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if isinstance(exc, CommandError):
        print(f"seglog {command}: {exc}", file=sys.stderr)
        return exc.exit_code
    if isinstance(exc, (KafkaError, FormatError, ValueError, OSError)):
        print(f"seglog {command}: {error_message(exc)}", file=sys.stderr)
    else:
        print(f"seglog {command}: unexpected error: {error_message(exc)} (run with {DEBUG_ENV}=1 for the "
              f"traceback)", file=sys.stderr)
    return EXIT_ERROR


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "topics" and args.action != "list" and not args.topic and args.action != "describe":
        parser.error(f"topics {args.action} needs --topic")
    try:
        return args.run(args)
    except BrokenPipeError:
        # The reader went away (``seglog consume … | head``): nothing more to say, and nothing to flush.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print(f"seglog {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except OSError as exc:
        if _is_socket_error(args, exc):
            reached, exc = exc, CommandError(_failure_text(args, exc))
            exc.__cause__ = reached
        return report_error(args.command, exc)
    except Exception as exc:  # one line for people; the traceback only when asked for
        return report_error(args.command, exc)
