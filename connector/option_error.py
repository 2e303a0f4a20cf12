"""The error a bad data source option raises."""


class SeglogOptionError(ValueError):
    """A bad data source option; the message names it."""
