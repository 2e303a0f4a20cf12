"""Producer ids in a cluster: blocks granted through ``/latest_producer_id_block`` by compare-and-set, so two
brokers never hand out the same id (Kafka's ZkProducerIdManager)."""

from __future__ import annotations

import threading

from broker_core.controller import zk_data
from broker_core.controller.in_memory_metadata_store import InMemoryMetadataStore
from broker_core.controller.kafka_zk_client import KafkaZkClient
from broker_core.server.producer_id_manager import ZkProducerIdManager


def _manager(zk: KafkaZkClient, broker_id: int, block_size: int = 10) -> ZkProducerIdManager:
    return ZkProducerIdManager(lambda size: zk.allocate_producer_id_block(broker_id, size), block_size)


def test_two_brokers_granted_blocks_through_the_store_never_hand_out_the_same_producer_id():
    zk = KafkaZkClient(InMemoryMetadataStore())
    one, two = _manager(zk, 1), _manager(zk, 2)
    ids: list[int] = []
    lock = threading.Lock()

    def take(manager: ZkProducerIdManager) -> None:
        for _ in range(95):
            producer_id = manager.generate_producer_id()
            with lock:
                ids.append(producer_id)

    threads = [threading.Thread(target=take, args=(m,)) for m in (one, two, one, two)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(ids) == len(set(ids)) == 380
    start, end = zk_data.decode_producer_id_block(zk.store.get(zk_data.PRODUCER_ID_BLOCK_PATH).value)
    assert (end - start + 1, max(ids) <= end) == (10, True)


def test_a_restarted_broker_continues_after_the_last_block_granted():
    zk = KafkaZkClient(InMemoryMetadataStore())
    first = _manager(zk, 1)
    assert [first.generate_producer_id() for _ in range(3)] == [0, 1, 2]
    assert _manager(zk, 1).generate_producer_id() == 10
    assert zk.store.get(zk_data.PRODUCER_ID_BLOCK_PATH).value == (
        b'{"version":1,"broker":1,"block_start":"10","block_end":"19"}')
