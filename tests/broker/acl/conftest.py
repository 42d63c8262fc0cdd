"""ACL fixtures: a broker with `aclEnable=true` reading `<tmp>/home/conf/plain_acl.yml`.

`acl_home` holds the file (PLAIN_ACL below, unless a test module overrides `plain_acl`);
the broker re-reads it every 0.05 s here instead of every 2 s. `signed_call` sends a raw
request signed like a client with credentials.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rmq.broker.acl import service
from rmq.protocol import RemotingCommand
from rmq.protocol import acl as signing

from ..cluster import Cluster

ADMIN = ("RocketMQAdmin", "12345678admin")
USER = ("RocketMQUser", "12345678user")
SUB_ONLY = ("RocketMQSubOnly", "12345678sub")

PLAIN_ACL = """\
globalWhiteRemoteAddresses:
  - 10.10.103.*
accounts:
  - accessKey: RocketMQAdmin
    secretKey: 12345678admin
    whiteRemoteAddress:
    admin: true
  - accessKey: RocketMQUser
    secretKey: 12345678user
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - TopicPub=PUB|SUB
      - TopicSub=SUB
      - TopicDeny=DENY
    groupPerms:
      - GroupDeny=DENY
  - accessKey: RocketMQSubOnly
    secretKey: 12345678sub
    defaultTopicPerm: SUB
    defaultGroupPerm: SUB
"""


@pytest.fixture
def plain_acl() -> str:
    return PLAIN_ACL


@pytest.fixture
def acl_home(tmp_path: Path, plain_acl: str) -> Path:
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(plain_acl, encoding="utf-8")
    return home


@pytest.fixture
def acl_file(acl_home: Path) -> Path:
    return acl_home / "conf" / "plain_acl.yml"


@pytest.fixture
def broker_props(acl_home: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setattr(service, "WATCH_INTERVAL", 0.05)
    return {"aclEnable": "true", "rocketmqHome": str(acl_home)}


def signed(code: int, ext: dict[str, Any] | None, body: bytes, credentials: tuple[str, str] | None) -> RemotingCommand:
    request = RemotingCommand.request(code, ext, body)
    if credentials is not None:
        signing.sign(request.ext_fields, request.body, *credentials)
    return request


async def signed_call(
    cluster: Cluster,
    code: int,
    ext: dict[str, Any] | None = None,
    body: bytes = b"",
    credentials: tuple[str, str] | None = ADMIN,
) -> RemotingCommand:
    """`cluster.call`, signed with `credentials` (None: unsigned)."""
    return await cluster.client.invoke(cluster.broker.address, signed(code, ext, body, credentials), 5.0)
