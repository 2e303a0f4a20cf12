"""The transaction coordinator: Kafka's transactions over ``__transaction_state`` and their markers.

``TransactionCoordinator`` is a state machine fed with typed requests and a
clock; each transactional id's ``TransactionMetadata`` moves through the
``TransactionState``s of Kafka's transition table and is persisted, change by
change, as records of ``__transaction_state`` by the
``TransactionStateManager`` for the partitions of the topic this broker owns
(all of them on a single broker, those it leads in a cluster); the
``TransactionMarkerChannelManager`` writes the COMMIT and ABORT markers into
the partitions of a transaction — locally, or through the
``MarkerDestinations`` to their leaders on other brokers.

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
from .transaction_marker_channel_manager import MarkerDestinations, TransactionMarkerChannelManager, TxnMarker
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
    "MarkerDestinations",
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
