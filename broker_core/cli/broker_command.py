"""``seglog broker``: serve a log directory to Kafka clients (Kafka's ``kafka-server-start.sh``).

    seglog broker --log-dir D [--log-dir D2] --listeners PLAINTEXT://127.0.0.1:9092
                  [--advertised-listeners PLAINTEXT://host:9092] [--node-id N] [--config key=value ...]
                  [--metrics-listener http://127.0.0.1:9404]

The broker runs in the foreground until SIGTERM or SIGINT, then shuts down
gracefully: requests in flight are answered, logs are flushed and the
clean-shutdown marker is written. Settings take Kafka's broker names
(``num.partitions``, ``log.retention.hours``, ``socket.request.max.bytes`` ...);
the flags win over the same keys given with ``--config``.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading

from ..key_values import parse_key_values

DEFAULT_LISTENERS = "PLAINTEXT://127.0.0.1:9092"


def broker_props(args: argparse.Namespace) -> dict[str, str]:
    """The broker's properties from the command line: ``--config`` pairs, then the flags over them."""
    props = parse_key_values(args.config)
    props["log.dirs"] = ",".join(args.log_dir)
    if args.listeners is not None or "listeners" not in props:
        props["listeners"] = args.listeners or DEFAULT_LISTENERS
    if args.advertised_listeners is not None:
        props["advertised.listeners"] = args.advertised_listeners
    if args.node_id is not None:
        props["node.id"] = str(args.node_id)
    if args.metrics_listener is not None:
        props["metrics.listener"] = args.metrics_listener
    return props


def run_broker(args: argparse.Namespace) -> int:
    from ..config import BrokerConfig
    from ..server.allocator import retain_freed_buffers
    from ..network.listener_config import is_listener_config
    from ..server.broker_server import SERVER_CONFIG_NAMES, BrokerServer

    logging.basicConfig(level=getattr(logging, args.log_level), stream=sys.stderr,
                        format="[%(asctime)s] %(levelname)s %(message)s (%(name)s)")
    config = BrokerConfig.from_props(broker_props(args))
    for key in sorted(k for k in set(config.extra) - SERVER_CONFIG_NAMES if not is_listener_config(k)):
        logging.getLogger(__name__).warning("The configuration '%s' was supplied but isn't a known config.", key)
    stop = threading.Event()
    # The handlers only set a flag: shutting down from a signal handler would
    # run in the middle of whatever the main thread was doing.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    retain_freed_buffers()  # the process is the broker's alone: fetch buffers are reused, not mapped afresh
    server = BrokerServer(config).startup()
    endpoints = ", ".join(e.connection_string for e in server.bound_endpoints)
    metrics = f"; metrics on {server.metrics_listener.url}/metrics" if server.metrics_listener is not None else ""
    print(f"seglog broker {config.node_id} started (cluster {server.cluster_id}) on {endpoints}{metrics}",
          file=sys.stderr, flush=True)
    try:
        while not stop.wait(1.0):
            pass
    finally:
        server.shutdown()
    print(f"seglog broker {config.node_id} shut down", file=sys.stderr, flush=True)
    return 0


def add_broker_parser(commands: argparse._SubParsersAction) -> None:
    """Register ``seglog broker`` on the ``seglog`` command's subparsers."""
    broker = commands.add_parser("broker", help="serve the log dirs to Kafka clients over the Kafka protocol")
    broker.add_argument("--log-dir", required=True, action="append",
                        help="a log directory of the broker (repeat for several)")
    broker.add_argument("--listeners", help=f"where to listen, NAME://host:port[,...] (default {DEFAULT_LISTENERS})")
    broker.add_argument("--advertised-listeners", help="what clients are told to connect to, if not --listeners")
    broker.add_argument("--node-id", type=int, help="this broker's node.id (default 0)")
    broker.add_argument("--metrics-listener", metavar="http://HOST:PORT",
                        help="serve Prometheus metrics (/metrics) and health (/healthz, /readyz) there "
                             "(metrics.listener; port 0 picks one; default: none)")
    broker.add_argument("--config", action="append", metavar="KEY=VALUE",
                        help="a broker setting under Kafka's name, e.g. num.partitions=3 (repeatable)")
    broker.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    broker.set_defaults(run=run_broker)
