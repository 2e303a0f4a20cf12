"""The broker a command works through: a running broker (``--bootstrap``) or the log dirs
opened as an embedded broker (``--log-dir``), both answering ``BrokerApi``."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ..key_values import parse_key_values

if TYPE_CHECKING:
    from ..broker_api import BrokerApi


def open_broker(args: argparse.Namespace, read_only: bool = False) -> BrokerApi:
    """The broker of ``--bootstrap``, else the log dirs opened as an embedded broker."""
    from ..broker import Broker

    if getattr(args, "bootstrap", None):
        # A running broker holds the log dir's lock: talk to it instead.
        from ..client.remote_broker import RemoteBroker

        return RemoteBroker(args.bootstrap)
    props = parse_key_values(getattr(args, "broker_config", None), "--broker-config")
    # Reading commands never lock, create or change the log dir: they work beside a running broker.
    return Broker(args.log_dir, props, background=False, read_only=read_only)
