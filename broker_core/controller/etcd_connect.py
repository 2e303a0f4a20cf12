"""``etcd.connect``: where the cluster's metadata lives, in ``zookeeper.connect``'s form.

``host:port[,host:port...][/chroot]``: the endpoints of one etcd cluster and an
optional path every key is kept under, so several seglog clusters can share
one etcd as several Kafka clusters shared one ZooKeeper. Parsed as ZooKeeper's
``ConnectStringParser`` does: the chroot starts at the first ``/``; ``/`` alone
means none; a port may be left out (etcd's client port, 2379); the chroot must
be a valid path (no trailing ``/``, no empty, ``.`` or ``..`` segment).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InvalidConfigurationError

__all__ = ["DEFAULT_ETCD_PORT", "EtcdConnect", "parse_etcd_connect"]

DEFAULT_ETCD_PORT = 2379
_CONFIG = "etcd.connect"


@dataclass(frozen=True)
class EtcdConnect:
    """The parsed ``etcd.connect``: endpoints in the order given, and the chroot (``""`` for none)."""

    endpoints: tuple[tuple[str, int], ...]
    chroot: str = ""

    def __str__(self) -> str:
        return ",".join(f"{host}:{port}" for host, port in self.endpoints) + self.chroot


def _invalid(value: str, reason: str) -> InvalidConfigurationError:
    return InvalidConfigurationError(f"Invalid value {value} for configuration {_CONFIG}: {reason}",
                                     config_name=_CONFIG, value=value)


def _check_chroot(value: str, chroot: str) -> None:
    if chroot.endswith("/"):
        raise _invalid(value, f"chroot {chroot} must not end with /")
    for segment in chroot[1:].split("/"):
        if segment in ("", ".", ".."):
            raise _invalid(value, f"chroot {chroot} has an empty, '.' or '..' segment")


def parse_etcd_connect(value: str) -> EtcdConnect:
    """Parse ``host:port[,host:port...][/chroot]``; raises InvalidConfigurationError naming the value."""
    text = value.strip()
    hosts, slash, chroot = text.partition("/")
    chroot = slash + chroot
    if chroot == "/":
        chroot = ""
    if chroot:
        _check_chroot(value, chroot)
    endpoints = []
    for entry in hosts.split(","):
        entry = entry.strip()
        if not entry:
            raise _invalid(value, "an empty host")
        host, colon, port = entry.rpartition(":")
        if not colon:
            host, port = entry, str(DEFAULT_ETCD_PORT)
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        if not host:
            raise _invalid(value, f"no host in {entry!r}")
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise _invalid(value, f"port {port!r} of {entry!r} is not a number between 1 and 65535")
        endpoints.append((host, int(port)))
    return EtcdConnect(tuple(endpoints), chroot)
