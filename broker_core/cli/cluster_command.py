"""``seglog cluster --bootstrap HOST:PORT``: the cluster a running broker belongs to — its id, the live
brokers and which of them is the controller — as the broker answers DescribeCluster (every live broker
in cluster mode; the broker itself on a single broker)."""

from __future__ import annotations

import argparse

from ..client.client_security import PLAINTEXT_CLIENT, ClientSecurity
from ..client.protocol_client import ProtocolClient
from ..errors import error_for_code
from ..protocol import ApiKey
from .broker_access import add_command_config_argument
from .tables import aligned

NO_CONTROLLER = -1


def describe_cluster(bootstrap: str, security: ClientSecurity = PLAINTEXT_CLIENT) -> dict:
    """The DescribeCluster answer of the broker at ``bootstrap``; a Kafka error if it answered one."""
    with ProtocolClient(bootstrap, security=security) as client:
        answer = client.send(ApiKey.DESCRIBE_CLUSTER, {"include_cluster_authorized_operations": False})
    if answer["error_code"]:
        raise error_for_code(answer["error_code"])(answer.get("error_message") or f"{bootstrap}: DescribeCluster "
                                                                                 f"failed")
    return answer


def cluster_lines(answer: dict) -> list[str]:
    """The cluster id, the controller, then one line per broker (by id), columns aligned."""
    controller = answer["controller_id"]
    rows: list[tuple[object, ...]] = [("BROKER", "HOST", "PORT", "RACK", "CONTROLLER")]
    for b in sorted(answer["brokers"], key=lambda b: b["broker_id"]):
        rows.append((b["broker_id"], b["host"], b["port"], b["rack"], "yes" if b["broker_id"] == controller else ""))
    return [f"Cluster id: {answer['cluster_id']}",
            f"Controller: {'none' if controller == NO_CONTROLLER else controller}", "", *aligned(rows)]


def _run(args: argparse.Namespace) -> int:
    for line in cluster_lines(describe_cluster(args.bootstrap, ClientSecurity.from_file(args.command_config))):
        print(line)
    return 0


def add_parser(commands) -> None:
    cluster = commands.add_parser("cluster", help="the cluster a running broker belongs to: its id, the live "
                                                  "brokers and the controller")
    cluster.add_argument("--bootstrap", metavar="HOST:PORT", required=True, help="a running broker to ask")
    add_command_config_argument(cluster)
    cluster.set_defaults(run=_run)
