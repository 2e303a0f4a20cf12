"""TLS contexts from Kafka's SSL settings, with PEM keystores and truststores (KIP-651).

``ssl.keystore.location`` is a PEM file holding the private key (encrypted
with ``ssl.key.password`` or not) and the certificate chain;
``ssl.truststore.location`` a PEM file of the certificates to trust. The
broker builds one server context per TLS listener (``server_ssl_context``),
seglog's client one from its Kafka client properties
(``client_ssl_context``). A file that is missing, unreadable or not PEM is
refused when the context is built — at broker start-up — with an error
naming the setting and the file.

``ssl.client.auth`` is ``none``, ``requested`` or ``required``; as in Kafka, a
SASL_SSL listener asks for client certificates only when the setting is given
with the listener's prefix (``listener.name.sasl_ssl.ssl.client.auth``): there
SASL authenticates the client.
"""

from __future__ import annotations

import os
import ssl
from typing import Callable, Mapping

from ..errors import InvalidConfigurationError

PEM = "PEM"
CLIENT_AUTH_MODES = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
_TLS_VERSIONS = {
    "TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
DEFAULT_ENABLED_PROTOCOLS = "TLSv1.2,TLSv1.3"
# Kafka names cipher suites as the IANA registry does; OpenSSL has its own names for the TLS 1.2 ones.
_IANA_TO_OPENSSL = {
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256": "DHE-RSA-AES128-GCM-SHA256",
    "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384": "DHE-RSA-AES256-GCM-SHA384",
}
# TLS 1.3 suites cannot be narrowed through Python's ssl; named, they are accepted as always enabled.
_TLS13_SUITES = frozenset({"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"})

#: ``(value, key it came from)`` for a setting name — a listener's override or the plain setting.
Lookup = Callable[[str], tuple[str | None, str]]


def _invalid(key: str, value: object, reason: str) -> InvalidConfigurationError:
    return InvalidConfigurationError(f"Invalid value {value} for configuration {key}: {reason}",
                                     config_name=key, value=value)


def _readable_file(lookup: Lookup, name: str) -> tuple[str | None, str]:
    path, key = lookup(name)
    if path is None or not path.strip():
        return None, key
    path = path.strip()
    if not os.path.isfile(path):
        raise _invalid(key, path, "no such file")
    try:
        with open(path, "rb") as f:
            f.read(1)
    except OSError as exc:
        raise _invalid(key, path, f"the file cannot be read ({exc.strerror})") from exc
    return path, key


def _check_pem_type(lookup: Lookup, name: str) -> None:
    store_type, key = lookup(name)
    if store_type is not None and store_type.strip().upper() != PEM:
        raise _invalid(key, store_type, "only PEM stores are read (set it to PEM and give a PEM file)")


def _load_keystore(context: ssl.SSLContext, lookup: Lookup, *, required: bool, listener: str) -> None:
    _check_pem_type(lookup, "ssl.keystore.type")
    path, key = _readable_file(lookup, "ssl.keystore.location")
    if path is None:
        if required:
            raise _invalid(key, None, f"listener {listener} serves TLS and needs a PEM file with its private key "
                                      f"and certificate chain")
        return
    password, password_key = lookup("ssl.key.password")
    try:
        context.load_cert_chain(path, password=password or None)
    except ssl.SSLError as exc:
        raise _invalid(key, path, f"no private key and certificate chain could be read from this PEM file "
                                  f"(wrong {password_key}, or not a PEM keystore): {exc.reason or exc}") from exc


def _load_truststore(context: ssl.SSLContext, lookup: Lookup) -> bool:
    _check_pem_type(lookup, "ssl.truststore.type")
    path, key = _readable_file(lookup, "ssl.truststore.location")
    if path is None:
        return False
    try:
        context.load_verify_locations(cafile=path)
    except ssl.SSLError as exc:
        raise _invalid(key, path, f"no PEM certificate could be read from this file: {exc.reason or exc}") from exc
    return True


def _set_protocols(context: ssl.SSLContext, lookup: Lookup) -> None:
    value, key = lookup("ssl.enabled.protocols")
    names = [p.strip() for p in (value or DEFAULT_ENABLED_PROTOCOLS).split(",") if p.strip()]
    unknown = [n for n in names if n not in _TLS_VERSIONS]
    if unknown or not names:
        raise _invalid(key, value, f"the protocols must be among {', '.join(_TLS_VERSIONS)}")
    versions = sorted(_TLS_VERSIONS[n] for n in names)
    context.minimum_version = versions[0]
    context.maximum_version = versions[-1]


def _set_ciphers(context: ssl.SSLContext, lookup: Lookup) -> None:
    value, key = lookup("ssl.cipher.suites")
    names = [c.strip() for c in (value or "").split(",") if c.strip()]
    if not names:
        return
    openssl_names = [_IANA_TO_OPENSSL.get(n, n) for n in names if n not in _TLS13_SUITES]
    if not openssl_names:
        return
    try:
        context.set_ciphers(":".join(openssl_names))
    except ssl.SSLError as exc:
        raise _invalid(key, value, "none of these cipher suites is available") from exc


def server_ssl_context(lookup: Lookup, listener: str, security_protocol: str, *,
                       client_auth_overridden: bool) -> ssl.SSLContext:
    """The context a TLS listener serves with; ``lookup`` resolves the listener's settings."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _set_protocols(context, lookup)
    _set_ciphers(context, lookup)
    _load_keystore(context, lookup, required=True, listener=listener)
    has_truststore = _load_truststore(context, lookup)
    client_auth, key = lookup("ssl.client.auth")
    mode = (client_auth or "none").strip().lower()
    if mode not in CLIENT_AUTH_MODES:
        raise _invalid(key, client_auth, f"it must be one of {', '.join(CLIENT_AUTH_MODES)}")
    if security_protocol == "SASL_SSL" and not client_auth_overridden:
        mode = "none"  # SASL authenticates SASL_SSL clients, unless the listener itself asks for certificates
    if mode != "none" and not has_truststore:
        raise _invalid(key, client_auth, f"client certificates cannot be checked on listener {listener} without "
                                         f"ssl.truststore.location")
    context.verify_mode = CLIENT_AUTH_MODES[mode]
    return context


def client_ssl_context(props: Mapping[str, str] | Lookup) -> ssl.SSLContext:
    """The context seglog's client connects with, from Kafka client properties (``ssl.truststore.location``,
    ``ssl.keystore.location`` for a client certificate, ``ssl.endpoint.identification.algorithm``), or from a
    ``Lookup`` (a broker reaching other brokers with its inter-broker listener's settings)."""
    lookup: Lookup = props if callable(props) else lambda name: (props.get(name), name)  # noqa: E731
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _set_protocols(context, lookup)
    _set_ciphers(context, lookup)
    if not _load_truststore(context, lookup):
        context.load_default_certs()
    _load_keystore(context, lookup, required=False, listener="")
    algorithm = lookup("ssl.endpoint.identification.algorithm")[0]
    context.check_hostname = (algorithm if algorithm is not None else "https").strip().lower() == "https"
    return context
