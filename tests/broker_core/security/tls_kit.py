"""A tiny certificate authority made in the test run: a CA, the broker's certificate (for 127.0.0.1 and
localhost) and client certificates, written as Kafka's PEM stores (KIP-651): a keystore file holding the
private key and the certificate chain, a truststore file holding the CA certificate."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from ipaddress import ip_address
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass(frozen=True)
class PemStores:
    """One party's files: ``keystore`` (key + chain), ``certificate`` and ``key`` apart (for clients that
    take them so), ``truststore`` (the CA)."""

    keystore: Path
    certificate: Path
    key: Path
    truststore: Path
    key_password: str | None = None


def _name(common_name: str, unit: str | None = None, organization: str | None = None) -> x509.Name:
    # Encoded from the broadest attribute to the narrowest, as certificates usually are.
    attributes = []
    if organization:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    if unit:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, unit))
    attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attributes)


class TestCa:
    """Issues certificates signed by a fresh CA; writes every file under ``directory``."""

    __test__ = False  # not a test class

    def __init__(self, directory: Path, name: str = "seglog-test-ca") -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        subject = _name(name)
        self.certificate = (
            x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
            .public_key(self._key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self._key, hashes.SHA256()))
        self.truststore = self.directory / f"{name}.truststore.pem"
        self.truststore.write_bytes(self.certificate.public_bytes(serialization.Encoding.PEM))

    def issue(self, file_name: str, common_name: str, *, unit: str | None = None,
              organization: str | None = None, hosts: tuple[str, ...] = (),
              key_password: str | None = None) -> PemStores:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        builder = (
            x509.CertificateBuilder().subject_name(_name(common_name, unit, organization))
            .issuer_name(self.certificate.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1)))
        if hosts:
            names = []
            for host in hosts:
                try:
                    names.append(x509.IPAddress(ip_address(host)))
                except ValueError:
                    names.append(x509.DNSName(host))
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        certificate = builder.sign(self._key, hashes.SHA256())
        encryption = (serialization.BestAvailableEncryption(key_password.encode()) if key_password
                      else serialization.NoEncryption())
        key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
        chain_pem = (certificate.public_bytes(serialization.Encoding.PEM)
                     + self.certificate.public_bytes(serialization.Encoding.PEM))
        stores = PemStores(self.directory / f"{file_name}.keystore.pem", self.directory / f"{file_name}.crt.pem",
                           self.directory / f"{file_name}.key.pem", self.truststore, key_password)
        stores.keystore.write_bytes(key_pem + chain_pem)
        stores.certificate.write_bytes(chain_pem)
        stores.key.write_bytes(key_pem)
        return stores

    def server(self, key_password: str | None = None) -> PemStores:
        return self.issue("broker", "localhost", organization="seglog", hosts=("127.0.0.1", "localhost"),
                          key_password=key_password)

    def client(self, common_name: str = "client", unit: str = "eng", organization: str = "seglog") -> PemStores:
        return self.issue(f"client-{common_name}", common_name, unit=unit, organization=organization)


def server_ssl_props(stores: PemStores, prefix: str = "", client_auth: str | None = None) -> dict[str, str]:
    """Broker settings for a TLS listener (``prefix``: ``listener.name.<l>.`` for one listener only)."""
    props = {f"{prefix}ssl.keystore.type": "PEM", f"{prefix}ssl.keystore.location": str(stores.keystore),
             f"{prefix}ssl.truststore.type": "PEM", f"{prefix}ssl.truststore.location": str(stores.truststore)}
    if stores.key_password:
        props[f"{prefix}ssl.key.password"] = stores.key_password
    if client_auth:
        props[f"{prefix}ssl.client.auth"] = client_auth
    return props
