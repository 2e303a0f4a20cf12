"""SCRAM's arithmetic and its stored credential (RFC 5802, RFC 7677), as Kafka keeps it.

A user's ``ScramCredential`` per mechanism is what a broker stores — salt, stored key, server key,
iteration count — never the password. Kafka writes it as
``salt=<base64>,stored_key=<base64>,server_key=<base64>,iterations=<n>`` (``ScramCredentialUtils``);
``to_kafka_string`` / ``from_kafka_string`` read and write that form. The functions below are
Kafka's ``ScramFormatter``: the salted password (PBKDF2-HMAC), the client and server keys, proofs and
signatures over the auth message, and the escaping of user names in SCRAM messages.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from enum import Enum

__all__ = [
    "ScramMechanism",
    "ScramCredential",
    "MIN_ITERATIONS",
    "MAX_ITERATIONS",
    "salted_password",
    "client_key",
    "stored_key",
    "server_key",
    "client_proof",
    "server_signature",
    "recover_client_key",
    "sasl_name",
    "username_of",
    "new_nonce",
]

#: Kafka's lower bound on iterations for both mechanisms (``ScramMechanism.minIterations``).
MIN_ITERATIONS = 4096
#: Kafka's upper bound for credentials set through AlterUserScramCredentials (``maxIterations``).
MAX_ITERATIONS = 16384


class ScramMechanism(Enum):
    """The SCRAM mechanisms Kafka offers: mechanism name, hash, and the int8 the admin APIs send."""

    SCRAM_SHA_256 = ("SCRAM-SHA-256", "sha256", 1)
    SCRAM_SHA_512 = ("SCRAM-SHA-512", "sha512", 2)

    def __init__(self, mechanism_name: str, hash_name: str, type_id: int) -> None:
        self.mechanism_name = mechanism_name
        self.hash_name = hash_name
        self.type_id = type_id

    @property
    def digest_size(self) -> int:
        """The size of this mechanism's keys, proofs and signatures (and of a salted password)."""
        return hashlib.new(self.hash_name).digest_size

    @property
    def min_iterations(self) -> int:
        return MIN_ITERATIONS

    @property
    def max_iterations(self) -> int:
        return MAX_ITERATIONS

    @classmethod
    def for_name(cls, name: str) -> ScramMechanism | None:
        """``SCRAM-SHA-256`` → the mechanism; None for any other name."""
        return next((m for m in cls if m.mechanism_name == name), None)

    @classmethod
    def for_type(cls, type_id: int) -> ScramMechanism | None:
        """The admin APIs' int8 (1, 2) → the mechanism; None for 0 (UNKNOWN) or anything else."""
        return next((m for m in cls if m.type_id == type_id), None)

    def __str__(self) -> str:
        return self.mechanism_name


@dataclass(frozen=True)
class ScramCredential:
    """What the broker keeps of one user's password for one mechanism."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:
        # Keys are as good as the password to anyone who can reach a broker: never in logs.
        return f"ScramCredential(iterations={self.iterations})"

    @classmethod
    def from_password(cls, mechanism: ScramMechanism, password: str, *, iterations: int = MIN_ITERATIONS,
                      salt: bytes | None = None) -> ScramCredential:
        """The credential for ``password`` (a fresh random salt unless one is given)."""
        salt = secrets.token_bytes(32) if salt is None else salt
        return cls.from_salted_password(mechanism, salted_password(mechanism, password, salt, iterations), salt,
                                        iterations)

    @classmethod
    def from_salted_password(cls, mechanism: ScramMechanism, salted: bytes, salt: bytes,
                             iterations: int) -> ScramCredential:
        """The credential from the salted password an AlterUserScramCredentials upsertion carries."""
        return cls(salt, stored_key(mechanism, client_key(mechanism, salted)), server_key(mechanism, salted),
                   iterations)

    def to_kafka_string(self) -> str:
        """``salt=...,stored_key=...,server_key=...,iterations=...`` (Kafka's ``credentialToString``)."""
        return (f"salt={_b64(self.salt)},stored_key={_b64(self.stored_key)},"
                f"server_key={_b64(self.server_key)},iterations={self.iterations}")

    @classmethod
    def from_kafka_string(cls, text: str) -> ScramCredential:
        """Read Kafka's string form; raises ``ValueError`` naming what is missing or malformed."""
        fields: dict[str, str] = {}
        for token in text.split(","):
            key, sep, value = token.partition("=")
            if not sep or not key:
                raise ValueError(f"SCRAM credential: {key!r} is not a key=value pair")
            fields[key] = value
        expected = ("salt", "stored_key", "server_key", "iterations")
        if sorted(fields) != sorted(expected):
            raise ValueError(f"SCRAM credential: keys {sorted(fields)}, expected {list(expected)}")
        try:
            iterations = int(fields["iterations"])
            decoded = {k: base64.b64decode(fields[k], validate=True) for k in expected[:3]}
        except (ValueError, binascii.Error) as exc:
            raise ValueError(f"SCRAM credential: a value is not what its key needs ({exc})") from None
        return cls(decoded["salt"], decoded["stored_key"], decoded["server_key"], iterations)


def salted_password(mechanism: ScramMechanism, password: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802's ``Hi(Normalize(password), salt, i)``: PBKDF2-HMAC over the UTF-8 password, as Kafka."""
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode("utf-8"), salt, iterations)


def client_key(mechanism: ScramMechanism, salted: bytes) -> bytes:
    return _hmac(mechanism, salted, b"Client Key")


def stored_key(mechanism: ScramMechanism, key: bytes) -> bytes:
    """``H(ClientKey)``."""
    return hashlib.new(mechanism.hash_name, key).digest()


def server_key(mechanism: ScramMechanism, salted: bytes) -> bytes:
    return _hmac(mechanism, salted, b"Server Key")


def client_proof(mechanism: ScramMechanism, key: bytes, auth_message: bytes) -> bytes:
    """``ClientKey XOR HMAC(StoredKey, AuthMessage)``."""
    return _xor(key, _hmac(mechanism, stored_key(mechanism, key), auth_message))


def recover_client_key(mechanism: ScramMechanism, stored: bytes, auth_message: bytes, proof: bytes) -> bytes:
    """The server's side of the proof: ``ClientProof XOR HMAC(StoredKey, AuthMessage)``."""
    signature = _hmac(mechanism, stored, auth_message)
    if len(proof) != len(signature):
        raise ValueError(f"client proof of {len(proof)} bytes, {mechanism} proofs have {len(signature)}")
    return _xor(proof, signature)


def server_signature(mechanism: ScramMechanism, key: bytes, auth_message: bytes) -> bytes:
    """``HMAC(ServerKey, AuthMessage)``: what proves to the client that the server knew its credential."""
    return _hmac(mechanism, key, auth_message)


def sasl_name(username: str) -> str:
    """A user name as SCRAM messages carry it: ``=`` as ``=3D`` and ``,`` as ``=2C``."""
    return username.replace("=", "=3D").replace(",", "=2C")


def username_of(name: str) -> str:
    """The inverse of ``sasl_name``; an ``=`` that escapes nothing is refused (``ValueError``)."""
    username = name.replace("=2C", ",").replace("=3D", "=")
    if name.replace("=2C", "").replace("=3D", "").count("="):
        raise ValueError(f"Invalid username: {name}")
    return username


def new_nonce() -> str:
    """A fresh printable nonce (no ``,``), from the OS's secure random source."""
    return secrets.token_urlsafe(24)


def _hmac(mechanism: ScramMechanism, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, mechanism.hash_name).digest()


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
