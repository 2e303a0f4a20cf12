"""The broker's metrics plumbing, independent of what is measured: a cheap histogram for the request path,
the ``metrics.listener`` address, and the HTTP listener serving ``/metrics``, ``/healthz`` and ``/readyz``
(what the broker exports is ``broker_core/server/broker_metrics``)."""
