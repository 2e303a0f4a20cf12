"""Kafka principals: ``User:alice``, the identity requests are authorized as.

A connection that has not authenticated (a PLAINTEXT or SSL listener without
client certificates) is ``User:ANONYMOUS``, as in Kafka. SASL makes the
principal the authenticated user; an SSL client certificate makes it the
certificate's subject (``User:CN=client,O=...``).
"""

from __future__ import annotations

from dataclasses import dataclass

USER_TYPE = "User"


@dataclass(frozen=True)
class KafkaPrincipal:
    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """``User:alice`` → the principal; a value without a type prefix is refused."""
        principal_type, sep, name = text.partition(":")
        if not sep or not principal_type or not name:
            raise ValueError(f"Invalid principal {text!r}: expected TYPE:NAME, e.g. User:alice")
        return cls(principal_type, name)


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")
