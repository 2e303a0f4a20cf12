"""``seglog transactions list|describe|describe-producers``: Kafka's ``kafka-transactions.sh``, with the
same columns.

    seglog transactions list (--log-dir D | --bootstrap H:P) [--state-filter S]... [--producer-id-filter P]...
                             [--duration-filter MS] [--transactional-id-pattern REGEX]
    seglog transactions describe (--log-dir D | --bootstrap H:P) --transactional-id T
    seglog transactions describe-producers (--log-dir D | --bootstrap H:P) --topic T --partition P

With ``--bootstrap`` the running broker's transaction coordinator answers
(ListTransactions, FindCoordinator and DescribeTransactions), and the
partition's producer state DescribeProducers; with ``--log-dir`` the log dir
is opened read-only, ``__transaction_state`` is replayed by the coordinator's
own loader and a partition's producer state rebuilt as a start rebuilds it —
what the owner had written when the command started, beside a running broker too.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Sequence

from ..clock import SYSTEM_CLOCK
from .arguments import UsageError
from .broker_access import open_broker

LIST_HEADERS = ("TransactionalId", "Coordinator", "ProducerId", "TransactionState")
DESCRIBE_HEADERS = ("CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                    "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                    "TopicPartitions")
DESCRIBE_PRODUCERS_HEADERS = ("ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
                              "LastTimestamp", "CurrentTransactionStartOffset")


def pretty_print_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    """Kafka's ``ToolsUtils.prettyPrintTable``: each cell padded to its column's width, then a tab."""
    cells = [[str(c) for c in row] for row in [headers, *rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return ["".join(c.ljust(w) + "\t" for c, w in zip(row, widths)) for row in cells]


def _list(broker, args: argparse.Namespace) -> list[str]:
    from ..coordinator.transaction import ListTransactionsRequest

    try:
        pattern = re.compile(args.transactional_id_pattern) if args.transactional_id_pattern else None
    except re.error as exc:
        raise UsageError(f"--transactional-id-pattern {args.transactional_id_pattern!r}: {exc}") from None
    listings = broker.list_transactions(ListTransactionsRequest(
        state_filters=tuple(args.state_filter or ()), producer_id_filters=tuple(args.producer_id_filter or ()),
        duration_filter_ms=args.duration_filter))
    coordinator = broker.node_id
    return pretty_print_table(LIST_HEADERS, [
        (t.transactional_id, coordinator, t.producer_id, t.state) for t in listings
        if pattern is None or pattern.fullmatch(t.transactional_id)])


def _describe(broker, args: argparse.Namespace) -> list[str]:
    coordinator = broker.find_transaction_coordinator(args.transactional_id)
    d = broker.describe_transaction(args.transactional_id)
    if d.transaction_start_time_ms >= 0:
        start, duration = str(d.transaction_start_time_ms), str(SYSTEM_CLOCK.milliseconds() -
                                                                 d.transaction_start_time_ms)
    else:
        start = duration = "None"
    return pretty_print_table(DESCRIBE_HEADERS, [(
        coordinator, d.transactional_id, d.producer_id, d.producer_epoch, d.state, d.transaction_timeout_ms,
        start, duration, ",".join(str(tp) for tp in d.partitions))])


def _describe_producers(broker, args: argparse.Namespace) -> list[str]:
    producers = broker.describe_producers(args.topic, args.partition)
    return pretty_print_table(DESCRIBE_PRODUCERS_HEADERS, [(
        p.producer_id, p.producer_epoch, p.coordinator_epoch, p.last_sequence, p.last_timestamp,
        "None" if p.current_txn_start_offset < 0 else p.current_txn_start_offset) for p in producers])


_ACTIONS = {"list": _list, "describe": _describe, "describe-producers": _describe_producers}


def run(args: argparse.Namespace) -> int:
    if args.action == "describe" and not args.transactional_id:
        raise UsageError("transactions describe needs --transactional-id")
    if args.action == "describe-producers" and (args.topic is None or args.partition is None):
        raise UsageError("transactions describe-producers needs --topic and --partition")
    with open_broker(args, read_only=True) as broker:
        lines = _ACTIONS[args.action](broker, args)
    sys.stdout.write("".join(line + "\n" for line in lines))
    return 0


def add_parser(commands, with_log_dir) -> None:
    transactions = commands.add_parser("transactions", help="list or describe transactions, describe the "
                                                            "producers of a partition (as kafka-transactions.sh)")
    transactions.add_argument("action", choices=list(_ACTIONS))
    with_log_dir(transactions)
    transactions.add_argument("--transactional-id", help="describe: the transactional id")
    transactions.add_argument("--topic", help="describe-producers: the topic")
    transactions.add_argument("--partition", type=int, help="describe-producers: the partition")
    transactions.add_argument("--state-filter", action="append", metavar="STATE",
                              help="list: only transactions in this state, e.g. Ongoing (repeatable)")
    transactions.add_argument("--producer-id-filter", action="append", type=int, metavar="ID",
                              help="list: only transactions of this producer id (repeatable)")
    transactions.add_argument("--duration-filter", type=int, default=-1, metavar="MS",
                              help="list: only transactions running longer than MS ms (default -1: all)")
    transactions.add_argument("--transactional-id-pattern", metavar="REGEX",
                              help="list: only transactional ids the regular expression matches entirely")
    transactions.set_defaults(run=run)
