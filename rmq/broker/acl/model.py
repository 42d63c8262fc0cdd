"""plain_acl.yml as plain data: accounts, permissions and white lists (PlainPermissionManager's model).

    globalWhiteRemoteAddresses:        # these addresses pass every check, unsigned
      - 10.10.103.*
    accounts:
      - accessKey: RocketMQ            # both keys longer than 6 characters
        secretKey: 12345678
        whiteRemoteAddress:            # this account's requests from here pass unsigned
        admin: false                   # admins may create and delete topics and groups ...
        defaultTopicPerm: DENY         # for topics not in topicPerms (absent: DENY)
        defaultGroupPerm: SUB          # for groups not in groupPerms (absent: DENY)
        topicPerms: [topicA=DENY, topicB=PUB|SUB, topicC=SUB]
        groupPerms: [groupA=DENY, groupB=PUB|SUB, groupC=SUB]

Permissions are DENY, PUB, SUB, PUB|SUB (or SUB|PUB). A group's permissions are kept
under its retry topic `%RETRY%<group>`, as RocketMQ keys them, so one table answers
for topics and groups.

`parse_acl` turns the YAML data into an AclModel or raises AclConfigError naming what is
wrong; nothing here touches a file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from rmq.protocol.acl import PlainAccessConfig
from rmq.protocol.bodies.configs import DataVersion
from rmq.protocol.constants import RETRY_PREFIX
from rmq.protocol.errors import ProtocolError

from .addresses import AddressPatternError, AddressStrategy, parse_pattern

DENY = 1
ANY = 2
PUB = 4
SUB = 8

MIN_KEY_LENGTH = 7  # RocketMQ refuses keys of 6 characters or fewer

_PERM_NAMES = {"DENY": DENY, "PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB}

GLOBAL_WHITE_ADDRS = "globalWhiteRemoteAddresses"
ACCOUNTS = "accounts"
DATA_VERSION = "dataVersion"


class AclConfigError(ValueError):
    """plain_acl.yml (or an ACL change) that cannot be used; the message says why."""


def parse_perm(text: str | None, what: str) -> int:
    """DENY / PUB / SUB / PUB|SUB → the bit mask; None → DENY; anything else AclConfigError."""
    if text is None:
        return DENY
    perm = _PERM_NAMES.get(text.strip().replace(" ", "").upper())
    if perm is None:
        raise AclConfigError(f"{what}: {text!r} is not DENY, PUB, SUB or PUB|SUB")
    return perm


def perm_name(perm: int) -> str:
    if perm & DENY:
        return "DENY"
    return {PUB: "PUB", SUB: "SUB", PUB | SUB: "PUB|SUB"}.get(perm & (PUB | SUB), "DENY")


def check_permission(needed: int, owned: int) -> bool:
    """Permission.checkPermission: DENY wins; ANY needs PUB or SUB; else a common bit."""
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & (PUB | SUB))
    return bool(needed & owned)


def is_group_resource(resource: str) -> bool:
    return resource.startswith(RETRY_PREFIX)


def describe_resource(resource: str) -> str:
    """ "topic:T" or "group:G" (PlainAccessResource.printStr)."""
    if is_group_resource(resource):
        return "group:" + resource[len(RETRY_PREFIX) :]
    return "topic:" + resource


def parse_resource_perms(items: list[str] | None, *, groups: bool, owner: str) -> dict[str, int]:
    """`["topicA=SUB", ...]` → {resource: perm}; groups are keyed by their retry topic."""
    out: dict[str, int] = {}
    what = "groupPerms" if groups else "topicPerms"
    for item in items or ():
        parts = [p.strip() for p in str(item).split("=") if p.strip()]
        if len(parts) != 2:
            raise AclConfigError(f"account {owner}: {what} entry {item!r} is not name=PERM, like topicA=SUB")
        name, perm = parts
        out[RETRY_PREFIX + name if groups else name] = parse_perm(perm, f"account {owner}: {what} entry {item!r}")
    return out


@dataclass(frozen=True)
class Account:
    """One account of plain_acl.yml, ready for checks."""

    access_key: str
    secret_key: str
    admin: bool
    default_topic_perm: int
    default_group_perm: int
    perms: Mapping[str, int]  # topic or %RETRY%group → perm
    white: AddressStrategy
    config: PlainAccessConfig  # as written in the file

    @classmethod
    def from_config(cls, config: PlainAccessConfig) -> Account:
        ak = config.access_key
        if len(ak) < MIN_KEY_LENGTH:
            raise AclConfigError(f"account {ak!r}: accessKey must be longer than 6 characters")
        if config.secret_key is None or len(config.secret_key) < MIN_KEY_LENGTH:
            raise AclConfigError(f"account {ak!r}: secretKey must be longer than 6 characters")
        try:
            white = parse_pattern(config.white_remote_address)
        except AddressPatternError as exc:
            raise AclConfigError(f"account {ak!r}: whiteRemoteAddress: {exc}") from None
        perms = parse_resource_perms(config.topic_perms, groups=False, owner=repr(ak))
        perms.update(parse_resource_perms(config.group_perms, groups=True, owner=repr(ak)))
        return cls(
            access_key=ak,
            secret_key=config.secret_key,
            admin=config.admin,
            default_topic_perm=parse_perm(config.default_topic_perm, f"account {ak!r}: defaultTopicPerm"),
            default_group_perm=parse_perm(config.default_group_perm, f"account {ak!r}: defaultGroupPerm"),
            perms=perms,
            white=white,
            config=config,
        )

    def owned(self, resource: str) -> int:
        perm = self.perms.get(resource)
        if perm is not None:
            return perm
        return self.default_group_perm if is_group_resource(resource) else self.default_topic_perm


@dataclass(frozen=True)
class AclModel:
    """Everything one plain_acl.yml says. `data` is the YAML mapping it came from."""

    global_white_addrs: tuple[str, ...] = ()
    global_white: tuple[AddressStrategy, ...] = ()
    accounts: Mapping[str, Account] = field(default_factory=dict)
    data_version: DataVersion | None = None  # as written in the file, if it is
    data: Mapping[str, Any] = field(default_factory=dict)

    def white_listed(self, ip: str) -> bool:
        return any(s.match(ip) for s in self.global_white)


def load_yaml(text: str | bytes) -> Mapping[str, Any]:
    """The YAML document as a mapping (an empty document is an empty mapping)."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise AclConfigError(f"not valid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise AclConfigError(f"the top level must be a mapping, not {type(data).__name__}")
    return data


def dump_yaml(data: Mapping[str, Any]) -> str:
    """Block-style YAML in the order of `data` (what SnakeYAML's dumpAsMap writes)."""
    return str(yaml.safe_dump(dict(data), default_flow_style=False, sort_keys=False, allow_unicode=True))


def parse_acl(data: Mapping[str, Any]) -> AclModel:
    """The model of a plain_acl.yml mapping; AclConfigError names the first problem."""
    addrs_raw = data.get(GLOBAL_WHITE_ADDRS) or []
    if not isinstance(addrs_raw, list):
        raise AclConfigError(f"{GLOBAL_WHITE_ADDRS} must be a list")
    addrs = tuple(str(a) for a in addrs_raw if a is not None)
    strategies = []
    for pattern in addrs:
        try:
            strategies.append(parse_pattern(pattern))
        except AddressPatternError as exc:
            raise AclConfigError(f"{GLOBAL_WHITE_ADDRS}: {exc}") from None
    accounts_raw = data.get(ACCOUNTS) or []
    if not isinstance(accounts_raw, list):
        raise AclConfigError(f"{ACCOUNTS} must be a list of accounts")
    accounts: dict[str, Account] = {}
    for n, raw in enumerate(accounts_raw, 1):
        try:
            config = PlainAccessConfig.from_json(raw)
        except ProtocolError as exc:
            raise AclConfigError(f"account #{n}: {exc}") from None
        if config.access_key in accounts:
            raise AclConfigError(f"account {config.access_key!r} is defined twice")
        accounts[config.access_key] = Account.from_config(config)
    return AclModel(addrs, tuple(strategies), accounts, _data_version(data.get(DATA_VERSION)), data)


def _data_version(raw: Any) -> DataVersion | None:
    """The `dataVersion: [{counter: N, timestamp: T}]` RocketMQ writes into the file."""
    if isinstance(raw, list) and raw:
        raw = raw[0]
    if not isinstance(raw, dict):
        return None
    try:
        return DataVersion.from_json(raw)
    except ValueError:
        return None
