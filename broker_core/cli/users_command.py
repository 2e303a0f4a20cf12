"""``seglog users add|delete|list``: the SCRAM users a broker authenticates (SASL/SCRAM-SHA-256, -512, and
PLAIN, which checks passwords against the same credentials).

With ``--bootstrap`` (``--command-config FILE`` for a secured listener) the command asks a running broker
(AlterUserScramCredentials, DescribeUserScramCredentials, as ``kafka-configs.sh --entity-type users`` does);
with ``--log-dir`` it changes the credentials file of log dirs no broker runs on (it takes their lock, so a running broker
is reached through ``--bootstrap`` instead; in cluster mode the credentials live in etcd, reached
through any broker). The password is salted here (PBKDF2, a fresh random salt) and only the salted
form leaves the command; without ``--password`` it is read from the first line of standard input.
"""

from __future__ import annotations

import argparse
import os
import sys
from contextlib import ExitStack
from typing import Any

from ..client.client_security import ClientSecurity
from ..errors import LogDirInUseError, error_for_code
from ..protocol import ApiKey
from ..security import scram
from ..security.credential_admin import (alter_user_scram_credentials, deletion, describe_user_scram_credentials,
                                         upsertion)
from ..security.scram import ScramMechanism
from .arguments import CommandError, UsageError
from .broker_access import add_command_config_argument
from .tables import aligned

DEFAULT_MECHANISM = ScramMechanism.SCRAM_SHA_512


class _LogDirs:
    """The credentials file of log dirs no broker holds."""

    def __init__(self, log_dirs: list[str]) -> None:
        self.log_dirs = log_dirs

    def alter(self, body: dict[str, Any]) -> dict[str, Any]:
        from ..log.log_manager import LogDirLock
        from ..security.credential_file import FileCredentialStore

        with ExitStack() as locks:
            for d in self.log_dirs:
                os.makedirs(d, exist_ok=True)  # users may be set up before the broker's first start
                try:
                    locks.callback(LogDirLock(d).release)
                except LogDirInUseError as exc:
                    raise CommandError(f"{exc}: change the users of a running broker with --bootstrap") from exc
            return alter_user_scram_credentials(FileCredentialStore(self.log_dirs), body)

    def describe(self, body: dict[str, Any]) -> dict[str, Any]:
        from ..security.credential_file import read_credentials
        from ..security.credential_store import InMemoryCredentialStore

        return describe_user_scram_credentials(InMemoryCredentialStore(read_credentials(self.log_dirs)[1]), body)


class _Broker:
    """A running broker, through the Kafka protocol."""

    def __init__(self, bootstrap: str, security: ClientSecurity) -> None:
        self.bootstrap = bootstrap
        self.security = security

    def _send(self, api_key: ApiKey, body: dict[str, Any]) -> dict[str, Any]:
        from ..client.protocol_client import ProtocolClient

        with ProtocolClient(self.bootstrap, client_id="seglog-cli", security=self.security) as client:
            return client.send(api_key, body)

    def alter(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._send(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, body)

    def describe(self, body: dict[str, Any]) -> dict[str, Any]:
        answer = self._send(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, body)
        if answer["error_code"]:
            raise error_for_code(answer["error_code"])(answer["error_message"] or "DescribeUserScramCredentials failed")
        return answer


def _where(args: argparse.Namespace) -> _LogDirs | _Broker:
    if args.bootstrap:
        return _Broker(args.bootstrap, ClientSecurity.from_file(args.command_config))
    return _LogDirs(args.log_dir)


def _check(results: list[dict[str, Any]]) -> None:
    for result in results:
        if result["error_code"]:
            raise error_for_code(result["error_code"])(f"user {result['user']!r}: {result['error_message']}")


def _mechanism(name: str) -> ScramMechanism:
    mechanism = ScramMechanism.for_name(name)
    if mechanism is None:
        names = ", ".join(m.mechanism_name for m in ScramMechanism)
        raise argparse.ArgumentTypeError(f"{name!r} is not a SCRAM mechanism ({names}); PLAIN users are the SCRAM users")
    return mechanism


def _add(args: argparse.Namespace) -> int:
    password = args.password
    if password is None:
        password = sys.stdin.readline().rstrip("\n")
    if not password:
        raise UsageError("the password is empty (give --password, or the password on standard input)")
    body = {"deletions": [], "upsertions": [upsertion(args.user, args.mechanism, password, args.iterations)]}
    _check(_where(args).alter(body)["results"])
    print(f"Completed updating config for user {args.user} ({args.mechanism}, {args.iterations} iterations).")
    return 0


def _delete(args: argparse.Namespace) -> int:
    where = _where(args)
    if args.mechanism is not None:
        mechanisms = [args.mechanism]
    else:
        described = where.describe({"users": [{"name": args.user}]})["results"]
        _check(described)
        mechanisms = [ScramMechanism.for_type(info["mechanism"]) for info in described[0]["credential_infos"]]
    for mechanism in mechanisms:  # Kafka takes one change per user and request
        _check(where.alter({"deletions": [deletion(args.user, mechanism)], "upsertions": []})["results"])
    print(f"Completed updating config for user {args.user} (deleted {', '.join(map(str, mechanisms))}).")
    return 0


def _list(args: argparse.Namespace) -> int:
    results = _where(args).describe({"users": [{"name": u} for u in args.user] if args.user else None})["results"]
    _check(results)
    rows: list[tuple[object, ...]] = [("USER", "MECHANISM", "ITERATIONS")]
    for result in sorted(results, key=lambda r: r["user"]):
        for info in result["credential_infos"]:
            rows.append((result["user"], ScramMechanism.for_type(info["mechanism"]), info["iterations"]))
    for line in aligned(rows):
        print(line)
    return 0


def add_parser(commands) -> None:
    users = commands.add_parser("users", help="add, delete or list the SCRAM users SASL authenticates")
    actions = users.add_subparsers(dest="action", required=True)

    def where(p: argparse.ArgumentParser) -> None:
        group = p.add_mutually_exclusive_group(required=True)
        group.add_argument("--log-dir", action="append", help="a log directory no broker runs on (repeat for several)")
        group.add_argument("--bootstrap", metavar="HOST:PORT", help="a running broker")
        add_command_config_argument(p)

    add = actions.add_parser("add", help="add a user, or change a user's password")
    where(add)
    add.add_argument("--user", required=True)
    add.add_argument("--password", help="the password (default: the first line of standard input)")
    add.add_argument("--mechanism", type=_mechanism, default=DEFAULT_MECHANISM,
                     help=f"SCRAM-SHA-256 or SCRAM-SHA-512 (default {DEFAULT_MECHANISM})")
    add.add_argument("--iterations", type=int, default=scram.MIN_ITERATIONS,
                     help=f"PBKDF2 iterations, {scram.MIN_ITERATIONS} to {scram.MAX_ITERATIONS} "
                          f"(default {scram.MIN_ITERATIONS})")
    add.set_defaults(run=_add)

    delete = actions.add_parser("delete", help="delete a user's credentials")
    where(delete)
    delete.add_argument("--user", required=True)
    delete.add_argument("--mechanism", type=_mechanism, help="only this mechanism's credential (default: all)")
    delete.set_defaults(run=_delete)

    list_ = actions.add_parser("list", help="the users, their mechanisms and iterations")
    where(list_)
    list_.add_argument("--user", action="append", help="only this user (repeat for several)")
    list_.set_defaults(run=_list)
