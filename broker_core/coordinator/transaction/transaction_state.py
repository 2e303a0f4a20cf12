"""The states of a transaction and the one table that says how they may change (Kafka's TransactionState).

A transactional id moves through::

    Empty --AddPartitions--> Ongoing --EndTxn(commit)--> PrepareCommit --markers--> CompleteCommit
                               |   \\--EndTxn(abort)--> PrepareAbort --markers--> CompleteAbort
                               \\--InitProducerId / timeout--> PrepareEpochFence --> PrepareAbort

and from Empty, CompleteCommit or CompleteAbort the next AddPartitions opens
the next transaction (Ongoing), the next InitProducerId bumps the epoch and
stays there, and expiry of an idle transactional id ends it in Dead.
``TransactionMetadata`` checks every change against ``VALID_PREVIOUS_STATES``,
so a coordinator bug shows up as an exception naming the transactional id and
both states.
"""

from __future__ import annotations

import enum
from types import MappingProxyType
from typing import Mapping

__all__ = ["TransactionState", "VALID_PREVIOUS_STATES", "IllegalTransactionStateTransitionError",
           "check_transition"]


class TransactionState(enum.Enum):
    """A transaction's state; ``id`` is what ``__transaction_state`` stores, ``name_`` what
    DescribeTransactions and ListTransactions answer (Kafka's names)."""

    EMPTY = (0, "Empty")
    ONGOING = (1, "Ongoing")
    PREPARE_COMMIT = (2, "PrepareCommit")
    PREPARE_ABORT = (3, "PrepareAbort")
    COMPLETE_COMMIT = (4, "CompleteCommit")
    COMPLETE_ABORT = (5, "CompleteAbort")
    DEAD = (6, "Dead")
    PREPARE_EPOCH_FENCE = (7, "PrepareEpochFence")

    @property
    def id(self) -> int:
        return self.value[0]

    @property
    def state_name(self) -> str:
        return self.value[1]

    @classmethod
    def from_id(cls, state_id: int) -> TransactionState:
        for state in cls:
            if state.id == state_id:
                return state
        raise ValueError(f"no transaction state has id {state_id} (ids are 0-7)")

    @classmethod
    def parse(cls, name: str) -> TransactionState | None:
        """The state named ``name`` as Kafka spells it (``Ongoing``), case-insensitive; None if none is."""
        lowered = name.lower()
        return next((s for s in cls if s.state_name.lower() == lowered), None)

    @property
    def is_complete(self) -> bool:
        """No transaction is open: the next one may start (Empty, CompleteCommit, CompleteAbort)."""
        return self in (_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT)

    @property
    def is_preparing(self) -> bool:
        """Markers are being written (PrepareCommit, PrepareAbort)."""
        return self in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT)

    def __str__(self) -> str:
        return self.state_name


_S = TransactionState

#: For each target state, the states a transaction may move to it from (Kafka's validPreviousStates,
#: for clients of transaction.version 0 and 1).
VALID_PREVIOUS_STATES: Mapping[TransactionState, frozenset[TransactionState]] = MappingProxyType({
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE}),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
})


class IllegalTransactionStateTransitionError(RuntimeError):
    """A transition the table does not allow: always a coordinator bug, never a client's fault."""

    def __init__(self, transactional_id: str, current: TransactionState, target: TransactionState) -> None:
        allowed = ", ".join(sorted(s.state_name for s in VALID_PREVIOUS_STATES[target]))
        super().__init__(f"transactional id {transactional_id!r} cannot move from {current} to {target}: "
                         f"{target} is reached only from {allowed}")
        self.transactional_id = transactional_id
        self.current = current
        self.target = target


def check_transition(transactional_id: str, current: TransactionState, target: TransactionState) -> None:
    """Raise IllegalTransactionStateTransitionError unless ``current -> target`` is in the table."""
    if current not in VALID_PREVIOUS_STATES[target]:
        raise IllegalTransactionStateTransitionError(transactional_id, current, target)
