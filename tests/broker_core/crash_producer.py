"""Produces numbered records into ``events`` until killed (used by the crash tests).

Every record's value is its own offset, zero-padded, so a reader can tell a
gap, a duplicate or a damaged record at a glance. After each flush the flushed
offset is written, durably, to the marker file named on the command line.
"""

import os
import random
import sys

from broker_core import Broker
from format.layout import TopicPartition
from format.record import SimpleRecord


def main() -> None:
    log_dir, marker, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rng = random.Random(seed)
    with Broker(log_dir, {"log.segment.bytes": "20000", "log.index.interval.bytes": "512"},
                background=False) as broker:
        if "events" not in broker.list_topics():
            broker.create_topic("events", 1)
        log = broker.log_manager.get_log(TopicPartition("events", 0))
        next_offset = log.log_end_offset
        print("ready", flush=True)
        while True:
            n = rng.randint(1, 40)
            batch = [SimpleRecord(b"%012d" % (next_offset + i) + b"." * rng.randint(0, 200), None,
                                  1_800_000_000_000 + next_offset + i) for i in range(n)]
            metadata = broker.produce("events", batch, partition=0)
            assert metadata[0].offset == next_offset, (metadata[0].offset, next_offset)
            next_offset += n
            if rng.random() < 0.05:
                log.flush()
                broker.log_manager.checkpoint_recovery_points()
                tmp = marker + ".tmp"
                with open(tmp, "w") as f:
                    f.write(str(log.recovery_point))
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, marker)


if __name__ == "__main__":
    main()
