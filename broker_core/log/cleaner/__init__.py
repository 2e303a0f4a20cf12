"""Log compaction (Kafka's log cleaner): keep the latest record of every key.

``offset_map`` (key hash -> latest offset, bounded), ``records`` (a chunk's
records as columns, key hashes), ``transactions`` (open transactions and
producer state), ``filter`` (the survivor rules, shared with the Spark job),
``cleaner`` (cleaning one log), ``log_cleaner_manager`` (which log next,
checkpoints, cleaning states) and ``log_cleaner`` (the threads).
``distributed`` holds the same algorithm cut into the stages of the Spark
compaction job, as plain functions on files reached through fsspec.
"""

from .cleaner import Cleaner, CleanerStats, LogCleaningAbortedError, LogToClean
from .log_cleaner import CleanResult, LogCleaner
from .offset_map import OffsetMap

__all__ = ["Cleaner", "CleanerStats", "CleanResult", "LogCleaner", "LogCleaningAbortedError", "LogToClean",
           "OffsetMap"]
