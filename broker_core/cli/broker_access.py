"""The broker a command works through: a running broker (``--bootstrap``) or the log dirs
opened as an embedded broker (``--log-dir``), both answering ``BrokerApi``."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ..key_values import parse_key_values

if TYPE_CHECKING:
    from ..broker_api import BrokerApi


def add_command_config_argument(parser: argparse.ArgumentParser) -> None:
    """``--command-config FILE``: Kafka client properties for a secured listener, as Kafka's tools take them."""
    parser.add_argument("--command-config", metavar="FILE",
                        help="client properties for --bootstrap (security.protocol, ssl.truststore.location, "
                             "sasl.mechanism, sasl.jaas.config, ...)")


def open_broker(args: argparse.Namespace, read_only: bool = False) -> BrokerApi:
    """The broker of ``--bootstrap``, else the log dirs opened as an embedded broker."""
    from ..broker import Broker

    if getattr(args, "bootstrap", None):
        # A running broker holds the log dir's lock: talk to it instead.
        from ..client.client_security import ClientSecurity
        from ..client.remote_broker import RemoteBroker

        return RemoteBroker(args.bootstrap, ClientSecurity.from_file(getattr(args, "command_config", None)))
    props = parse_key_values(getattr(args, "broker_config", None), "--broker-config")
    # Reading commands never lock, create or change the log dir: they work beside a running broker.
    return Broker(args.log_dir, props, background=False, read_only=read_only)
