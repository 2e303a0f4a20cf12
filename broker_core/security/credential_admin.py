"""AlterUserScramCredentials and DescribeUserScramCredentials (KIP-554) answered from a credential store.

The rules and messages are Apache Kafka 4's (``ScramControlManager`` and the broker's describe): a user may be
named once per alteration request (DUPLICATE_RESOURCE otherwise), an empty name or fewer than 4096 or
more than 16384 iterations is an UNACCEPTABLE_CREDENTIAL, a mechanism other than SCRAM-SHA-256/512 an
UNSUPPORTED_SASL_MECHANISM, deleting or describing what does not exist RESOURCE_NOT_FOUND. An
upsertion carries the salted password, never the password: the store keeps the stored and server
keys derived from it. Every valid change of a request is applied in one ``alter``.

``upsertion`` builds what a client sends for a password (a fresh salt, PBKDF2 on the client side).
"""

from __future__ import annotations

import secrets
from typing import Any

from ..errors import (NONE, DuplicateResourceError, ResourceNotFoundError, UnacceptableCredentialError,
                      UnsupportedSaslMechanismError)
from . import scram
from .credential_store import CredentialStore
from .scram import ScramCredential, ScramMechanism

__all__ = ["alter_user_scram_credentials", "describe_user_scram_credentials", "upsertion", "deletion"]

_TWICE = "A user credential cannot be altered twice in the same request"


def upsertion(user: str, mechanism: ScramMechanism, password: str, iterations: int = scram.MIN_ITERATIONS,
              salt: bytes | None = None) -> dict[str, Any]:
    """One ``upsertions`` entry of an AlterUserScramCredentials request for ``password``."""
    salt = secrets.token_bytes(32) if salt is None else salt
    return {"name": user, "mechanism": mechanism.type_id, "iterations": iterations, "salt": salt,
            "salted_password": scram.salted_password(mechanism, password, salt, iterations)}


def deletion(user: str, mechanism: ScramMechanism) -> dict[str, Any]:
    """One ``deletions`` entry of an AlterUserScramCredentials request."""
    return {"name": user, "mechanism": mechanism.type_id}


def alter_user_scram_credentials(store: CredentialStore, body: dict[str, Any]) -> dict[str, Any]:
    """The response body to an AlterUserScramCredentials request body; applies its valid changes."""
    errors: dict[str, tuple[int, str]] = {}
    deletions: dict[str, ScramMechanism] = {}
    upsertions: dict[str, tuple[ScramMechanism, ScramCredential]] = {}
    for entry in body["deletions"]:
        name = entry["name"]
        if name in errors:
            continue
        if deletions.pop(name, None) is not None:
            errors[name] = (DuplicateResourceError.code, _TWICE)
            continue
        error, mechanism = _check_name_and_mechanism(name, entry["mechanism"])
        if error is None and store.credential(name, mechanism) is None:
            error = (ResourceNotFoundError.code, "Attempt to delete a user credential that does not exist")
        if error is not None:
            errors[name] = error
        else:
            deletions[name] = mechanism
    for entry in body["upsertions"]:
        name = entry["name"]
        if name in errors:
            continue
        if deletions.pop(name, None) is not None or upsertions.pop(name, None) is not None:
            errors[name] = (DuplicateResourceError.code, _TWICE)
            continue
        error, mechanism = _check_name_and_mechanism(name, entry["mechanism"])
        if error is None:
            error = _check_upsertion(mechanism, entry)
        if error is not None:
            errors[name] = error
        else:
            upsertions[name] = (mechanism, ScramCredential.from_salted_password(
                mechanism, entry["salted_password"], entry["salt"], entry["iterations"]))
    store.alter(deletions.items(), [(name, m, c) for name, (m, c) in upsertions.items()])
    results = [{"user": name, "error_code": NONE, "error_message": None} for name in [*deletions, *upsertions]]
    results += [{"user": name, "error_code": code, "error_message": message} for name, (code, message) in errors.items()]
    return {"throttle_time_ms": 0, "results": results}


def describe_user_scram_credentials(store: CredentialStore, body: dict[str, Any]) -> dict[str, Any]:
    """The response body to a DescribeUserScramCredentials request body: mechanisms and iterations, no keys."""
    asked = body.get("users")
    names = [u["name"] for u in asked] if asked else store.users()
    counts: dict[str, int] = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    results = []
    for name, count in sorted(counts.items()):
        # Kafka 4 answers "" rather than null where there is no error.
        result: dict[str, Any] = {"user": name, "error_code": NONE, "error_message": "", "credential_infos": []}
        if count > 1:
            result.update(error_code=DuplicateResourceError.code, error_message=(
                f"Cannot describe SCRAM credentials for the same user twice in a single request: {name}"))
        else:
            credentials = store.credentials(name)
            if credentials:
                result["credential_infos"] = [{"mechanism": m.type_id, "iterations": c.iterations}
                                              for m, c in sorted(credentials.items(), key=lambda kv: kv[0].type_id)]
            else:
                result.update(error_code=ResourceNotFoundError.code,
                              error_message=f"Attempt to describe a user credential that does not exist: {name}")
        results.append(result)
    return {"throttle_time_ms": 0, "error_code": NONE, "error_message": "", "results": results}


def _check_name_and_mechanism(name: str, type_id: int) -> tuple[tuple[int, str] | None, ScramMechanism]:
    mechanism = ScramMechanism.for_type(type_id)
    if not name:
        return (UnacceptableCredentialError.code, "Username must not be empty"), ScramMechanism.SCRAM_SHA_256
    if mechanism is None:
        return (UnsupportedSaslMechanismError.code, "Unknown SCRAM mechanism"), ScramMechanism.SCRAM_SHA_256
    return None, mechanism


def _check_upsertion(mechanism: ScramMechanism, entry: dict[str, Any]) -> tuple[int, str] | None:
    if entry["iterations"] < mechanism.min_iterations:
        return UnacceptableCredentialError.code, "Too few iterations"
    if entry["iterations"] > mechanism.max_iterations:
        return UnacceptableCredentialError.code, "Too many iterations"
    if not entry["salt"] or len(entry["salted_password"]) != mechanism.digest_size:
        # Kafka derives the keys from whatever it gets; a salted password of the wrong size is no credential.
        return UnacceptableCredentialError.code, "The salt is empty or the salted password is not a digest"
    return None

