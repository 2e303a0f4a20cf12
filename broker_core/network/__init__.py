"""The network layer: Kafka's socket server, its threads and the request channel.

An ``Acceptor`` per listener accepts connections and deals them to
``Processor`` threads (``num.network.threads``), which read size-prefixed
frames and put them on the ``RequestChannel``; ``num.io.threads`` handler
threads (``KafkaRequestHandlerPool``) run each request through the request
handler (``broker_core.server.kafka_apis.KafkaApis``) and send the response back
through the channel to the processor that owns the connection. Threads, not
asyncio: the storage layer blocks on files and the handlers may block on
locks, and Kafka's model maps onto threads one to one.

``BrokerServer`` (``broker_core.server.broker_server``) assembles all of it
around an embedded ``Broker``. Module map: ``socket_server``, ``acceptor``,
``processor``, ``request_channel``, ``network_receive`` (a size-prefixed
frame), ``connection_quotas``, ``endpoint`` (listeners).
"""

from .connection_quotas import ConnectionQuotas
from .endpoint import EndPoint, advertised_endpoints, parse_listeners
from .network_receive import InvalidReceiveError, NetworkReceive
from .request_channel import CloseConnectionResponse, NoOpResponse, Request, RequestChannel, SendResponse
from .socket_server import SocketServer

__all__ = [
    "CloseConnectionResponse",
    "ConnectionQuotas",
    "EndPoint",
    "InvalidReceiveError",
    "NetworkReceive",
    "NoOpResponse",
    "Request",
    "RequestChannel",
    "SendResponse",
    "SocketServer",
    "advertised_endpoints",
    "parse_listeners",
]
