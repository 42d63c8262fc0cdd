"""The name server's TLS keys: tls.server.* from its properties file or a tls.properties
(`tls.config.file`), and client certificates required with tls.server.need.client.auth."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import trio

from rmq.namesrv.config import ConfigError, NamesrvConfig
from rmq.namesrv.server import NamesrvServer
from rmq.protocol import RemotingCommand, RequestCode, ResponseCode
from rmq.remoting import ClientConfig, RemotingClient, RemotingError

from ..tls_certs import Certs


def test_tls_keys_come_from_a_tls_properties_file(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    certs = Certs.write(tmp_path / "certs")
    tls_properties = tmp_path / "tls.properties"
    tls_properties.write_text(
        f"tls.server.certPath={certs.server_cert}\n"
        f"tls.server.keyPath={certs.server_key}\n"
        "tls.server.keyPassword=hidden\n"
        "tls.server.need.client.auth=OPTIONAL\n"
        f"tls.client.trustCertPath={certs.ca_path}\n"  # a client key: no use to a name server, no warning
        "tls.server.mode=disabled\n"
        "tls.bogus=1\n"
    )
    caplog.set_level(logging.WARNING)
    config, unknown = NamesrvConfig().with_properties(
        {"tls.server.mode": "Enforcing", "tls.config.file": str(tls_properties)}
    )
    assert unknown == []
    assert config.tls_mode == "enforcing"  # the properties given directly win over the file
    assert (config.tls_cert_path, config.tls_key_path) == (certs.server_cert, certs.server_key)
    assert config.tls_need_client_auth == "optional" and config.tls_key_password == "hidden"
    assert config.to_properties()["tls.server.keyPassword"] == "******"
    assert [r.getMessage() for r in caplog.records] == [f"{tls_properties}: ignoring unknown key 'tls.bogus'"]

    with pytest.raises(ConfigError) as info:
        NamesrvConfig().with_properties({"tls.config.file": str(tmp_path / "missing")})
    assert info.value.key == "tls.config.file"
    with pytest.raises(ConfigError) as info:
        NamesrvConfig().with_properties({"tls.server.need.client.auth": "always"})
    assert info.value.key == "tls.server.need.client.auth"


async def test_name_server_requires_trusted_client_certificates(tmp_path: Path) -> None:
    certs = Certs.write(tmp_path / "certs")
    config = NamesrvConfig(
        listen_host="127.0.0.1",
        listen_port=0,
        kv_config_path=None,
        tls_mode="enforcing",
        tls_cert_path=certs.server_cert,
        tls_key_path=certs.server_key,
        tls_need_client_auth="require",
        tls_trust_cert_path=certs.client_ca_path,
    )

    async def call(context_settings: object) -> RemotingCommand:
        context = certs.client_settings(**context_settings).ssl_context()  # type: ignore[arg-type]
        async with RemotingClient(ClientConfig(tls=True, ssl_context=context)) as client:
            request = RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO)
            return await client.invoke(namesrv.address, request, 3)

    async with NamesrvServer(config) as namesrv:
        assert (await call({"cert_path": certs.client_cert, "key_path": certs.client_key})).code == ResponseCode.SUCCESS
        with trio.fail_after(10), pytest.raises(RemotingError):
            await call({})
