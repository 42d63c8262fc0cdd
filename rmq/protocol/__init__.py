"""The sans-IO core of rmq: bytes in, objects out. Standard library only.

Message records (message.py), properties (properties.py), typed headers (headers.py),
the JSON dialect (body.py) and the bodies' value classes (bodies/), wire constants
(constants.py) and the construct schema (schema.py) are imported from their modules; this
package re-exports the frame and command layer.
"""

from .codes import CURRENT_VERSION as CURRENT_VERSION
from .codes import RPC_ONEWAY as RPC_ONEWAY
from .codes import RPC_TYPE as RPC_TYPE
from .codes import LanguageCode as LanguageCode
from .codes import RequestCode as RequestCode
from .codes import ResponseCode as ResponseCode
from .codes import SerializeType as SerializeType
from .codes import code_name as code_name
from .command import RemotingCommand as RemotingCommand
from .errors import FrameTooLarge as FrameTooLarge
from .errors import HeaderError as HeaderError
from .errors import LocalProtocolError as LocalProtocolError
from .errors import ProtocolError as ProtocolError
from .errors import RemoteProtocolError as RemoteProtocolError
from .frame import DEFAULT_MAX_FRAME_SIZE as DEFAULT_MAX_FRAME_SIZE
from .frame import FrameDecoder as FrameDecoder
from .frame import encode_frame as encode_frame

__all__ = [
    "CURRENT_VERSION",
    "DEFAULT_MAX_FRAME_SIZE",
    "RPC_ONEWAY",
    "RPC_TYPE",
    "FrameDecoder",
    "FrameTooLarge",
    "HeaderError",
    "LanguageCode",
    "LocalProtocolError",
    "ProtocolError",
    "RemoteProtocolError",
    "RemotingCommand",
    "RequestCode",
    "ResponseCode",
    "SerializeType",
    "code_name",
    "encode_frame",
]
