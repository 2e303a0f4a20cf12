-- A look at a seglog log directory from the spark-sql shell: offsets and size
-- per partition, consumer group lag, and the segment files.
--
--   seglog sql -d logdir=$PWD/demo-data/logs -f examples/inspect.sql
--
-- (seglog sql is Spark's spark-sql shell set up for seglog; -d is --hivevar,
-- ${logdir} below is replaced before each statement runs.)
--
-- The views are TEMPORARY VIEWs on purpose: in this Spark version a
-- CREATE TABLE ... USING seglog OPTIONS (...) keeps the table but loses its
-- options for a Python data source, so the source would be read without
-- path and view. A temporary view keeps them and lives as long as the session.
-- No metastore table is created either, so nothing is left behind.
--
-- The views are read from the files when queried: run the SELECTs again to see
-- a running broker's progress.

-- Per partition: log start and end offsets, bytes and segments on disk, and the
-- first and last record timestamps (UTC).
CREATE TEMPORARY VIEW offsets USING seglog OPTIONS (path '${logdir}', view 'offsets');
SELECT * FROM offsets ORDER BY topic, partition;

-- Per consumer group and partition: committed offset, log end offset, lag (in
-- offsets, in bytes yet to fetch, and lag_ms: the age of the oldest unconsumed
-- record) and when the offset was committed.
CREATE TEMPORARY VIEW groups USING seglog OPTIONS (path '${logdir}', view 'groups');
SELECT * FROM groups ORDER BY `group`, topic, partition;

-- Per segment file: its offset range, size, time range and whether it is the
-- active (last, still written) segment of its partition.
CREATE TEMPORARY VIEW segments USING seglog OPTIONS (path '${logdir}', view 'segments');
SELECT * FROM segments ORDER BY topic, partition, base_offset;

-- Totals per topic (retained_offsets counts offsets: a compacted topic holds
-- fewer records than that).
SELECT topic, count(*) AS partitions, sum(log_end_offset - log_start_offset) AS retained_offsets,
       sum(size_bytes) AS size_bytes, min(first_timestamp) AS first_timestamp,
       max(last_timestamp) AS last_timestamp
FROM offsets GROUP BY topic ORDER BY topic;
