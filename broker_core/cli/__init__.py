"""The ``seglog`` command line (Kafka's tools in one command): ``seglog_command`` parses and runs it;
``broker_command``, ``compact_command`` and ``console_consumer`` are its larger commands,
``progress`` the progress lines they print, ``arguments`` the exit codes and errors they share."""

from .seglog_command import build_parser, main, report_error

__all__ = ["build_parser", "main", "report_error"]
