"""The Trio shell around rmq.protocol: RocketMQ remoting connections, servers, clients.

dispatcher = Dispatcher()
dispatcher.register(RequestCode.SEND_MESSAGE, SendProcessor(...), concurrency=16)
async with RemotingServer(dispatcher, ServerConfig(port=10911)) as server:
    ...

async with RemotingClient() as client:
    response = await client.invoke("127.0.0.1:10911", request, timeout=3.0)
"""

from rmq.later import Later as Later

from .abc import ProcessFunction as ProcessFunction
from .abc import RequestContext as RequestContext
from .abc import RequestProcessor as RequestProcessor
from .client import ClientConfig as ClientConfig
from .client import RemotingClient as RemotingClient
from .connection import Connection as Connection
from .connection import ConnectionStatistics as ConnectionStatistics
from .connection import Sent as Sent
from .dispatcher import BUSY_OVERLOAD as BUSY_OVERLOAD
from .dispatcher import BUSY_REJECT as BUSY_REJECT
from .dispatcher import Dispatcher as Dispatcher
from .dispatcher import Route as Route
from .errors import RemotingConnectError as RemotingConnectError
from .errors import RemotingError as RemotingError
from .errors import RemotingSendRequestError as RemotingSendRequestError
from .errors import RemotingTimeoutError as RemotingTimeoutError
from .errors import RemotingTooMuchRequestError as RemotingTooMuchRequestError
from .server import RemotingServer as RemotingServer
from .server import ServerConfig as ServerConfig
from .stages.codec import CommandStream as CommandStream
from .stages.tls import TlsMode as TlsMode

__all__ = [
    "BUSY_OVERLOAD",
    "BUSY_REJECT",
    "ClientConfig",
    "CommandStream",
    "Connection",
    "ConnectionStatistics",
    "Dispatcher",
    "Later",
    "ProcessFunction",
    "RemotingClient",
    "RemotingConnectError",
    "RemotingError",
    "RemotingSendRequestError",
    "RemotingServer",
    "RemotingTimeoutError",
    "RemotingTooMuchRequestError",
    "RequestContext",
    "RequestProcessor",
    "Route",
    "Sent",
    "ServerConfig",
    "TlsMode",
]
