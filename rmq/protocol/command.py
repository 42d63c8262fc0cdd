"""RemotingCommand: the one message type of the RocketMQ remoting protocol."""

from __future__ import annotations

import struct
from typing import Any

from . import header_codec
from .codes import CURRENT_VERSION, RPC_ONEWAY, RPC_TYPE, LanguageCode, ResponseCode, SerializeType
from .errors import RemoteProtocolError
from .frame import encode_frame

_WORD = struct.Struct(">i")
_STYPES = (SerializeType.JSON, SerializeType.ROCKETMQ)


def _as_ext(fields: dict[str, Any]) -> dict[str, str]:
    """extFields with every value a string (Java's toString), None values dropped."""
    for v in fields.values():  # a loop, not all(...): this runs for every request made
        if type(v) is not str:
            return {k: header_codec.ext_str(v) for k, v in fields.items() if v is not None}
    return dict(fields)


class RemotingCommand:
    """A request or response: code, header fields, extFields and an opaque body.

    `ext_fields` is a dict[str, str]. A decoded command parses its extFields on first
    access only: routing needs just code, flag and opaque. `serialize_type` is the
    header serialization the command travels in; a response made with
    `make_response` inherits its request's, so a peer always hears its own dialect.
    """

    __slots__ = (
        "code",
        "language",
        "version",
        "opaque",
        "flag",
        "remark",
        "body",
        "serialize_type",
        "_ext",
        "_ext_raw",
    )

    def __init__(
        self,
        code: int,
        ext_fields: dict[str, Any] | None = None,
        body: bytes = b"",
        *,
        remark: str | None = None,
        opaque: int = 0,
        flag: int = 0,
        language: int = LanguageCode.PYTHON,
        version: int = CURRENT_VERSION,
        serialize_type: int = SerializeType.JSON,
    ) -> None:
        self.code = code
        self.language: int = language
        self.version = version
        self.opaque = opaque
        self.flag = flag
        self.remark = remark
        self.body = body
        self.serialize_type = serialize_type
        self._ext: dict[str, str] | None = _as_ext(ext_fields) if ext_fields else {}
        self._ext_raw: bytes | None = None  # a decoded ROCKETMQ header's extFields block

    # -- constructors -----------------------------------------------------------------

    @classmethod
    def request(
        cls,
        code: int,
        ext_fields: dict[str, Any] | None = None,
        body: bytes = b"",
        *,
        oneway: bool = False,
        serialize_type: int = SerializeType.JSON,
    ) -> RemotingCommand:
        """A request; the connection that sends it assigns the opaque."""
        return cls(code, ext_fields, body, flag=RPC_ONEWAY if oneway else 0, serialize_type=serialize_type)

    def make_response(
        self,
        code: int = ResponseCode.SUCCESS,
        remark: str | None = None,
        ext_fields: dict[str, Any] | None = None,
        body: bytes = b"",
    ) -> RemotingCommand:
        """The response to this request: same opaque and serialization, response flag set."""
        return RemotingCommand(
            code,
            ext_fields,
            body,
            remark=remark,
            opaque=self.opaque,
            flag=RPC_TYPE,
            serialize_type=self.serialize_type,
        )

    # -- fields -----------------------------------------------------------------------

    @property
    def ext_fields(self) -> dict[str, str]:
        ext = self._ext
        if ext is None:
            raw = self._ext_raw  # a ROCKETMQ header's extFields block, read when asked for
            ext = header_codec.decode_binary_ext(raw) if isinstance(raw, bytes) else {}
            self._ext = ext
            self._ext_raw = None
        return ext

    @ext_fields.setter
    def ext_fields(self, value: dict[str, Any]) -> None:
        self._ext = _as_ext(value)
        self._ext_raw = None

    @property
    def is_response(self) -> bool:
        return bool(self.flag & RPC_TYPE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & RPC_ONEWAY)

    # -- codec ------------------------------------------------------------------------

    @classmethod
    def decode(cls, frame: bytes) -> RemotingCommand:
        """Parse one frame's content (what FrameDecoder yields: everything after the length)."""
        if len(frame) < 4:
            raise RemoteProtocolError(f"frame of {len(frame)} bytes has no header-length word")
        (word,) = _WORD.unpack_from(frame, 0)
        stype = (word >> 24) & 0xFF
        hlen = word & 0xFFFFFF
        if hlen > len(frame) - 4:
            raise RemoteProtocolError(f"bad header length {hlen} in a frame of {len(frame) + 4} bytes")
        header = frame[4 : 4 + hlen]
        ext: dict[str, str] | None = None
        raw: bytes | None = None
        if stype == SerializeType.JSON:  # extFields come parsed and as strings already
            code, lang, version, opaque, flag, remark, ext = header_codec.decode_json(header)
        elif stype == SerializeType.ROCKETMQ:
            code, lang, version, opaque, flag, remark, raw = header_codec.decode_binary(header)
        else:
            raise RemoteProtocolError(f"unknown serialize type {stype}")
        cmd = cls.__new__(cls)
        cmd.code = code
        cmd.language = lang
        cmd.version = version
        cmd.opaque = opaque
        cmd.flag = flag
        cmd.remark = remark
        cmd.body = frame[4 + hlen :]
        cmd.serialize_type = _STYPES[stype]
        cmd._ext = ext
        cmd._ext_raw = raw
        return cmd

    def encode(self) -> bytes:
        """The whole frame, length prefix included, in this command's serialize type."""
        if self.serialize_type == SerializeType.ROCKETMQ:
            header = header_codec.encode_binary(
                self.code, self.language, self.version, self.opaque, self.flag, self.remark, self.ext_fields
            )
        else:
            header = header_codec.encode_json_around(
                self.code, self.language, self.version, self.opaque, self.flag, self.remark, self._ext_json()
            )
        return encode_frame(self.serialize_type, header, self.body)

    def _ext_json(self) -> str:
        """extFields as encode_json_around takes them; a subclass may write them its own way."""
        ext = self.ext_fields
        return header_codec.encode_ext_json(ext) if ext else ""

    # -- value semantics (tests, logs) ------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RemotingCommand):
            return NotImplemented
        return (
            self.code == other.code
            and self.language == other.language
            and self.version == other.version
            and self.opaque == other.opaque
            and self.flag == other.flag
            and (self.remark or None) == (other.remark or None)
            and self.ext_fields == other.ext_fields
            and self.body == other.body
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        kind = "response" if self.is_response else ("oneway" if self.is_oneway else "request")
        return (
            f"<RemotingCommand {kind} code={self.code} opaque={self.opaque} remark={self.remark!r} "
            f"ext={self.ext_fields!r} body={len(self.body)}B>"
        )
