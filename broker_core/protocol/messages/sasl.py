"""SASL: the handshake that picks a mechanism (SaslHandshake), the mechanism's tokens carried in requests
(SaslAuthenticate, KIP-152), and the SCRAM credentials of users (DescribeUserScramCredentials and
AlterUserScramCredentials, KIP-554)."""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import F, api

__all__ = ["SASL_HANDSHAKE", "SASL_AUTHENTICATE", "DESCRIBE_USER_SCRAM_CREDENTIALS", "ALTER_USER_SCRAM_CREDENTIALS"]

SASL_HANDSHAKE = api(
    # v0: the tokens that follow travel as raw size-prefixed frames; v1: inside SaslAuthenticate requests.
    ApiKey.SASL_HANDSHAKE, "0-1", flexible="none",
    request=(
        F("Mechanism", "string", "0+"),
    ),
    response=(
        F("ErrorCode", "int16", "0+"),
        F("Mechanisms", "[]string", "0+"),
    ),
)

SASL_AUTHENTICATE = api(
    # v1 adds the session lifetime (KIP-368, re-authentication).
    ApiKey.SASL_AUTHENTICATE, "0-2", flexible="2+",
    request=(
        F("AuthBytes", "bytes", "0+"),
    ),
    response=(
        F("ErrorCode", "int16", "0+"),
        F("ErrorMessage", "string", "0+", nullable="0+"),
        F("AuthBytes", "bytes", "0+"),
        F("SessionLifetimeMs", "int64", "1+", default=0),
    ),
)

DESCRIBE_USER_SCRAM_CREDENTIALS = api(
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, "0", flexible="0+",
    request=(
        # Null or empty: every user.
        F("Users", "[]UserName", "0+", nullable="0+", fields=(
            F("Name", "string", "0+"),
        )),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "0+"),
        F("ErrorCode", "int16", "0+"),
        F("ErrorMessage", "string", "0+", nullable="0+"),
        F("Results", "[]DescribeUserScramCredentialsResult", "0+", fields=(
            F("User", "string", "0+"),
            F("ErrorCode", "int16", "0+"),
            F("ErrorMessage", "string", "0+", nullable="0+"),
            F("CredentialInfos", "[]CredentialInfo", "0+", fields=(
                F("Mechanism", "int8", "0+"),
                F("Iterations", "int32", "0+"),
            )),
        )),
    ),
)

ALTER_USER_SCRAM_CREDENTIALS = api(
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS, "0", flexible="0+",
    request=(
        F("Deletions", "[]ScramCredentialDeletion", "0+", fields=(
            F("Name", "string", "0+"),
            F("Mechanism", "int8", "0+"),
        )),
        # The client salts the password; the broker never sees it.
        F("Upsertions", "[]ScramCredentialUpsertion", "0+", fields=(
            F("Name", "string", "0+"),
            F("Mechanism", "int8", "0+"),
            F("Iterations", "int32", "0+"),
            F("Salt", "bytes", "0+"),
            F("SaltedPassword", "bytes", "0+"),
        )),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "0+"),
        F("Results", "[]AlterUserScramCredentialsResult", "0+", fields=(
            F("User", "string", "0+"),
            F("ErrorCode", "int16", "0+"),
            F("ErrorMessage", "string", "0+", nullable="0+"),
        )),
    ),
)
