"""InitProducerId: producer ids and epochs for idempotent and transactional producers."""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import F, api

__all__ = ["INIT_PRODUCER_ID"]

INIT_PRODUCER_ID = api(
    ApiKey.INIT_PRODUCER_ID, "0-5", flexible="2+",
    request=(
        F("TransactionalId", "string", "0+", nullable="0+"),
        F("TransactionTimeoutMs", "int32", "0+"),
        # v3+ lets a producer bump its epoch instead of getting a new id (KIP-360).
        F("ProducerId", "int64", "3+", default=-1),
        F("ProducerEpoch", "int16", "3+", default=-1),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "0+"),
        F("ErrorCode", "int16", "0+"),
        F("ProducerId", "int64", "0+", default=-1),
        F("ProducerEpoch", "int16", "0+"),
    ),
)
