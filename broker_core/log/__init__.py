"""The log layer (Kafka's ``kafka.log``): a partition's ``Log`` of segments, its loading and
recovery (``log_loader``), the ``LogManager`` of all partitions across log dirs with its
``Scheduler``, the stored topics (``topic_store``), the leases that let an outside cleaner
compact a partition (``compaction_leases``), and how a log dir fills up or fails
(``log_dir_capacity``, ``log_dir_failure``)."""
