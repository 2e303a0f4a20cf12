"""Changing configs: what AlterConfigs and IncrementalAlterConfigs do to each resource (Kafka's
ConfigAdminManager, with the checks Kafka's controller makes before it stores a change).

A request names resources (a topic, or this broker) and, for each, the
configs to change. Each resource is answered on its own, with Kafka's error
for the first thing wrong with it, in Kafka's order: the request's own shape
first (a resource named twice, a key named twice, a null value to set, an
unknown operation: INVALID_REQUEST), then the values (INVALID_CONFIG, naming
the key and the value), then whether the topic exists
(UNKNOWN_TOPIC_OR_PARTITION). ``validate_only`` runs every check and changes
nothing.

AlterConfigs replaces all of a topic's overrides with the ones given;
IncrementalAlterConfigs changes only the keys it names: SET, DELETE (back to
the broker's default), APPEND and SUBTRACT (for list configs such as
``cleanup.policy``). Topic overrides are stored by the ``Broker``, which
applies them to the partitions' logs at once; in a cluster they are stored in
etcd, and every broker holding the topic applies them.

Every broker setting of seglog is static (read at start-up, as
DescribeConfigs reports with read_only), so a change to a BROKER resource is
refused as Kafka refuses a setting that cannot change while it runs:
INVALID_REQUEST, "Cannot update these configs dynamically".
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable, Sequence

from format import layout
from format.errors import InvalidTopicError as FormatInvalidTopicError

from ..broker import Broker
from ..config import TOPIC_LIST_CONFIG_NAMES
from ..errors import (InvalidConfigurationError, InvalidRequestError, InvalidTopicError, KafkaError,
                      UnknownTopicOrPartitionError)
from ..protocol.config_resources import APPEND, DELETE, OPERATION_NAMES, RESOURCE_BROKER, RESOURCE_TOPIC, SET

__all__ = ["AlterableConfig", "AlterConfigsResource", "ConfigAdminManager"]



@dataclass(frozen=True)
class AlterableConfig:
    """One config of a resource to change; AlterConfigs' configs are all SETs."""

    name: str
    value: str | None
    operation: int = SET


@dataclass(frozen=True)
class AlterConfigsResource:
    resource_type: int
    resource_name: str
    configs: tuple[AlterableConfig, ...]


class ConfigAdminManager:
    """Alters the configs of ``broker``'s topics; one change at a time, so that APPEND and SUBTRACT
    read the value the previous change left."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._lock = threading.Lock()
        #: Where a topic's overrides are read (None: no such topic) and written: the broker's own topics; in a
        #: cluster, etcd's ``/config/topics/T``, which every broker holding the topic applies.
        self.topic_overrides: Callable[[str], dict[str, str] | None] = self._local_overrides
        self.store_topic_overrides: Callable[[str, dict[str, str], list[str]], None] = broker.alter_topic_config

    def _local_overrides(self, name: str) -> dict[str, str] | None:
        meta = self.broker.topics.get(name)
        return None if meta is None else dict(meta.config)

    def incremental_alter_configs(self, resources: Sequence[AlterConfigsResource], validate_only: bool
                                  ) -> list[KafkaError | None]:
        """IncrementalAlterConfigs: the error of each resource, ``None`` where it was changed (or would be)."""
        return self._alter(resources, validate_only, incremental=True)

    def alter_configs(self, resources: Sequence[AlterConfigsResource], validate_only: bool
                      ) -> list[KafkaError | None]:
        """AlterConfigs: each topic's overrides become exactly the configs given."""
        return self._alter(resources, validate_only, incremental=False)

    def _alter(self, resources: Sequence[AlterConfigsResource], validate_only: bool, *, incremental: bool
               ) -> list[KafkaError | None]:
        seen = [(r.resource_type, r.resource_name) for r in resources]
        results: list[KafkaError | None] = []
        for resource, key in zip(resources, seen):
            try:
                if seen.count(key) > 1:
                    raise InvalidRequestError("Each resource must appear at most once.")
                self._check_shape(resource, incremental)
                if resource.resource_type == RESOURCE_TOPIC:
                    self._alter_topic(resource, validate_only, incremental)
                elif resource.resource_type == RESOURCE_BROKER:
                    self._alter_broker(resource)
                else:
                    raise InvalidRequestError(f"Unknown resource type {resource.resource_type}")
                results.append(None)
            except KafkaError as exc:
                results.append(exc)
        return results

    @staticmethod
    def _check_shape(resource: AlterConfigsResource, incremental: bool) -> None:
        names = [c.name for c in resource.configs]
        if len(set(names)) != len(names):
            raise InvalidRequestError("Error due to duplicate config keys")
        nulls = [c.name for c in resource.configs if c.value is None and c.operation != DELETE]
        if nulls:
            raise InvalidRequestError("Null value not supported for : " + ", ".join(nulls))
        if incremental:
            for c in resource.configs:
                if c.operation not in OPERATION_NAMES:
                    raise InvalidRequestError(f"Unknown operations type {c.operation} for config {c.name} "
                                              f"(0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT)")

    # --- topics -----------------------------------------------------------------

    def _alter_topic(self, resource: AlterConfigsResource, validate_only: bool, incremental: bool) -> None:
        name = resource.resource_name
        if not name:
            raise InvalidRequestError("Default topic resources are not allowed.")
        try:
            layout.validate_topic_name(name)
        except FormatInvalidTopicError as exc:
            raise InvalidTopicError(str(exc)) from None
        with self._lock:
            overrides = self.topic_overrides(name)
            current = overrides or {}
            if incremental:
                wanted = self._apply_operations(current, resource.configs)
            else:
                wanted = {c.name: c.value for c in resource.configs}
            # The values first, then the topic, as Kafka's controller checks them.
            defaults = self.broker.config.log_config_defaults()
            new = defaults.with_overrides(wanted)
            if overrides is None:
                raise UnknownTopicOrPartitionError(f"The topic '{name}' does not exist.")
            defaults.with_overrides(current).check_update(new)
            if not validate_only:
                self.store_topic_overrides(name, wanted, [k for k in current if k not in wanted])

    def _apply_operations(self, current: dict[str, str], configs: tuple[AlterableConfig, ...]) -> dict[str, str]:
        wanted = dict(current)
        defaults = None
        for c in configs:
            if c.operation == SET:
                wanted[c.name] = c.value
            elif c.operation == DELETE:
                wanted.pop(c.name, None)
            else:
                operation = OPERATION_NAMES[c.operation]
                if c.name not in TOPIC_LIST_CONFIG_NAMES:
                    raise InvalidConfigurationError(f"Can't {operation} to key {c.name} because its type is not "
                                                    f"LIST.", config_name=c.name, value=c.value)
                if c.name in wanted:
                    base = wanted[c.name]
                else:
                    # Kafka starts from the config's own default; seglog from the value the topic has
                    # now (the broker's log.* setting), which is what the user sees and appends to.
                    defaults = defaults or self.broker.config.log_config_defaults().to_props()
                    base = defaults[c.name]
                items = [v for v in base.split(",") if v]
                given = [v for v in (c.value or "").split(",") if v]
                if c.operation == APPEND:
                    items += [v for v in given if v not in items]
                else:  # SUBTRACT
                    items = [v for v in items if v not in given]
                wanted[c.name] = ",".join(items)
        return wanted

    # --- this broker ------------------------------------------------------------

    def _alter_broker(self, resource: AlterConfigsResource) -> None:
        name = resource.resource_name
        if name:  # empty: the cluster-wide default
            if not name.lstrip("-").isdigit():
                raise InvalidRequestError(f"Node id must be an integer, but it is: {name}")
            if int(name) != self.broker.node_id:
                raise InvalidRequestError(f"Unexpected broker id, expected {self.broker.node_id}, but received "
                                          f"{name}")
        if resource.configs:
            keys = ", ".join(sorted(c.name for c in resource.configs))
            raise InvalidRequestError(f"Cannot update these configs dynamically: {keys} (seglog reads every broker "
                                      f"setting at start-up: restart the broker with --config to change it)")
