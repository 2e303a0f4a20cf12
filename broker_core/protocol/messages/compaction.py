"""CompactionLease and ReplaceSegments: seglog's own admin APIs for an outside compaction job.

A compaction job that reads a running broker's segment files directly (the
Spark job) leases the partitions it cleans, which pauses the broker's own
cleaner on them, and then asks the broker to swap its ``.cleaned`` segments
in, since only the broker, which has the logs open, may rename their files.
Both are declared like Kafka's APIs, flexible from v0, under keys no Kafka
client uses (``SeglogApiKey``).
"""

from __future__ import annotations

from ..api_keys import SeglogApiKey
from ..schema import F, api

__all__ = ["COMPACTION_LEASE", "REPLACE_SEGMENTS", "ACQUIRE", "RENEW", "RELEASE"]

#: CompactionLeaseRequest.Operation values.
ACQUIRE = 0
RENEW = 1
RELEASE = 2

COMPACTION_LEASE = api(
    SeglogApiKey.COMPACTION_LEASE, "0", flexible="0+",
    request=(
        # Chosen by the client (a uuid, say): it names the lease in every later request.
        F("LeaseId", "string", "0+"),
        F("Operation", "int8", "0+"),
        # How long the lease lasts after this request (ACQUIRE and RENEW).
        F("LeaseMs", "int32", "0+"),
        # Only ACQUIRE names partitions; RENEW and RELEASE act on every partition of the lease.
        F("Topics", "[]CompactionLeaseTopic", "0+", fields=(
            F("Name", "string", "0+"),
            F("Partitions", "[]int32", "0+"),
        )),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "0+"),
        F("ErrorCode", "int16", "0+"),
        F("ErrorMessage", "string", "0+", nullable="0+", default=None),
        F("Topics", "[]CompactionLeaseTopicResult", "0+", fields=(
            F("Name", "string", "0+"),
            F("Partitions", "[]CompactionLeasePartitionResult", "0+", fields=(
                F("PartitionIndex", "int32", "0+"),
                F("ErrorCode", "int16", "0+"),
                F("ErrorMessage", "string", "0+", nullable="0+", default=None),
                # The absolute path of the log dir holding the partition; empty on error.
                F("LogDir", "string", "0+"),
            )),
        )),
    ),
)

REPLACE_SEGMENTS = api(
    SeglogApiKey.REPLACE_SEGMENTS, "0", flexible="0+",
    request=(
        F("LeaseId", "string", "0+"),
        F("Topics", "[]ReplaceSegmentsTopic", "0+", fields=(
            F("Name", "string", "0+"),
            F("Partitions", "[]ReplaceSegmentsPartition", "0+", fields=(
                F("PartitionIndex", "int32", "0+"),
                # The partition's new cleaner checkpoint: the first offset not cleaned.
                F("CleanedThroughOffset", "int64", "0+"),
                F("Segments", "[]CleanedSegment", "0+", fields=(
                    # The cleaned segment's files are <20-digit base>.log.cleaned and its indexes.
                    F("BaseOffset", "int64", "0+"),
                    # The current segments it replaces, in offset order; the first is BaseOffset.
                    F("ReplacedBaseOffsets", "[]int64", "0+"),
                )),
            )),
        )),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "0+"),
        F("Topics", "[]ReplaceSegmentsTopicResult", "0+", fields=(
            F("Name", "string", "0+"),
            F("Partitions", "[]ReplaceSegmentsPartitionResult", "0+", fields=(
                F("PartitionIndex", "int32", "0+"),
                F("ErrorCode", "int16", "0+"),
                F("ErrorMessage", "string", "0+", nullable="0+", default=None),
            )),
        )),
    ),
)
