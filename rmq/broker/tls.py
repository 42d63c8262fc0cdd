"""A broker's TLS, built once from its `tls.*` settings (docs/security.md).

Server side, `tls.server.*` applies to the main port, the VIP port and the HA port a master
serves its slaves on. Client side, `tls.enable` with `tls.client.*` makes this broker's own
connections use TLS: registration with the name servers, a slave's HA connection to its
master and its metadata copy from the master's main port.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from rmq.remoting import ClientConfig, TlsMode
from rmq.remoting.tlsconfig import TlsConfigError, client_ssl_context, server_ssl_context

from .config import BrokerConfig, ConfigError

CONNECT_TIMEOUT = 3.0  # seconds for TCP connect + TLS handshake of the broker's own connections


@dataclass(frozen=True, slots=True)
class BrokerTls:
    """What the servers and clients of one broker are built with.

    Attributes:
      mode: what the main, VIP and HA ports accept.
      server_context: their context; None when mode is DISABLED.
      client_context: the context of the broker's own connections; None: they are plain.
    """

    mode: TlsMode = TlsMode.DISABLED
    server_context: ssl.SSLContext | None = None
    client_context: ssl.SSLContext | None = None

    @classmethod
    def from_config(cls, config: BrokerConfig) -> BrokerTls:
        """Load the certificates. Raises ConfigError naming the key at fault."""
        mode = TlsMode(config.tls_server_mode.lower())
        server = client = None
        try:
            if mode is not TlsMode.DISABLED:
                server = server_ssl_context(
                    config.tls_server_cert_path,
                    config.tls_server_key_path,
                    key_password=config.tls_server_key_password or None,
                    need_client_auth=config.tls_server_need_client_auth,
                    trust_cert_path=config.tls_server_trust_cert_path or None,
                )
            if config.tls_enable:
                client = client_ssl_context(
                    cert_path=config.tls_client_cert_path or None,
                    key_path=config.tls_client_key_path or None,
                    key_password=config.tls_client_key_password or None,
                    trust_cert_path=config.tls_client_trust_cert_path or None,
                    auth_server=config.tls_client_auth_server,
                )
        except TlsConfigError as exc:
            raise ConfigError(f"broker config {exc.key}: {exc.message}") from None
        return cls(mode, server, client)

    def remoting_client_config(self) -> ClientConfig:
        """The RemotingClient settings for the broker's own connections."""
        return ClientConfig(
            connect_timeout=CONNECT_TIMEOUT, tls=self.client_context is not None, ssl_context=self.client_context
        )
