"""The transaction coordinator: Kafka's transactions over ``__transaction_state``, with markers written locally.

``TransactionCoordinator`` is a state machine fed with typed requests and a
clock; each transactional id's ``TransactionMetadata`` moves through the
``TransactionState``s of Kafka's transition table and is persisted, change by
change, as records of ``__transaction_state`` by the
``TransactionStateManager``; the ``TransactionMarkerChannelManager`` writes
the COMMIT and ABORT markers into the partitions of a transaction.

Module map: ``transaction_state`` (states and transition table),
``transaction_metadata`` (the data and its prepared changes),
``transaction_log`` (the topic's record layouts), ``transaction_state_manager``
(the cache, the writes and the load), ``transaction_marker_channel_manager``
(markers), ``transaction_coordinator`` (the protocol), ``requests`` (what it
is asked and answers), ``wire`` (request and response bodies per version),
``config``.
"""

from .config import TransactionConfig
from .requests import (AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, EndTxnRequest, InitProducerIdRequest,
                       InitProducerIdResult, ListTransactionsRequest, TransactionDescription, TransactionListing)
from .transaction_coordinator import COORDINATOR_EPOCH, TransactionCoordinator
from .transaction_log import TRANSACTION_STATE_TOPIC, TransactionLogValue, partition_for_transactional_id
from .transaction_marker_channel_manager import TransactionMarkerChannelManager, TxnMarker
from .transaction_metadata import TransactionMetadata, TxnTransitMetadata
from .transaction_state import VALID_PREVIOUS_STATES, IllegalTransactionStateTransitionError, TransactionState
from .transaction_state_manager import TransactionStateManager

__all__ = [
    "TransactionCoordinator",
    "TransactionConfig",
    "TransactionMetadata",
    "TxnTransitMetadata",
    "TransactionState",
    "VALID_PREVIOUS_STATES",
    "IllegalTransactionStateTransitionError",
    "TransactionStateManager",
    "TransactionMarkerChannelManager",
    "TxnMarker",
    "TransactionLogValue",
    "TRANSACTION_STATE_TOPIC",
    "COORDINATOR_EPOCH",
    "partition_for_transactional_id",
    "InitProducerIdRequest",
    "InitProducerIdResult",
    "AddPartitionsToTxnRequest",
    "AddOffsetsToTxnRequest",
    "EndTxnRequest",
    "ListTransactionsRequest",
    "TransactionDescription",
    "TransactionListing",
]
