"""Data loss: offsets a query planned or read are gone (retention deleted them, the log was truncated).
With ``failOnDataLoss`` true (the default, as in Spark's Kafka source) the query fails naming them; with it
false, it goes on past them and says so in the log. Raised when planning ranges and when reading them."""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


class DataLossError(RuntimeError):
    """Offsets a query needed are gone (retention, truncation); raised when failOnDataLoss is true."""


def data_loss(message: str, fail_on_data_loss: bool) -> None:
    if fail_on_data_loss:
        raise DataLossError(message + ". Some data may have been lost because it is not available (retention "
                            "deleted it, or the log was truncated). If you want your query to go on, set the "
                            "option failOnDataLoss to false.")
    log.warning("%s; skipping ahead (failOnDataLoss is false)", message)
