"""What a request needs and whether its sender has it (PlainAccessValidator + PlainPermissionManager.validate).

`check(model, request, ip)` returns None when the request may go on, else the reason it
may not, in the order RocketMQ checks:

1. an address in globalWhiteRemoteAddresses passes, signed or not;
2. the request must carry an AccessKey the file knows;
3. an address in that account's whiteRemoteAddress passes unsigned;
4. the Signature must match the account's secretKey (rmq.protocol.acl); with
   `signed_code` (aclRequireSignedRequestCode) the signed RequestCode field must also be
   the request's code, so a captured request cannot be replayed under another code;
5. admin-only request codes need `admin: true`;
6. every resource the request names needs its permission: sends PUB on the topic;
   pulls, offset calls, heartbeats and the like SUB on the topic and on the group
   (a group as its retry topic, so `%RETRY%G` is group G). A send to RMQ_SYS_TRACE_TOPIC
   needs no permission.

`authenticate` (steps 1-4) and `authorize` (5-6) are its two halves; the gRPC proxy
(rmq.proxy.auth) checks its calls with them too, over the content its clients sign.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from rmq.protocol import RemotingCommand, RequestCode, code_name
from rmq.protocol import acl as signing
from rmq.protocol import body as json_body
from rmq.protocol.constants import RETRY_PREFIX, TRACE_TOPIC
from rmq.protocol.errors import ProtocolError

from .model import ANY, PUB, SUB, Account, AclModel, check_permission, describe_resource, perm_name

#: Codes only an admin account may send: RocketMQ's five (topic and group create, update,
#: delete; broker config) and the other changes an operator makes: offset resets, ACL
#: changes (and reading the accounts with their secrets), cleanups.
ADMIN_CODES = frozenset(
    {
        RequestCode.UPDATE_AND_CREATE_TOPIC,
        RequestCode.UPDATE_BROKER_CONFIG,
        RequestCode.DELETE_TOPIC_IN_BROKER,
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        RequestCode.DELETE_SUBSCRIPTIONGROUP,
        RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
        RequestCode.RESET_CONSUMER_OFFSET_IN_BROKER,
        RequestCode.CLONE_GROUP_OFFSET,
        RequestCode.UPDATE_AND_CREATE_ACL_CONFIG,
        RequestCode.DELETE_ACL_CONFIG,
        RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
        RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG,
        RequestCode.TRIGGER_DELETE_FILES,
        RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE,
        RequestCode.CLEAN_UNUSED_TOPIC,
        RequestCode.DELETE_EXPIRED_COMMITLOG,
    }
)

_SEND_V1 = frozenset({RequestCode.SEND_MESSAGE, RequestCode.SEND_REPLY_MESSAGE})
_SEND_V2 = frozenset({RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE, RequestCode.SEND_REPLY_MESSAGE_V2})


class AclDenied(Exception):
    """Why a request is refused; str() is the remark's message."""


def _retry(group: str | None) -> str | None:
    return RETRY_PREFIX + group if group else None


def _add(out: dict[str, int], resource: str | None, perm: int) -> None:
    if resource:
        out[resource] = perm


def needed_resources(request: RemotingCommand) -> dict[str, int]:
    """The topics and groups (as retry topics) `request` touches, with the permission each needs.

    Raises AclDenied when a body the check must read is malformed."""
    ext = request.ext_fields
    code = request.code
    out: dict[str, int] = {}
    if code in _SEND_V1 or code in _SEND_V2:
        topic = ext.get("topic" if code in _SEND_V1 else "b")
        # a send back to a retry topic is the group's business: SUB on the group it names
        _add(out, topic, SUB if topic and topic.startswith(RETRY_PREFIX) else PUB)
    elif code == RequestCode.CONSUMER_SEND_MSG_BACK:
        _add(out, _retry(ext.get("group")), SUB)
    elif code == RequestCode.PULL_MESSAGE:
        _add(out, ext.get("topic"), SUB)
        _add(out, _retry(ext.get("consumerGroup")), SUB)
    elif code == RequestCode.QUERY_MESSAGE:
        _add(out, ext.get("topic"), SUB)
    elif code in (RequestCode.UPDATE_CONSUMER_OFFSET, RequestCode.QUERY_CONSUMER_OFFSET):
        _add(out, _retry(ext.get("consumerGroup")), SUB)
        _add(out, ext.get("topic"), SUB)
    elif code in (RequestCode.UNREGISTER_CLIENT, RequestCode.GET_CONSUMER_LIST_BY_GROUP):
        _add(out, _retry(ext.get("consumerGroup")), SUB)
    elif code == RequestCode.HEART_BEAT:
        for group, topics in _heartbeat_consumers(request.body):
            _add(out, _retry(group), SUB)
            for topic in topics:
                _add(out, topic, SUB)
    elif code in (RequestCode.LOCK_BATCH_MQ, RequestCode.UNLOCK_BATCH_MQ):
        group, topics = _lock_body(request.body)
        _add(out, _retry(group), SUB)
        for topic in topics:
            _add(out, topic, SUB)
    return out


def _json(body: bytes, what: str) -> dict[str, object]:
    try:
        obj = json_body.loads(body) if body else {}
    except ProtocolError as exc:
        raise AclDenied(f"cannot read the {what} body to check its permissions: {exc}") from None
    if not isinstance(obj, dict):
        raise AclDenied(f"cannot read the {what} body to check its permissions: not a JSON object")
    return obj


def _heartbeat_consumers(body: bytes) -> Iterable[tuple[str | None, list[str]]]:
    obj = _json(body, "heartbeat")
    consumers = obj.get("consumerDataSet") or []
    if not isinstance(consumers, list):
        raise AclDenied("cannot read the heartbeat body to check its permissions: consumerDataSet is not a list")
    out = []
    for data in consumers:
        if not isinstance(data, dict):
            continue
        subs = data.get("subscriptionDataSet") or []
        topics = (
            [str(s["topic"]) for s in subs if isinstance(s, dict) and s.get("topic")] if isinstance(subs, list) else []
        )
        group = data.get("groupName")
        out.append((str(group) if group else None, topics))
    return out


def _lock_body(body: bytes) -> tuple[str | None, list[str]]:
    obj = _json(body, "lock")
    group = obj.get("consumerGroup")
    mqs = obj.get("mqSet") or []
    topics = (
        [str(mq["topic"]) for mq in mqs if isinstance(mq, dict) and mq.get("topic")] if isinstance(mqs, list) else []
    )
    return (str(group) if group else None), sorted(set(topics))


def authenticate(model: AclModel, ip: str, access_key: str | None, signed: Callable[[str], bool]) -> Account | None:
    """The account the request is signed by, checked in RocketMQ's order (steps 1-4 above);
    None when `ip` is white-listed, globally or for that account, which skips every other
    check. `signed(secret_key)` says whether the request's signature is the one that key
    gives: the remoting and the gRPC ports sign different content. Raises AclDenied."""
    if model.white_listed(ip):
        return None
    if not access_key:
        raise AclDenied(f"No accessKey is configured: the request is not signed and {ip} is not white-listed")
    account = model.accounts.get(access_key)
    if account is None:
        raise AclDenied(f"No acl config for {access_key}")
    if account.white.match(ip):
        return None
    if not signed(account.secret_key):
        raise AclDenied(f"Check signature failed for accessKey={access_key}")
    return account


def authorize(account: Account, needed: Mapping[str, int], *, admin_only: str | None = None) -> None:
    """Steps 5 and 6: `needed` maps each topic and group (as its retry topic) to the
    permission the request needs on it; `admin_only` names a request only admins may send.
    Raises AclDenied."""
    if needed.get(TRACE_TOPIC) == PUB:
        return
    if admin_only is not None and not account.admin:
        raise AclDenied(f"Need admin permission for request {admin_only}, but accessKey={account.access_key} is not")
    if not needed or (account.admin and not account.perms):
        return
    for resource, perm in needed.items():
        if not check_permission(perm, account.owned(resource)):
            wanted = "PUB or SUB" if perm & ANY else perm_name(perm)
            raise AclDenied(f"No {wanted} permission for {describe_resource(resource)}, accessKey={account.access_key}")


def check(model: AclModel, request: RemotingCommand, ip: str, *, signed_code: bool = False) -> None:
    """Raise AclDenied unless the client at `ip` may send `request` (see the module docstring)."""
    ext = request.ext_fields

    def signed(secret_key: str) -> bool:
        content = signing.verify_content(ext, request.body)
        return signing.signature_matches(content, secret_key, ext.get(signing.SIGNATURE))

    account = authenticate(model, ip, ext.get(signing.ACCESS_KEY), signed)
    if account is None:
        return
    if signed_code:
        why = signing.signed_code_error(ext, request.code)
        if why is not None:
            raise AclDenied(f"{why} (aclRequireSignedRequestCode=true), accessKey={account.access_key}")
    admin_only = code_name(request.code, response=False) if request.code in ADMIN_CODES else None
    authorize(account, needed_resources(request), admin_only=admin_only)
