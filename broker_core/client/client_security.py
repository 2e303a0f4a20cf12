"""How seglog's own client reaches a secured listener: Kafka client properties, as ``--command-config FILE``.

The file is the one Kafka's tools take (``kafka-topics.sh --command-config``)::

    security.protocol=SASL_SSL
    ssl.truststore.type=PEM
    ssl.truststore.location=/etc/kafka/ca.pem
    sasl.mechanism=SCRAM-SHA-512
    sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p";

``ClientSecurity.from_props`` reads it once: the TLS context (``ssl.*``,
PEM stores; ``ssl.keystore.location`` for a client certificate) and the SASL
mechanism with the username and password of ``sasl.jaas.config`` (``ScramLoginModule`` or
``PlainLoginModule``). ``connect`` opens a socket to a broker the way the
protocol says; ``ProtocolClient`` authenticates it with SASL after ApiVersions.
"""

from __future__ import annotations

import re
import socket
import ssl
from dataclasses import dataclass, field
from typing import Mapping

from ..errors import InvalidConfigurationError

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
DEFAULT_SASL_MECHANISM = "GSSAPI"  # Kafka's default; seglog's client speaks PLAIN and SCRAM
_JAAS = re.compile(r"^\s*(?P<module>[\w.$]+)\s+(?P<flag>required|requisite|sufficient|optional)(?P<options>.*?);?\s*$",
                   re.DOTALL)
# A key ends at the first '=', ':' or blank (Java's Properties.load).
_PROPERTY = re.compile(r"^(?P<key>[^=:\s]+)\s*(?:[=:]|\s)\s*(?P<value>.*)$")
_JAAS_OPTION = re.compile(r'(?P<key>[\w.]+)\s*=\s*(?:"(?P<quoted>(?:[^"\\]|\\.)*)"|(?P<bare>[^\s;]+))')


def _invalid(key: str, value: object, reason: str) -> InvalidConfigurationError:
    return InvalidConfigurationError(f"Invalid value {value} for configuration {key}: {reason}",
                                     config_name=key, value=value)


def read_client_properties(path: str) -> dict[str, str]:
    """A Java properties file (``key=value`` or ``key: value``; ``#`` and ``!`` comments; a line ending in
    a backslash goes on) as a dict; a line with no key is refused with its file and line number."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as exc:
        raise InvalidConfigurationError(f"Cannot read the client properties file {path}: {exc.strerror}",
                                        config_name="--command-config", value=path) from exc
    props: dict[str, str] = {}
    pending = ""
    start = 0
    for number, line in enumerate(lines, 1):
        text = line.strip() if not pending else line.lstrip()
        if not pending:
            start = number
            if not text or text[0] in "#!":
                continue
        if text.endswith("\\") and not text.endswith("\\\\"):
            pending += text[:-1]
            continue
        text, pending = pending + text, ""
        match = _PROPERTY.match(text)
        if match is None:
            raise InvalidConfigurationError(f"{path}:{start}: expected key=value, got {text!r}",
                                            config_name="--command-config", value=path)
        props[match["key"]] = match["value"].strip()
    return props


def parse_jaas_config(text: str, key: str = "sasl.jaas.config") -> tuple[str, dict[str, str]]:
    """``Module required k="v" ...;`` → (module, options)."""
    match = _JAAS.match(text or "")
    if match is None:
        raise _invalid(key, "(hidden)", "expected 'LoginModule required username=\"...\" password=\"...\";'")
    options = {m["key"]: (m["quoted"].replace('\\"', '"') if m["quoted"] is not None else m["bare"])
               for m in _JAAS_OPTION.finditer(match["options"])}
    return match["module"], options


@dataclass(frozen=True)
class ClientSecurity:
    """A client's security settings, read once; ``PLAINTEXT`` (the default) is the socket as it is."""

    security_protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = field(default=None, compare=False)
    sasl_mechanism: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    @classmethod
    def from_props(cls, props: Mapping[str, str]) -> ClientSecurity:
        protocol = (props.get("security.protocol") or "PLAINTEXT").strip().upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise _invalid("security.protocol", props.get("security.protocol"),
                           f"it must be one of {', '.join(SECURITY_PROTOCOLS)}")
        context = None
        if protocol in ("SSL", "SASL_SSL"):
            from ..security.ssl_factory import client_ssl_context

            context = client_ssl_context(props)
        if not protocol.startswith("SASL_"):
            return cls(protocol, context)
        mechanism = (props.get("sasl.mechanism") or DEFAULT_SASL_MECHANISM).strip().upper()
        if mechanism not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
            raise _invalid("sasl.mechanism", mechanism, "seglog's client speaks PLAIN, SCRAM-SHA-256 and "
                                                        "SCRAM-SHA-512")
        username, password = props.get("sasl.username"), props.get("sasl.password")
        if props.get("sasl.jaas.config"):
            _, options = parse_jaas_config(props["sasl.jaas.config"])
            username, password = options.get("username", username), options.get("password", password)
        if not username or password is None:
            raise _invalid("sasl.jaas.config", "(hidden)" if props.get("sasl.jaas.config") else None,
                           f"{protocol} needs a username and a password (username=\"...\" password=\"...\")")
        return cls(protocol, context, mechanism, username, password)

    @classmethod
    def from_file(cls, path: str | None) -> ClientSecurity:
        """``--command-config FILE``; no file: PLAINTEXT."""
        return cls() if not path else cls.from_props(read_client_properties(path))

    def connect(self, address: tuple[str, int], timeout_s: float) -> socket.socket:
        """A connected socket to ``address``, through TLS (handshake done) when the protocol says so."""
        sock = socket.create_connection(address, timeout=timeout_s)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.ssl_context is not None:
                return self.ssl_context.wrap_socket(sock, server_hostname=address[0])
        except BaseException:
            sock.close()
            raise
        return sock


PLAINTEXT_CLIENT = ClientSecurity()
