"""TLS settings under RocketMQ's names (rmq.remoting.tlsconfig): contexts, mutual TLS, tls.properties."""

from __future__ import annotations

import logging
import ssl
from pathlib import Path

import pytest
import trio

from rmq.protocol import RemotingCommand, RequestCode, ResponseCode
from rmq.remoting import ClientConfig, Dispatcher, RemotingClient, RemotingError, TlsMode
from rmq.remoting.testing import echo, serve_on_loopback
from rmq.remoting.tlsconfig import (
    TlsClientSettings,
    TlsConfigError,
    client_ssl_context,
    server_ssl_context,
    with_tls_config_file,
)

from ..tls_certs import Certs


@pytest.fixture
def certs(tmp_path: Path) -> Certs:
    return Certs.write(tmp_path / "certs")


def echo_dispatcher() -> Dispatcher:
    d = Dispatcher()
    d.register(RequestCode.SEND_MESSAGE, echo)
    return d


async def call(context: ssl.SSLContext | None, address: str) -> RemotingCommand:
    config = ClientConfig(tls=context is not None, ssl_context=context, connect_timeout=2)
    async with RemotingClient(config) as client:
        return await client.invoke(address, RemotingCommand.request(RequestCode.SEND_MESSAGE, {"k": "v"}), 2)


async def test_mutual_tls_require_refuses_a_client_without_a_trusted_certificate(
    certs: Certs, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="rmq.remoting")
    server_ctx = server_ssl_context(
        certs.server_cert, certs.server_key, need_client_auth="require", trust_cert_path=certs.client_ca_path
    )
    async with serve_on_loopback(echo_dispatcher(), tls_mode=TlsMode.ENFORCING, ssl_context=server_ctx) as server:
        trusted = client_ssl_context(
            trust_cert_path=certs.ca_path, cert_path=certs.client_cert, key_path=certs.client_key
        )
        assert (await call(trusted, server.address)).code == ResponseCode.SUCCESS
        for who, context in (
            ("no certificate", client_ssl_context(trust_cert_path=certs.ca_path)),
            (
                "a certificate from an untrusted CA",
                client_ssl_context(
                    trust_cert_path=certs.ca_path, cert_path=certs.stranger_cert, key_path=certs.stranger_key
                ),
            ),
        ):
            with trio.fail_after(10), pytest.raises(RemotingError):
                await call(context, server.address)
            assert any("TLS handshake failed" in r.getMessage() for r in caplog.records), who
            caplog.clear()


async def test_mutual_tls_optional_takes_clients_with_and_without_a_certificate(certs: Certs) -> None:
    server_ctx = server_ssl_context(
        certs.server_cert, certs.server_key, need_client_auth="optional", trust_cert_path=certs.client_ca_path
    )
    async with serve_on_loopback(echo_dispatcher(), tls_mode=TlsMode.ENFORCING, ssl_context=server_ctx) as server:
        anonymous = client_ssl_context(trust_cert_path=certs.ca_path)
        assert (await call(anonymous, server.address)).code == ResponseCode.SUCCESS
        known = client_ssl_context(
            trust_cert_path=certs.ca_path, cert_path=certs.client_cert, key_path=certs.client_key
        )
        assert (await call(known, server.address)).code == ResponseCode.SUCCESS
        stranger = client_ssl_context(
            trust_cert_path=certs.ca_path, cert_path=certs.stranger_cert, key_path=certs.stranger_key
        )
        with trio.fail_after(10), pytest.raises(RemotingError):
            await call(stranger, server.address)


async def test_the_client_verifies_the_server_unless_told_not_to(certs: Certs) -> None:
    server_ctx = server_ssl_context(certs.server_cert, certs.server_key)
    async with serve_on_loopback(echo_dispatcher(), tls_mode=TlsMode.ENFORCING, ssl_context=server_ctx) as server:
        # the system's CAs do not know trustme's CA
        with trio.fail_after(10), pytest.raises(RemotingError, match="CERTIFICATE_VERIFY_FAILED"):
            await call(client_ssl_context(), server.address)
        # authServer=false: encrypted, not authenticated (RocketMQ's default)
        unverified = TlsClientSettings.from_properties({"tls.client.authServer": "false"}).ssl_context()
        assert (await call(unverified, server.address)).code == ResponseCode.SUCCESS
        # the certificate names 127.0.0.1 and localhost, not this address
        port = server.address.rsplit(":", 1)[1]
        with trio.fail_after(10), pytest.raises(RemotingError):
            await call(certs.client_context(), f"127.0.0.2:{port}")


def test_encrypted_keys_need_their_password(tmp_path: Path, certs: Certs) -> None:
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key(Path(certs.server_key).read_bytes(), password=None)
    encrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"s3cret"),
    )
    (tmp_path / "enc.key").write_bytes(encrypted)
    server_ssl_context(certs.server_cert, str(tmp_path / "enc.key"), key_password="s3cret")
    with pytest.raises(TlsConfigError) as info:
        server_ssl_context(certs.server_cert, str(tmp_path / "enc.key"), key_password="wrong")
    assert info.value.key == "tls.server.certPath"


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"cert_path": None, "key_path": None}, "tls.server.certPath"),
        ({"need_client_auth": "sometimes"}, "tls.server.need.client.auth"),
        ({"need_client_auth": "require", "trust_cert_path": "/nonexistent/ca.pem"}, "tls.server.trustCertPath"),
    ],
)
def test_bad_server_settings_name_their_key(certs: Certs, kwargs: dict[str, str | None], key: str) -> None:
    args: dict[str, str | None] = {"cert_path": certs.server_cert, "key_path": certs.server_key, **kwargs}
    cert, key_path = args.pop("cert_path"), args.pop("key_path")
    with pytest.raises(TlsConfigError) as info:
        server_ssl_context(cert, key_path, **args)  # type: ignore[arg-type]
    assert info.value.key == key


def test_client_settings_from_a_tls_properties_file(tmp_path: Path, certs: Certs) -> None:
    path = tmp_path / "tls.properties"
    path.write_text(
        "# RocketMQ's tls.properties\n"
        "tls.test.mode.enable=false\n"
        "tls.enable=true\n"
        "tls.server.need.client.auth=require\n"
        f"tls.client.trustCertPath={certs.ca_path}\n"
        f"tls.client.certPath={certs.client_cert}\n"
        f"tls.client.keyPath={certs.client_key}\n"
    )
    settings = TlsClientSettings.load(path)
    assert settings == TlsClientSettings(
        enable=True, trust_cert_path=certs.ca_path, cert_path=certs.client_cert, key_path=certs.client_key
    )
    assert settings.ssl_context().verify_mode is ssl.CERT_REQUIRED
    # keys given directly win over the file's
    merged = with_tls_config_file(
        {"tls.config.file": str(path), "tls.enable": "false"}, ("tls.enable", "tls.client.trustCertPath")
    )
    assert merged == {"tls.config.file": str(path), "tls.enable": "false", "tls.client.trustCertPath": certs.ca_path}
    with pytest.raises(TlsConfigError, match="cannot read"):
        TlsClientSettings.load(tmp_path / "missing.properties")
    with pytest.raises(TlsConfigError, match="tls.client.authServer"):
        TlsClientSettings.from_properties({"tls.client.authServer": "maybe"})
