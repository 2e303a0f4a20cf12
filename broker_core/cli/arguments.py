"""What every ``seglog`` command shares: its exit codes, the two errors a command raises for
people, and the argument types."""

from __future__ import annotations

import argparse

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command stopped by Ctrl-C


class UsageError(Exception):
    """Options that cannot work together: exit 2, as for any other bad command line."""


class CommandError(Exception):
    """A failure whose message is already written for people (the cause is chained)."""

    def __init__(self, message: str, exit_code: int = EXIT_ERROR):
        super().__init__(message)
        self.exit_code = exit_code


def non_negative(text: str) -> int:
    """An argparse type: a count of milliseconds or records, 0 or more."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value
