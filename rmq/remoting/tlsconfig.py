"""TLS settings under RocketMQ's key names (TlsSystemConfig), and the ssl contexts built from them.

Server side (name server; broker main, VIP and HA ports):

    tls.server.mode               disabled | permissive | enforcing (stages/tls.py)
    tls.server.certPath           PEM certificate chain
    tls.server.keyPath            PEM private key
    tls.server.keyPassword        the key's password, if it is encrypted
    tls.server.need.client.auth   none | optional | require: ask clients for a certificate
    tls.server.trustCertPath      PEM CA file (or directory) client certificates must chain to

Client side (our client and tools, a broker's connections to its name servers and master):

    tls.enable                    connect with TLS
    tls.client.certPath           PEM certificate to present (mutual TLS)
    tls.client.keyPath            its PEM private key
    tls.client.keyPassword        the key's password, if it is encrypted
    tls.client.trustCertPath      PEM CA file (or directory) the server must chain to
    tls.client.authServer         verify the server's certificate and address (default true)

`tls.config.file` names a properties file holding any of these keys (RocketMQ's
tls.properties); keys given directly win over the file's. Two RocketMQ keys are accepted and
have no effect: `tls.test.mode.enable` (no self-signed certificates are made up) and
`tls.server.authClient` (a client certificate, when asked for, is always verified).
Unlike RocketMQ, whose default is false, `tls.client.authServer` defaults to true.
"""

from __future__ import annotations

import logging
import os
import ssl
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from rmq.protocol import javaprops

from .stages.tls import TlsMode

log = logging.getLogger("rmq.remoting.tls")

TLS_CONFIG_FILE = "tls.config.file"
TLS_MODES = tuple(mode.value for mode in TlsMode)
NEED_CLIENT_AUTH = ("none", "optional", "require")

SERVER_KEYS = (
    "tls.server.mode",
    "tls.server.certPath",
    "tls.server.keyPath",
    "tls.server.keyPassword",
    "tls.server.need.client.auth",
    "tls.server.trustCertPath",
)
CLIENT_KEYS = (
    "tls.enable",
    "tls.client.certPath",
    "tls.client.keyPath",
    "tls.client.keyPassword",
    "tls.client.trustCertPath",
    "tls.client.authServer",
)
# RocketMQ keys accepted without effect (module docstring)
INERT_KEYS = ("tls.test.mode.enable", "tls.server.authClient")
ALL_KEYS = frozenset((*SERVER_KEYS, *CLIENT_KEYS, *INERT_KEYS, TLS_CONFIG_FILE))

_VERIFY = {"none": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL, "require": ssl.CERT_REQUIRED}


class TlsConfigError(ValueError):
    """A TLS setting that cannot be used; `key` is the RocketMQ key it came from."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key
        self.message = message


# -- contexts --------------------------------------------------------------------------------


def server_ssl_context(
    cert_path: str | None,
    key_path: str | None,
    *,
    key_password: str | None = None,
    need_client_auth: str = "none",
    trust_cert_path: str | None = None,
) -> ssl.SSLContext:
    """The context a server hands to `negotiate` (RocketMQ's TlsHelper.buildSslContext(false)).

    `need_client_auth` "optional" asks for a client certificate and verifies it if one
    comes; "require" refuses a client without one. Either way it must chain to
    `trust_cert_path` (default: the system's CAs).

    Raises TlsConfigError naming the key at fault.
    """
    if not (cert_path and key_path):
        raise TlsConfigError("tls.server.certPath", "TLS needs tls.server.certPath and tls.server.keyPath")
    need = need_client_auth.strip().lower() or "none"
    if need not in _VERIFY:
        raise TlsConfigError(
            "tls.server.need.client.auth", f"must be one of {', '.join(NEED_CLIENT_AUTH)}, not {need!r}"
        )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _load_chain(context, cert_path, key_path, key_password, "tls.server")
    if need != "none":
        context.verify_mode = _VERIFY[need]
        _load_trust(context, trust_cert_path, ssl.Purpose.CLIENT_AUTH, "tls.server.trustCertPath")
    return context


def client_ssl_context(
    *,
    cert_path: str | None = None,
    key_path: str | None = None,
    key_password: str | None = None,
    trust_cert_path: str | None = None,
    auth_server: bool = True,
) -> ssl.SSLContext:
    """The context a client connects with (TlsHelper.buildSslContext(true)).

    With `auth_server` the server's certificate must chain to `trust_cert_path` (default:
    the system's CAs) and name the address connected to; without it anything is accepted,
    which protects against eavesdropping only. `cert_path` (and `key_path`, default the
    same file) is presented to a server that asks for a client certificate.

    Raises TlsConfigError naming the key at fault.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if auth_server:
        _load_trust(context, trust_cert_path, ssl.Purpose.SERVER_AUTH, "tls.client.trustCertPath")
    else:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if cert_path:
        _load_chain(context, cert_path, key_path or None, key_password, "tls.client")
    elif key_path:
        raise TlsConfigError("tls.client.certPath", "tls.client.keyPath is set without tls.client.certPath")
    return context


def _load_chain(context: ssl.SSLContext, cert: str, key: str | None, password: str | None, prefix: str) -> None:
    try:
        context.load_cert_chain(os.path.expanduser(cert), os.path.expanduser(key) if key else None, password or None)
    except (OSError, ssl.SSLError) as exc:
        raise TlsConfigError(f"{prefix}.certPath", f"cannot load the certificate and key: {exc}") from None


def _load_trust(context: ssl.SSLContext, trust: str | None, purpose: ssl.Purpose, key: str) -> None:
    if not trust:
        context.load_default_certs(purpose)
        return
    path = os.path.expanduser(trust)
    try:
        if os.path.isdir(path):
            context.load_verify_locations(capath=path)
        else:
            context.load_verify_locations(cafile=path)
    except (OSError, ssl.SSLError) as exc:
        raise TlsConfigError(key, f"cannot load trusted certificates from {trust}: {exc}") from None


# -- client settings -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class TlsClientSettings:
    """A client's TLS settings (`tls.enable`, `tls.client.*`), e.g. from a tls.properties file:

        settings = TlsClientSettings.load("tls.properties")
        async with Producer("group", namesrv, tls=settings): ...

    Attributes:
      enable: connect with TLS (`tls.enable`); `Producer(tls=settings)` connects with TLS
        whatever this says, it matters where a file decides (`--tls-config`).
      cert_path, key_path, key_password: the client certificate for mutual TLS.
      trust_cert_path: CAs the server's certificate must chain to (default: the system's).
      auth_server: verify the server (`tls.client.authServer`, default true).
    """

    enable: bool = True
    cert_path: str | None = None
    key_path: str | None = None
    key_password: str | None = None
    trust_cert_path: str | None = None
    auth_server: bool = True

    def ssl_context(self) -> ssl.SSLContext:
        """Build the context. Raises TlsConfigError naming the key at fault."""
        return client_ssl_context(
            cert_path=self.cert_path,
            key_path=self.key_path,
            key_password=self.key_password,
            trust_cert_path=self.trust_cert_path,
            auth_server=self.auth_server,
        )

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> TlsClientSettings:
        """From `tls.enable` and `tls.client.*` keys (others are ignored); `tls.enable`
        defaults to false here, as in RocketMQ. `tls.config.file`, if given, is read first."""
        props = with_tls_config_file(props, CLIENT_KEYS)

        def text(key: str) -> str | None:
            value = props.get(key, "").strip()
            return value or None

        return cls(
            enable=parse_bool("tls.enable", props.get("tls.enable", "false")),
            cert_path=text("tls.client.certPath"),
            key_path=text("tls.client.keyPath"),
            key_password=text("tls.client.keyPassword"),
            trust_cert_path=text("tls.client.trustCertPath"),
            auth_server=parse_bool("tls.client.authServer", props.get("tls.client.authServer", "true")),
        )

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> TlsClientSettings:
        """From a tls.properties file. Raises TlsConfigError if it cannot be read."""
        return cls.from_properties({TLS_CONFIG_FILE: os.fspath(path)})


def parse_bool(key: str, text: str) -> bool:
    low = text.strip().lower()
    if low not in ("true", "false"):
        raise TlsConfigError(key, f"{text!r} is not true or false")
    return low == "true"


# -- tls.config.file ---------------------------------------------------------------------


def read_tls_config_file(path: str) -> dict[str, str]:
    """Every key of a tls.properties file. Raises TlsConfigError if it cannot be read."""
    try:
        with open(os.path.expanduser(path), encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise TlsConfigError(TLS_CONFIG_FILE, f"cannot read {path}: {exc.strerror or exc}") from None
    return javaprops.parse(text)


def with_tls_config_file(props: Mapping[str, str], known: Collection[str]) -> dict[str, str]:
    """`props` with the keys of the file named by its `tls.config.file` filled in beneath it.

    Only keys in `known` are taken from the file; other TLS keys (a name server has no use
    for tls.client.*) are skipped quietly and anything else is logged as unknown.
    Raises TlsConfigError if the file cannot be read.
    """
    out = dict(props)
    path = out.get(TLS_CONFIG_FILE, "").strip()
    if not path:
        return out
    for key, value in read_tls_config_file(path).items():
        if key in known:
            out.setdefault(key, value)
        elif key not in ALL_KEYS:
            log.warning("%s: ignoring unknown key %r", path, key)
    return out
