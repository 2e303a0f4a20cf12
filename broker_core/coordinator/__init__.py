"""Coordinators: ``group`` (the classic consumer group protocol and ``__consumer_offsets``);
the transaction coordinator will sit beside it."""
