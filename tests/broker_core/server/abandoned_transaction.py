"""Begins a transaction, writes to every partition of a topic and is never heard of again (used by the
broker crash tests): prints ``written`` once every record is acknowledged, then waits to be killed.

    abandoned_transaction.py BOOTSTRAP TOPIC PARTITIONS TRANSACTIONAL_ID TRANSACTION_TIMEOUT_MS
"""

import sys
import time

from confluent_kafka import Producer


def main() -> None:
    bootstrap, topic, partitions, transactional_id, timeout_ms = sys.argv[1:6]
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                         "transaction.timeout.ms": int(timeout_ms)})
    producer.init_transactions(30)
    producer.begin_transaction()
    for partition in range(int(partitions)):
        producer.produce(topic, value=b"abandoned-%d" % partition, partition=partition)
    if producer.flush(30) != 0:
        raise SystemExit("records still unacknowledged after 30 s")
    print("written", flush=True)
    while True:
        time.sleep(60)


if __name__ == "__main__":
    main()
