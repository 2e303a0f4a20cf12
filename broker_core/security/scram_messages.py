"""The four SCRAM messages (RFC 5802 section 7), read and written with Kafka's grammar (``ScramMessages``).

Each message is a frozen dataclass with ``to_bytes`` and a ``parse`` that takes the raw token and
raises ``ValueError`` for anything the grammar does not allow. Kafka offers no channel binding, so a
client's GS2 header is ``n,,`` or ``n,a=<authzid>,``; the client's final message repeats it, base64,
in ``c=``.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass, field

__all__ = ["ClientFirstMessage", "ServerFirstMessage", "ClientFinalMessage", "ServerFinalMessage", "auth_message"]

# Kafka's character classes: VALUE is 7-bit without ",", VALUE_SAFE also without "=", PRINTABLE is
# visible ASCII without ",", a SASLNAME escapes "," and "=" as =2C and =3D.
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"
_VALUE_SAFE = r"[\x01-\x2b\x2d-\x3c\x3e-\x7f]+"
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_BASE64 = r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{2}==)?"

_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"

_CLIENT_FIRST = re.compile(
    rf"(?P<gs2>n,(?:a=(?P<authzid>{_SASLNAME}))?,)"
    rf"(?P<bare>n=(?P<saslname>{_SASLNAME}),r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS}))")
_SERVER_FIRST = re.compile(
    rf"r=(?P<nonce>{_PRINTABLE}),s=(?P<salt>{_BASE64}),i=(?P<iterations>[0-9]{{1,9}}){_EXTENSIONS}")
_CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS}),p=(?P<proof>{_BASE64})")
_SERVER_FINAL = re.compile(rf"(?:e=(?P<error>{_VALUE_SAFE})|v=(?P<signature>{_BASE64})){_EXTENSIONS}")


def _text(token: bytes, what: str) -> str:
    try:
        return bytes(token).decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"Invalid SCRAM {what}: not UTF-8") from None


def _match(pattern: re.Pattern[str], token: bytes, what: str) -> re.Match[str]:
    found = pattern.fullmatch(_text(token, what))
    if found is None:
        raise ValueError(f"Invalid SCRAM {what} format")
    return found


def _b64decode(text: str) -> bytes:
    try:
        decoded = base64.b64decode(text, validate=True)
    except binascii.Error:
        raise ValueError(f"Invalid base64 {text!r}") from None
    # Only the canonical spelling: unused low bits set would let two different messages carry the same proof.
    if base64.b64encode(decoded).decode("ascii") != text:
        raise ValueError(f"Non-canonical base64 {text!r}")
    return decoded


@dataclass(frozen=True)
class ClientFirstMessage:
    """``n,[a=authzid],n=<saslname>,r=<client nonce>[,ext=value...]``."""

    saslname: str
    nonce: str
    authorization_id: str = ""
    extensions: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, token: bytes) -> ClientFirstMessage:
        found = _match(_CLIENT_FIRST, token, "client first message")
        extensions = dict(e.split("=", 1) for e in found["extensions"].split(",")[1:])
        return cls(found["saslname"], found["nonce"], found["authzid"] or "", extensions)

    @property
    def gs2_header(self) -> str:
        return f"n,{'a=' + self.authorization_id if self.authorization_id else ''},"

    @property
    def bare(self) -> str:
        """The message without its GS2 header: the first part of the auth message."""
        extensions = "".join(f",{k}={v}" for k, v in self.extensions.items())
        return f"n={self.saslname},r={self.nonce}{extensions}"

    def to_bytes(self) -> bytes:
        return (self.gs2_header + self.bare).encode("utf-8")


@dataclass(frozen=True)
class ServerFirstMessage:
    """``r=<client nonce + server nonce>,s=<salt>,i=<iterations>``."""

    nonce: str
    salt: bytes
    iterations: int

    @classmethod
    def parse(cls, token: bytes) -> ServerFirstMessage:
        found = _match(_SERVER_FIRST, token, "server first message")
        return cls(found["nonce"], _b64decode(found["salt"]), int(found["iterations"]))

    def to_text(self) -> str:
        return f"r={self.nonce},s={base64.b64encode(self.salt).decode('ascii')},i={self.iterations}"

    def to_bytes(self) -> bytes:
        return self.to_text().encode("ascii")


@dataclass(frozen=True)
class ClientFinalMessage:
    """``c=<base64 GS2 header>,r=<nonce>,p=<base64 proof>``."""

    channel_binding: bytes
    nonce: str
    proof: bytes
    #: The message up to ``,p=``: the last part of the auth message, exactly as the client sent it.
    without_proof: str

    @classmethod
    def parse(cls, token: bytes) -> ClientFinalMessage:
        found = _match(_CLIENT_FINAL, token, "client final message")
        return cls(_b64decode(found["channel"]), found["nonce"], _b64decode(found["proof"]), found["without_proof"])

    @classmethod
    def build(cls, channel_binding: bytes, nonce: str) -> ClientFinalMessage:
        """The message before its proof is known (``proof`` empty)."""
        return cls(channel_binding, nonce, b"", f"c={base64.b64encode(channel_binding).decode('ascii')},r={nonce}")

    def with_proof(self, proof: bytes) -> ClientFinalMessage:
        return ClientFinalMessage(self.channel_binding, self.nonce, proof, self.without_proof)

    def to_bytes(self) -> bytes:
        return f"{self.without_proof},p={base64.b64encode(self.proof).decode('ascii')}".encode("ascii")


@dataclass(frozen=True)
class ServerFinalMessage:
    """``v=<base64 server signature>``, or ``e=<error>`` when the server refuses."""

    server_signature: bytes | None
    error: str | None = None

    @classmethod
    def parse(cls, token: bytes) -> ServerFinalMessage:
        found = _match(_SERVER_FINAL, token, "server final message")
        if found["error"] is not None:
            return cls(None, found["error"])
        return cls(_b64decode(found["signature"]))

    def to_bytes(self) -> bytes:
        if self.error is not None:
            return f"e={self.error}".encode("ascii")
        assert self.server_signature is not None
        return f"v={base64.b64encode(self.server_signature).decode('ascii')}".encode("ascii")


def auth_message(client_first: ClientFirstMessage, server_first: ServerFirstMessage,
                 client_final: ClientFinalMessage) -> bytes:
    """RFC 5802's AuthMessage, what the proof and the server signature sign: the client's first message
    without its GS2 header, the server's first message, the client's final message without its proof."""
    return ",".join((client_first.bare, server_first.to_text(), client_final.without_proof)).encode("utf-8")
