"""Certificates from trustme written as PEM files, for the TLS tests.

certs = Certs.write(tmp_path)
certs.server_cert, certs.server_key   # for 127.0.0.1 and localhost, issued by certs.ca_path
certs.client_cert, certs.client_key   # a client certificate, issued by certs.client_ca_path
certs.server_props()                  # tls.server.* keys for broker.conf / the name server
certs.client_settings()               # TlsClientSettings that trust the server's CA
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

import trustme

from rmq.remoting.tlsconfig import TlsClientSettings

# One pair of CAs per test run: making keys is the slow part.
_SERVER_CA = trustme.CA()
_CLIENT_CA = trustme.CA()
_SERVER = _SERVER_CA.issue_cert("127.0.0.1", "localhost")
_CLIENT = _CLIENT_CA.issue_cert("client.rmq.test")
_STRANGER_CA = trustme.CA()
_STRANGER = _STRANGER_CA.issue_cert("stranger.rmq.test")


@dataclass(frozen=True)
class Certs:
    ca_path: str  # the CA of the server certificate
    server_cert: str
    server_key: str
    client_ca_path: str  # the CA of the client certificate
    client_cert: str
    client_key: str
    stranger_cert: str  # a client certificate from a CA nobody trusts
    stranger_key: str

    @classmethod
    def write(cls, directory: Path) -> Certs:
        directory.mkdir(parents=True, exist_ok=True)

        def put(name: str, data: bytes) -> str:
            path = directory / name
            path.write_bytes(data)
            return str(path)

        return cls(
            ca_path=put("ca.pem", _SERVER_CA.cert_pem.bytes()),
            server_cert=put("server.pem", b"".join(p.bytes() for p in _SERVER.cert_chain_pems)),
            server_key=put("server.key", _SERVER.private_key_pem.bytes()),
            client_ca_path=put("client-ca.pem", _CLIENT_CA.cert_pem.bytes()),
            client_cert=put("client.pem", b"".join(p.bytes() for p in _CLIENT.cert_chain_pems)),
            client_key=put("client.key", _CLIENT.private_key_pem.bytes()),
            stranger_cert=put("stranger.pem", b"".join(p.bytes() for p in _STRANGER.cert_chain_pems)),
            stranger_key=put("stranger.key", _STRANGER.private_key_pem.bytes()),
        )

    def server_props(self, mode: str = "enforcing", **extra: str) -> dict[str, str]:
        return {
            "tls.server.mode": mode,
            "tls.server.certPath": self.server_cert,
            "tls.server.keyPath": self.server_key,
            **extra,
        }

    def client_settings(self, **changes: object) -> TlsClientSettings:
        base: dict[str, object] = {"trust_cert_path": self.ca_path}
        base.update(changes)
        return TlsClientSettings(**base)  # type: ignore[arg-type]

    def client_context(self) -> ssl.SSLContext:
        return self.client_settings().ssl_context()
