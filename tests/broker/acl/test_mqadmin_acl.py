"""mqadmin's ACL subcommands (updateAclConfig, deleteAccessConfig, updateGlobalWhiteAddr,
clusterAclConfigVersion) and its credentials, against a live broker with aclEnable=true."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import yaml

from rmq.protocol import RequestCode, ResponseCode
from rmq.tools import admin as mqadmin
from rmq.tools.aclopts import ACCESS_KEY_ENV, SECRET_KEY_ENV

from ..cluster import Cluster
from .conftest import ADMIN, signed_call
from .test_acl_broker import send_ext


async def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = await mqadmin.run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(autouse=True)
def _no_ambient_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (ACCESS_KEY_ENV, SECRET_KEY_ENV, "ROCKETMQ_HOME", "NAMESRV_ADDR"):
        monkeypatch.delenv(name, raising=False)


async def test_acl_subcommands(cluster: Cluster, acl_file: Path) -> None:
    ns, addr = cluster.namesrv.address, cluster.broker.address
    auth = ["--accessKey", ADMIN[0], "--secretKey", ADMIN[1]]

    # the account's own keys are -a / -s; the signing keys go before the command
    code, out, err = await run(
        *auth,
        "updateAclConfig",
        "-n",
        ns,
        "-b",
        addr,
        "-a",
        "RocketMQCli01",
        "-s",
        "12345678cli",
        "-t",
        "TopicCli=PUB|SUB,TopicNo=DENY",
        "-g",
        "GroupCli=SUB",
        "-i",
        "DENY",
        "-u",
        "SUB",
        "-w",
        "10.1.1.*",
        "-m",
        "false",
    )
    assert code == 0, err
    assert f"create or update plain access config to {addr} success." in out
    assert "12345678cli" not in out  # the secret is not echoed
    (account,) = [a for a in yaml.safe_load(acl_file.read_text())["accounts"] if a["accessKey"] == "RocketMQCli01"]
    assert account == {
        "accessKey": "RocketMQCli01",
        "secretKey": "12345678cli",
        "whiteRemoteAddress": "10.1.1.*",
        "admin": False,
        "defaultTopicPerm": "DENY",
        "defaultGroupPerm": "SUB",
        "topicPerms": ["TopicCli=PUB|SUB", "TopicNo=DENY"],
        "groupPerms": ["GroupCli=SUB"],
    }
    ok = await signed_call(
        cluster, RequestCode.SEND_MESSAGE, send_ext("TopicCli"), b"x", ("RocketMQCli01", "12345678cli")
    )
    assert ok.code == ResponseCode.SUCCESS, ok.remark

    # -c: every broker of the cluster; version listing
    code, out, err = await run("clusterAclConfigVersion", "-n", ns, "-c", "TestCluster", *auth)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split() == [
        "#Cluster",
        "Name",
        "#Broker",
        "Name",
        "#Broker",
        "Addr",
        "#AclFilePath",
        "#AclConfigVersionNum",
        "#AclLastUpdateTime",
    ]
    assert lines[1].split()[:5] == ["TestCluster", "broker-a", addr, str(acl_file), "1"]
    assert lines[-1] == "get cluster's plain access config version success."

    code, out, err = await run(
        "updateGlobalWhiteAddr", "-n", ns, "-c", "TestCluster", "-g", "127.0.0.1,10.9.*.*", *auth
    )
    assert code == 0, err
    assert out == f"update global white remote addresses to {addr} success.\n"
    assert yaml.safe_load(acl_file.read_text())["globalWhiteRemoteAddresses"] == ["127.0.0.1", "10.9.*.*"]

    # white-listed now: no credentials needed, also not for mqadmin
    code, out, err = await run("clusterAclConfigVersion", "-n", ns, "-b", addr)
    assert code == 0, err
    assert out.splitlines()[0].split()[4] == "2"  # two changes so far

    code, out, err = await run(*auth, "deleteAccessConfig", "-n", ns, "-b", addr, "-a", "RocketMQCli01")
    assert code == 0, err
    assert out == f"delete plain access config account from {addr} success.\naccount's accesskey is:RocketMQCli01\n"
    assert "RocketMQCli01" not in acl_file.read_text()
    code, out, err = await run(*auth, "deleteAclConfig", "-n", ns, "-b", addr, "-a", "RocketMQCli01")
    assert code == 1 and "answered DELETE_ACL_CONFIG_FAILED(210)" in err, err


async def test_credentials_from_options_environment_and_tools_yml(
    cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ns, addr = cluster.namesrv.address, cluster.broker.address
    code, _, err = await run("clusterAclConfigVersion", "-n", ns, "-b", addr)
    assert code == 1 and "AclException: No accessKey is configured" in err, err

    code, _, err = await run("clusterAclConfigVersion", "-n", ns, "-b", addr, "--accessKey", ADMIN[0])
    assert code == 1 and "give both the access key and the secret key" in err, err

    code, _, err = await run(
        "clusterAclConfigVersion", "-n", ns, "-b", addr, "--accessKey", ADMIN[0], "--secretKey", "x"
    )
    assert code == 1 and f"Check signature failed for accessKey={ADMIN[0]}" in err, err

    code, out, err = await run(
        "clusterAclConfigVersion", "-n", ns, "-b", addr, "--accessKey", ADMIN[0], "--secretKey", ADMIN[1]
    )
    assert code == 0 and "success" in out, err

    monkeypatch.setenv(ACCESS_KEY_ENV, ADMIN[0])
    monkeypatch.setenv(SECRET_KEY_ENV, ADMIN[1])
    code, out, err = await run("clusterAclConfigVersion", "-n", ns, "-b", addr)
    assert code == 0, err
    monkeypatch.delenv(ACCESS_KEY_ENV)
    monkeypatch.delenv(SECRET_KEY_ENV)

    home = tmp_path / "tools-home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "tools.yml").write_text(f"accessKey: {ADMIN[0]}\nsecretKey: {ADMIN[1]}\n")
    monkeypatch.setenv("ROCKETMQ_HOME", str(home))
    code, out, err = await run("clusterAclConfigVersion", "-n", ns, "-b", addr)
    assert code == 0, err

    # a non-admin account is refused the admin-only commands
    monkeypatch.delenv("ROCKETMQ_HOME")
    code, _, err = await run(
        "updateGlobalWhiteAddr",
        "-n",
        ns,
        "-b",
        addr,
        "-g",
        "*",
        "--accessKey",
        "RocketMQUser",
        "--secretKey",
        "12345678user",
    )
    assert code == 1 and "Need admin permission" in err, err
