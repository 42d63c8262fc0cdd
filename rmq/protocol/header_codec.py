"""The two header serializations of a RemotingCommand (PROTOCOL.md 1.2, 1.3).

JSON: fastjson's shape (sorted keys, nulls omitted, compact). Incoming extFields values
may be any JSON scalar (the C++ client sends numbers); they are read as their Java
string form. Outgoing values are always strings (Go and C++ clients drop the rest).

ROCKETMQ: a fixed 13-byte prefix (code, language, version, opaque, flag), then remark
and extFields as length-prefixed UTF-8. Its extFields block is kept as bytes and parsed
only when a processor asks for it.
"""

from __future__ import annotations

import json
import struct
from typing import Any

import orjson

from .body import has_surrogate_escape, scrub_surrogates
from .codes import LanguageCode
from .errors import LocalProtocolError, RemoteProtocolError

# code int16, language byte, version int16, opaque int32, flag int32
BINARY_PREFIX = struct.Struct(">hBhii")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")

_LANG_BY_NAME = {lang.name: lang for lang in LanguageCode}
_LANG_BY_VALUE = {lang.value: lang for lang in LanguageCode}

_json_decode = json.JSONDecoder().decode
# orjson parses a header in a third of the standard scanner's time (1.0 against 2.9 µs for a
# send's); the scanner stays for what orjson refuses or reads differently (see decode_json)
_orjson_loads = orjson.loads
_OrjsonError = orjson.JSONDecodeError
_json_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def ext_str(value: Any) -> str:
    """A value as Java would stringify it into extFields."""
    if isinstance(value, str):
        return value
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (int, float)):
        return str(value)
    return _json_encode(value)


def coerce_ext(raw: Any) -> dict[str, str]:
    """extFields as parsed from JSON → dict[str, str]; nulls dropped."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise RemoteProtocolError(f"extFields must be a JSON object, got {type(raw).__name__}")
    for v in raw.values():
        if type(v) is not str:
            break
    else:  # the usual case (Java, Go and our clients send strings): the parsed dict as it is
        return raw
    try:
        return {str(k): ext_str(v) for k, v in raw.items() if v is not None}
    except RecursionError:  # a value nested nearly as deep as the decoder allows
        raise RemoteProtocolError("extFields value nested too deeply") from None


_INT_FIELDS = (("code", None), ("version", 0), ("opaque", 0), ("flag", 0))


def _int_field(obj: dict[str, Any], key: str, default: int | None = None) -> int:
    value = obj.get(key, default)
    if type(value) is int:
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            pass
    raise RemoteProtocolError(f"header field {key!r} must be an integer, got {value!r}")


# The C scanner behind json.loads, called directly: the header is one object, and what
# follows it may only be whitespace (the C++ client ends its header with a newline).
_scan_once = json.decoder.JSONDecoder().scan_once  # type: ignore[attr-defined]
_encode_basestring = json.encoder.encode_basestring
_LANG_NAME = {lang.value: lang.name for lang in LanguageCode}


def _plain_ext(ext: Any) -> dict[str, str] | None:
    """orjson's extFields as `coerce_ext` gives them, or None where the scanner must read
    them: not an object, or holding a float (orjson's reading of an integer past 64 bits) or
    a nested value. One pass over the values in the usual case, all strings."""
    if type(ext) is not dict:
        return None
    for v in ext.values():
        if type(v) is not str:
            break
    else:
        return ext
    for v in ext.values():
        if type(v) not in _PLAIN:
            return None
    return coerce_ext(ext)


_PLAIN = {str, int, bool, type(None)}  # what orjson and the scanner read alike


def decode_json(header: bytes) -> tuple[int, LanguageCode, int, int, int, str | None, dict[str, str] | None]:
    """Parse a JSON header → (code, language, version, opaque, flag, remark, extFields as
    `coerce_ext` gives them, None when absent)."""
    try:
        obj = _orjson_loads(header)
    except _OrjsonError:  # NaN, a lone surrogate, bad UTF-8 or JSON: the scanner below decides
        obj = None
    if type(obj) is dict:
        # orjson's parse is taken as it is only where it is what the scanner gives: orjson
        # refuses lone surrogates (nothing to scrub) but reads an integer past 64 bits as a
        # float, so anything that is not a plain field goes to the scanner
        get = obj.get
        code, version, opaque, flag = get("code"), get("version", 0), get("opaque", 0), get("flag", 0)
        lang_raw, remark, ext = get("language", "JAVA"), get("remark"), get("extFields")
        if (
            type(code) is type(version) is type(opaque) is type(flag) is int
            and type(lang_raw) is str
            and (remark is None or type(remark) is str)
            and (ext is None or (ext := _plain_ext(ext)) is not None)
        ):
            return code, _LANG_BY_NAME.get(lang_raw, LanguageCode.OTHER), version, opaque, flag, remark, ext
    return _decode_scanned(header)


def _decode_scanned(header: bytes) -> tuple[int, LanguageCode, int, int, int, str | None, dict[str, str] | None]:
    """decode_json by the standard library's scanner: every header orjson's parse is not taken for."""
    try:
        text = header.decode("utf-8")
        # whitespace before the object is allowed, as orjson and fastjson allow it
        obj, end = _scan_once(text, len(text) - len(text.lstrip(" \t\n\r")))
    except (UnicodeDecodeError, ValueError, StopIteration, RecursionError) as exc:
        raise RemoteProtocolError(f"header is not valid JSON: {exc!r}") from None
    if end != len(text) and text[end:].strip():
        raise RemoteProtocolError("header JSON has trailing characters")
    if type(obj) is not dict:
        raise RemoteProtocolError("header JSON is not an object")
    if has_surrogate_escape(text):
        obj = scrub_surrogates(obj)
    return _fields(obj)


def _fields(obj: dict[str, Any]) -> tuple[int, LanguageCode, int, int, int, str | None, dict[str, str] | None]:
    code, version, opaque, flag = obj.get("code"), obj.get("version", 0), obj.get("opaque", 0), obj.get("flag", 0)
    if not (type(code) is type(version) is type(opaque) is type(flag) is int):  # else strings to coerce, or bad
        code, version, opaque, flag = (_int_field(obj, k, d) for k, d in _INT_FIELDS)
    lang_raw = obj.get("language", "JAVA")
    if type(lang_raw) is str:
        language = _LANG_BY_NAME.get(lang_raw, LanguageCode.OTHER)
    elif type(lang_raw) is int:
        language = _LANG_BY_VALUE.get(lang_raw, LanguageCode.OTHER)
    else:
        raise RemoteProtocolError(f"header field 'language' has a bad value {lang_raw!r}")
    remark = obj.get("remark")
    if remark is not None and type(remark) is not str:
        remark = ext_str(remark)
    ext = obj.get("extFields")
    if ext is not None:
        if type(ext) is not dict:
            raise RemoteProtocolError("header field 'extFields' must be an object")
        ext = coerce_ext(ext)
    return code, language, version, opaque, flag, remark, ext


_KEYS: dict[str, str] = {}  # extFields name -> its encoded form and the colon
_KEYS_LIMIT = 4096


def encode_ext_json(ext: dict[str, str]) -> str:
    """extFields as JSON members, ``"k":"v",...`` without the braces (what ``encode_json_around``
    takes)."""
    enc = _encode_basestring
    keys = _KEYS
    if len(keys) > _KEYS_LIMIT:  # names are a few dozen header fields; never grow unbounded
        keys.clear()
    return ",".join(
        [
            (keys.get(k) or keys.setdefault(k, enc(k) + ":")) + enc(v if type(v) is str else ext_str(v))
            for k, v in ext.items()
        ]
    )


def encode_json(
    code: int, language: int, version: int, opaque: int, flag: int, remark: str | None, ext: dict[str, str] | None
) -> bytes:
    """fastjson's shape: fields in alphabetical order, nulls left out, no whitespace."""
    return encode_json_around(code, language, version, opaque, flag, remark, encode_ext_json(ext) if ext else "")


def encode_json_around(
    code: int, language: int, version: int, opaque: int, flag: int, remark: str | None, ext_json: str
) -> bytes:
    """``encode_json`` with the extFields already encoded (``encode_ext_json``'s form; "" for none).

    Assembled by hand: this runs for every frame, and the generic encoder's Python-level
    wrapper costs more than the work.
    """
    ext_part = f',"extFields":{{{ext_json}}}' if ext_json else ""
    remark_part = "" if remark is None else f',"remark":{_encode_basestring(remark)}'
    return (
        f'{{"code":{int(code)}{ext_part},"flag":{int(flag)},"language":"{_LANG_NAME.get(language, "OTHER")}",'
        f'"opaque":{int(opaque)}{remark_part},"serializeTypeCurrentRPC":"JSON","version":{int(version)}}}'
    ).encode()


def decode_binary(header: bytes) -> tuple[int, LanguageCode, int, int, int, str | None, bytes | None]:
    """Parse a ROCKETMQ header → (code, language, version, opaque, flag, remark, raw ext block)."""
    n = len(header)
    if n < BINARY_PREFIX.size + 8:
        raise RemoteProtocolError(f"binary header of {n} bytes is shorter than the 21-byte minimum")
    code, lang, version, opaque, flag = BINARY_PREFIX.unpack_from(header, 0)
    pos = BINARY_PREFIX.size
    (rlen,) = _I32.unpack_from(header, pos)
    pos += 4
    if rlen < 0 or pos + rlen + 4 > n:
        raise RemoteProtocolError(f"binary header: bad remark length {rlen}")
    remark = _utf8(header[pos : pos + rlen]) if rlen else None
    pos += rlen
    (elen,) = _I32.unpack_from(header, pos)
    pos += 4
    if elen < 0 or pos + elen != n:
        raise RemoteProtocolError(f"binary header: bad extFields length {elen}")
    ext = header[pos:] if elen else None
    return code, _LANG_BY_VALUE.get(lang, LanguageCode.OTHER), version, opaque, flag, remark, ext


def decode_binary_ext(block: bytes) -> dict[str, str]:
    """Parse a ROCKETMQ extFields block: (int16 klen, key, int32 vlen, value)*."""
    out: dict[str, str] = {}
    pos, n = 0, len(block)
    while pos < n:
        if pos + 2 > n:
            raise RemoteProtocolError("binary extFields: truncated key length")
        (klen,) = _I16.unpack_from(block, pos)
        pos += 2
        if klen < 0 or pos + klen + 4 > n:
            raise RemoteProtocolError(f"binary extFields: bad key length {klen}")
        key = _utf8(block[pos : pos + klen])
        pos += klen
        (vlen,) = _I32.unpack_from(block, pos)
        pos += 4
        if vlen < 0 or pos + vlen > n:
            raise RemoteProtocolError(f"binary extFields: bad value length {vlen}")
        out[key] = _utf8(block[pos : pos + vlen])
        pos += vlen
    return out


def encode_binary(
    code: int, language: int, version: int, opaque: int, flag: int, remark: str | None, ext: dict[str, str] | None
) -> bytes:
    if not -32768 <= code <= 32767 or not -32768 <= version <= 32767:
        raise LocalProtocolError(f"code {code} / version {version} does not fit the binary header's int16")
    parts = [BINARY_PREFIX.pack(code, language & 0xFF, version, opaque, flag)]
    rbytes = remark.encode("utf-8") if remark else b""
    parts += [_I32.pack(len(rbytes)), rbytes]
    block = bytearray()
    for key, value in (ext or {}).items():
        if key is None or value is None:
            continue
        kb, vb = key.encode("utf-8"), ext_str(value).encode("utf-8")
        if len(kb) > 32767:
            raise LocalProtocolError(f"extFields key of {len(kb)} bytes does not fit int16")
        block += _I16.pack(len(kb)) + kb + _I32.pack(len(vb)) + vb
    parts += [_I32.pack(len(block)), bytes(block)]
    return b"".join(parts)


def _utf8(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RemoteProtocolError(f"binary header: invalid UTF-8: {exc}") from None
