"""The coordinators' topics in a cluster: ``__consumer_offsets`` and ``__transaction_state`` created through
etcd the first time a client looks for a coordinator (Kafka's ``AutoTopicCreationManager`` for internal
topics).

Each is created with the partition count, replication factor and settings its coordinator asks for
(``offsets.topic.num.partitions`` / ``.replication.factor``, ``transaction.state.log.num.partitions`` /
``.replication.factor`` / ``.min.isr``), and only once enough brokers are alive to hold its replicas: until
then FindCoordinator answers COORDINATOR_NOT_AVAILABLE and says why in the log, as Kafka does while a
cluster starts.
"""

from __future__ import annotations

import logging
from typing import Callable

from ..config import BrokerConfig
from ..controller.admin_zk_client import AdminZkClient
from ..coordinator.group.broker_store import offsets_topic_config
from ..coordinator.transaction.config import TransactionConfig
from ..coordinator.transaction.transaction_log import TRANSACTION_STATE_TOPIC
from ..coordinator.transaction.transaction_state_manager import transaction_state_topic_config
from ..errors import CoordinatorNotAvailableError, TopicAlreadyExistsError
from ..offsets_topic import OFFSETS_TOPIC

__all__ = ["InternalTopics"]

log = logging.getLogger(__name__)


class InternalTopics:
    """Creates the coordinators' topics through ``admin``; ``alive_brokers()`` counts the registered brokers."""

    def __init__(self, config: BrokerConfig, admin: AdminZkClient, alive_brokers: Callable[[], int]) -> None:
        self.config = config
        self.admin = admin
        self.alive_brokers = alive_brokers

    def _settings(self, topic: str) -> tuple[int, int, str, dict[str, object]]:
        """Partitions, replication factor, the name of the factor's setting, and the topic's settings."""
        config = self.config
        if topic == OFFSETS_TOPIC:
            key = "offsets.topic.replication.factor"
            return (config.offsets_topic_num_partitions, config.internal_topic_replication_factor(key), key,
                    offsets_topic_config(config))
        assert topic == TRANSACTION_STATE_TOPIC, topic
        key = "transaction.state.log.replication.factor"
        settings = {**transaction_state_topic_config(TransactionConfig.from_broker_config(config)),
                    "min.insync.replicas": config.transaction_state_log_min_isr}
        return (config.transaction_state_log_num_partitions, config.internal_topic_replication_factor(key), key,
                settings)

    def create(self, topic: str) -> None:
        """Create ``topic``; raises COORDINATOR_NOT_AVAILABLE, which the asking client retries: while too few
        brokers are alive, and once created (its partitions have no leader yet)."""
        partitions, factor, key, settings = self._settings(topic)
        alive = self.alive_brokers()
        if alive < factor:
            message = (f"Number of alive brokers '{alive}' does not meet the required replication factor "
                       f"'{factor}' for the {topic} topic (configured via '{key}'). This error can be ignored if "
                       f"the cluster is starting up and not all brokers are up yet.")
            log.info("%s", message)
            raise CoordinatorNotAvailableError(message)
        try:
            self.admin.create_topic(topic, partitions, factor, None, {k: str(v).lower() if isinstance(v, bool)
                                                                      else str(v) for k, v in settings.items()})
            log.info("created the internal topic %s with %d partitions and replication factor %d", topic,
                     partitions, factor)
        except TopicAlreadyExistsError:
            pass
        raise CoordinatorNotAvailableError(f"the internal topic {topic} is being created")
