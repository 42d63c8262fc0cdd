"""ACL 1.0 request signing and the ACL admin requests' headers and bodies (PROTOCOL.md 8).

The signature is the same for the Java client (AclClientRPCHook), the C++ client
(ClientRPCHook) and the broker that checks it (PlainAccessValidator):

    content   = the extFields' values, ordered by key, concatenated without separators,
                UTF-8 encoded, followed by the body bytes
    Signature = Base64(HMAC-SHA1(secretKey as UTF-8, content))

A signer adds `AccessKey` (and `SecurityToken` if it has one) before computing it, then
adds `Signature`; a verifier leaves `Signature` and `_UNIQUE_KEY_QUERY` out of the content.
The C++ client also signs its `OnsChannel` field; since it travels in extFields, the same
rule covers it. Numbers the C++ client sends as JSON numbers are signed as their decimal
text, which is what the command codec turns them into.

Keys are ordered as Java's TreeMap orders Strings (UTF-16 code units); for the ASCII header
names every client uses, that is plain byte order, which is also what the C++ std::map uses.

The content leaves out the request code (and opaque, flag, version, remark): a captured
signed request can be sent again under another code with the same fields, and passes. Our
clients therefore also put the code in the `RequestCode` field, which the signature then
covers; a broker with `aclRequireSignedRequestCode=true` requires it to be the request's
code (`signed_code_error`). A RocketMQ broker signs and checks every field, so it accepts
the extra one.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Collection, Iterable, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from .errors import RemoteProtocolError
from .headers import Header

ACCESS_KEY = "AccessKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"
ONS_CHANNEL = "OnsChannel"  # the C++ client's extra signed field
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"  # added by the broker side of queries; never signed
REQUEST_CODE = "RequestCode"  # ours: the request's code, so that the signature covers it

#: Fields a verifier leaves out of the signed content (PlainAccessValidator.parse).
VERIFY_EXCLUDES = frozenset({SIGNATURE, UNIQUE_KEY_QUERY})


def _java_key(key: str) -> bytes:
    return key.encode("utf-16-be", "surrogatepass")


def signing_content(
    ext_fields: Mapping[str, str], body: bytes | None = None, *, exclude: Collection[str] = (SIGNATURE,)
) -> bytes:
    """The bytes that are signed: values of `ext_fields` by key (minus `exclude`), then `body`."""
    keys: Iterable[str] = sorted(ext_fields)
    if not all(k.isascii() for k in ext_fields):
        keys = sorted(ext_fields, key=_java_key)
    # Java's getBytes(UTF-8) turns an unpaired surrogate into '?'; so does "replace"
    text = "".join(ext_fields[k] for k in keys if k not in exclude).encode("utf-8", "replace")
    return text + body if body else text


def calc_signature(content: bytes, secret_key: str) -> str:
    """Base64(HMAC-SHA1(secret_key, content)), as AclSigner.calSignature."""
    digest = hmac.new(secret_key.encode("utf-8", "replace"), content, hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")


def sign(
    ext_fields: MutableMapping[str, str],
    body: bytes | None,
    access_key: str,
    secret_key: str,
    security_token: str | None = None,
    *,
    code: int | None = None,
) -> str:
    """Sign a request's fields in place, as AclClientRPCHook.doBeforeRequest does: set
    AccessKey (and SecurityToken, and with `code` our RequestCode), then Signature over
    everything else. Returns it."""
    ext_fields.pop(SIGNATURE, None)
    ext_fields[ACCESS_KEY] = access_key
    if security_token is not None:
        ext_fields[SECURITY_TOKEN] = security_token
    if code is not None:
        ext_fields[REQUEST_CODE] = str(code)
    signature = calc_signature(signing_content(ext_fields, body), secret_key)
    ext_fields[SIGNATURE] = signature
    return signature


def verify_content(ext_fields: Mapping[str, str], body: bytes | None) -> bytes:
    """What a broker signs to check a received request (Signature and _UNIQUE_KEY_QUERY left out)."""
    return signing_content(ext_fields, body, exclude=VERIFY_EXCLUDES)


def signed_code_error(ext_fields: Mapping[str, str], code: int) -> str | None:
    """Why the request's RequestCode field (covered by its signature) does not vouch for
    `code`, the code it arrived with; None when it does."""
    signed = ext_fields.get(REQUEST_CODE)
    if signed is None:
        return f"the request code is not signed: no {REQUEST_CODE} field"
    if signed != str(code):
        return f"the signed request code {signed} is not the request's code {code}"
    return None


def signature_matches(content: bytes, secret_key: str, signature: str | None) -> bool:
    """Whether `signature` is the one `secret_key` gives `content` (compared in constant time)."""
    if signature is None:
        return False
    expected = calc_signature(content, secret_key)
    return hmac.compare_digest(expected.encode("ascii"), signature.encode("utf-8", "replace"))


# -- the ACL admin requests (codes 50-54) --------------------------------------------------------


@dataclass(slots=True)
class CreateAccessConfigRequestHeader(Header):
    """UPDATE_AND_CREATE_ACL_CONFIG (50). Lists travel comma-joined; None fields are left out."""

    access_key: str
    secret_key: str | None = None
    white_remote_address: str | None = None
    admin: bool = False
    default_topic_perm: str | None = None
    default_group_perm: str | None = None
    topic_perms: str | None = None
    group_perms: str | None = None


@dataclass(slots=True)
class DeleteAccessConfigRequestHeader(Header):
    """DELETE_ACL_CONFIG (51)."""

    access_key: str


@dataclass(slots=True)
class UpdateGlobalWhiteAddrsConfigRequestHeader(Header):
    """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53): addresses comma-joined; the file may be empty (the default one)."""

    global_white_addrs: str
    acl_file_full_path: str | None = None


@dataclass(slots=True)
class GetBrokerAclConfigResponseHeader(Header):
    """The answer to GET_BROKER_CLUSTER_ACL_INFO (52). `version` is a DataVersion as JSON;
    `all_acl_file_version` a JSON object: file path → DataVersion."""

    version: str
    broker_name: str
    broker_addr: str
    cluster_name: str
    all_acl_file_version: str | None = None


def split_list(text: str | None) -> list[str] | None:
    """UtilAll.split(text, ","): None stays None, empty items dropped."""
    if text is None:
        return None
    return [item.strip() for item in text.split(",") if item.strip()]


@dataclass(slots=True)
class PlainAccessConfig:
    """One account as plain_acl.yml and the ACL bodies carry it (common/PlainAccessConfig)."""

    access_key: str
    secret_key: str | None = None
    white_remote_address: str | None = None
    admin: bool = False
    default_topic_perm: str | None = None
    default_group_perm: str | None = None
    topic_perms: list[str] | None = None
    group_perms: list[str] | None = None

    def to_header(self) -> CreateAccessConfigRequestHeader:
        return CreateAccessConfigRequestHeader(
            access_key=self.access_key,
            secret_key=self.secret_key,
            white_remote_address=self.white_remote_address,
            admin=self.admin,
            default_topic_perm=self.default_topic_perm,
            default_group_perm=self.default_group_perm,
            topic_perms=None if self.topic_perms is None else ",".join(self.topic_perms),
            group_perms=None if self.group_perms is None else ",".join(self.group_perms),
        )

    @classmethod
    def from_header(cls, h: CreateAccessConfigRequestHeader) -> PlainAccessConfig:
        return cls(
            access_key=h.access_key,
            secret_key=h.secret_key,
            white_remote_address=h.white_remote_address,
            admin=h.admin,
            default_topic_perm=h.default_topic_perm,
            default_group_perm=h.default_group_perm,
            topic_perms=split_list(h.topic_perms),
            group_perms=split_list(h.group_perms),
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"accessKey": self.access_key}
        for key, value in (
            ("secretKey", self.secret_key),
            ("whiteRemoteAddress", self.white_remote_address),
            ("admin", self.admin),
            ("defaultTopicPerm", self.default_topic_perm),
            ("defaultGroupPerm", self.default_group_perm),
            ("topicPerms", self.topic_perms),
            ("groupPerms", self.group_perms),
        ):
            if value is not None:
                out[key] = value
        return out

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> PlainAccessConfig:
        """From a JSON object or a plain_acl.yml account; RemoteProtocolError if malformed."""
        if not isinstance(obj, Mapping):
            raise RemoteProtocolError(f"an account must be a mapping, got {type(obj).__name__}")

        def text(key: str) -> str | None:
            value = obj.get(key)
            if value is None:
                return None
            if isinstance(value, (dict, list)):
                raise RemoteProtocolError(f"{key} must be text, got {type(value).__name__}")
            return _yaml_text(value)

        def items(key: str) -> list[str] | None:
            value = obj.get(key)
            if value is None:
                return None
            if not isinstance(value, list):
                raise RemoteProtocolError(f"{key} must be a list, got {type(value).__name__}")
            return [_yaml_text(v) for v in value]

        access_key = text("accessKey")
        if access_key is None:
            raise RemoteProtocolError("an account has no accessKey")
        admin = obj.get("admin", False)
        if isinstance(admin, str):
            admin = admin.strip().lower() == "true"
        return cls(
            access_key=access_key,
            secret_key=text("secretKey"),
            white_remote_address=text("whiteRemoteAddress"),
            admin=bool(admin),
            default_topic_perm=text("defaultTopicPerm"),
            default_group_perm=text("defaultGroupPerm"),
            topic_perms=items("topicPerms"),
            group_perms=items("groupPerms"),
        )


def _yaml_text(value: Any) -> str:
    """A scalar as Java would read it into a String (YAML `12345678` is a number there too)."""
    if value is True:
        return "true"
    if value is False:
        return "false"
    return str(value)


@dataclass(slots=True)
class AclConfigBody:
    """The body of GET_BROKER_CLUSTER_ACL_CONFIG (54): GetBrokerClusterAclConfigResponseBody."""

    global_white_addrs: list[str] = field(default_factory=list)
    plain_access_configs: list[PlainAccessConfig] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "globalWhiteAddrs": list(self.global_white_addrs),
            "plainAccessConfigs": [c.to_json() for c in self.plain_access_configs],
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> AclConfigBody:
        if not isinstance(obj, Mapping):
            raise RemoteProtocolError("the ACL config body must be a JSON object")
        addrs = obj.get("globalWhiteAddrs") or []
        accounts = obj.get("plainAccessConfigs") or []
        if not isinstance(addrs, list) or not isinstance(accounts, list):
            raise RemoteProtocolError("globalWhiteAddrs and plainAccessConfigs must be lists")
        return cls([str(a) for a in addrs], [PlainAccessConfig.from_json(a) for a in accounts])
