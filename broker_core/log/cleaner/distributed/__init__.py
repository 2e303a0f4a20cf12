"""The distributed cleaner: the compaction job's steps as plain functions, with no Spark in them;
``connector.compaction_job`` wires them into Spark.

Driver, before: take the lease (``compaction_lease``: the log dir's lock file,
or a lease from the broker running on it), settle what an earlier interrupted
swap left (``recover_partition``, the log loader's rules; a running broker
settles its own), and plan each partition with the broker cleaner's rules
(``plan_partition``): first dirty offset from ``cleaner-offset-checkpoint``,
first uncleanable offset (active segment, ``min.compaction.lag.ms``), segment
groups.

Stage 1 (``run_map_task``, a task per ~256 MiB of a partition's segments):
the keys of the cleanable segments are hashed; those of the dirty section are
reduced to their latest offset, the others kept as candidates; every segment
also reports the headers of its producers' batches. Pieces of one partition
merge (``merge_pieces``), and ``clean_inputs`` turns the partition's result
into the offsets that survive (``broker_core.log.cleaner.survivors``), cut by the
offset ranges of its stage-2 tasks.

Stage 2 (``run_clean_task``, a task per ~256 MiB of segment groups, or one per
partition when it holds transactions, whose state runs through the log in
order): each group is cleaned by the broker's own ``clean_group``, records
chosen by offset, into ``.cleaned`` files beside the originals (built locally
and uploaded for object storage).

Driver, after: per partition, the cleaned segments are swapped in by Kafka's
renames (``swap_partition``) and ``cleaner-offset-checkpoint`` moves to the end
of the cleaned range, or the broker holding the lease does both; then the
replaced files are deleted.

Module map: ``compaction_lease`` (the lease), ``remote_segments`` (segments as
a listing shows them, on any fsspec filesystem), ``partition_plan`` (planning
and cutting the work into tasks), ``map_stage`` (stage 1), ``clean_stage``
(stage 2), ``segment_swap`` (the swap and its recovery), ``compaction_report``
(what the job did, per partition).
"""


class CompactionError(RuntimeError):
    """The job cannot run as asked (a topic that is not compacted, a log dir in use)."""
