"""A broker process that only registers and runs its controller: ``python controller_process.py CONNECT ID``.

Prints ``registered`` once its session holds ``/brokers/ids/ID`` and ``controller EPOCH`` each time it
becomes the controller; runs until killed (the tests SIGKILL it)."""

from __future__ import annotations

import sys
import threading

from broker_core.config import BrokerConfig
from broker_core.controller.controller_event_manager import ControllerEventManager
from broker_core.controller.etcd_connect import parse_etcd_connect
from broker_core.controller.etcd_metadata_store import EtcdMetadataStore
from broker_core.controller.kafka_controller import KafkaController
from broker_core.controller.kafka_zk_client import KafkaZkClient
from broker_core.controller.session_lease import SessionLease
from broker_core.controller.zk_data import BrokerInfo
from broker_core.network.endpoint import EndPoint


def main(connect: str, broker_id: int) -> None:
    config = BrokerConfig(node_id=broker_id, broker_session_timeout_ms=1000, broker_heartbeat_interval_ms=200)
    zk = KafkaZkClient(EtcdMetadataStore(parse_etcd_connect(connect)))
    session = SessionLease(zk.store, config.broker_session_timeout_ms, config.broker_heartbeat_interval_ms)
    zk.register_broker(BrokerInfo(broker_id, (EndPoint("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9092 + broker_id),)),
                       session.lease)
    print("registered", flush=True)
    controller = KafkaController(config, zk, session.lease)
    was_active = False
    ControllerEventManager(controller).start()
    while True:
        threading.Event().wait(0.05)
        if controller.is_active and not was_active:
            print(f"controller {controller.epoch}", flush=True)
        was_active = controller.is_active


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
