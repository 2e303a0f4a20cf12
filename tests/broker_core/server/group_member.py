"""One consumer-group member as its own process, for tests that crash members (SIGKILL) or stop them (SIGTERM).

    python group_member.py LIB BOOTSTRAP TOPIC GROUP SESSION_TIMEOUT_MS

LIB is ``kafka-python`` or ``confluent``. The member subscribes to TOPIC in
GROUP and prints one JSON object a line, flushed at once, so that a line
written before a SIGKILL still reaches the parent:

* ``{"assigned": [partitions], "generation": g, "member": id}`` on every assignment
  (the generation is -1 where the client does not tell it);
* ``{"consumed": [[partition, offset], ...]}`` for every non-empty poll, printed
  before that poll's offsets are committed (synchronously), so what the parent
  saw consumed is a superset of what the group committed: at-least-once.

SIGTERM closes the consumer the ordinary way (commit, LeaveGroup) and exits 0.
"""

from __future__ import annotations

import json
import signal
import sys
import threading


def emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def run_kafka_python(bootstrap: str, topic: str, group: str, session_ms: int, stop: threading.Event) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                             auto_offset_reset="earliest", session_timeout_ms=session_ms,
                             heartbeat_interval_ms=max(100, session_ms // 6), max_poll_interval_ms=60_000,
                             request_timeout_ms=max(10_000, session_ms + 5000), fetch_max_wait_ms=100,
                             client_id="member-kafka-python")

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            pass

        def on_partitions_assigned(self, assigned):
            meta = consumer.group_metadata()
            emit({"assigned": sorted(tp.partition for tp in assigned), "generation": meta.generation_id,
                  "member": meta.member_id})

    consumer.subscribe([topic], listener=Listener())
    try:
        while not stop.is_set():
            batch = consumer.poll(200)
            consumed = [[tp.partition, r.offset] for tp, records in batch.items() for r in records]
            if consumed:
                emit({"consumed": consumed})
                try:
                    consumer.commit()
                except Exception as exc:  # a rebalance under way: the next owner re-reads (at-least-once)
                    emit({"commit_failed": repr(exc)})
    finally:
        consumer.close()


def run_confluent(bootstrap: str, topic: str, group: str, session_ms: int, stop: threading.Event) -> None:
    from confluent_kafka import Consumer, KafkaException

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "session.timeout.ms": session_ms,
                         "heartbeat.interval.ms": max(100, session_ms // 6), "fetch.wait.max.ms": 100,
                         "client.id": "member-confluent"})

    def on_assign(c, partitions):
        emit({"assigned": sorted(tp.partition for tp in partitions), "generation": -1, "member": c.memberid()})

    consumer.subscribe([topic], on_assign=on_assign)
    try:
        while not stop.is_set():
            messages = [m for m in consumer.consume(500, 0.2) if m.error() is None]
            if messages:
                emit({"consumed": [[m.partition(), m.offset()] for m in messages]})
                try:
                    consumer.commit(asynchronous=False)
                except KafkaException as exc:
                    emit({"commit_failed": repr(exc)})
    finally:
        consumer.close()


def main() -> None:
    lib, bootstrap, topic, group, session_ms = sys.argv[1:6]
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    runner = run_kafka_python if lib == "kafka-python" else run_confluent
    runner(bootstrap, topic, group, int(session_ms), stop)
    emit({"closed": True})


if __name__ == "__main__":
    main()
