"""The principal of a TLS client certificate: ``User:`` and the subject as Kafka writes it.

Kafka's default principal builder takes ``X500Principal.getName()``, the
subject in RFC 2253 form: the relative distinguished names from the last to
the first as encoded (``CN=client,OU=eng,O=seglog,C=US``), short attribute
names, special characters escaped with a backslash.
"""

from __future__ import annotations

from .principal import USER_TYPE, KafkaPrincipal

# ssl's long attribute names → RFC 2253's keywords (what Java writes; others go by ssl's name).
_KEYWORDS = {
    "commonName": "CN", "organizationName": "O", "organizationalUnitName": "OU", "countryName": "C",
    "stateOrProvinceName": "ST", "localityName": "L", "streetAddress": "STREET", "domainComponent": "DC",
    "userId": "UID",
}
_SPECIAL = set(',+"\\<>;')


def _escape(value: str) -> str:
    out = "".join(f"\\{c}" if c in _SPECIAL else c for c in value)
    if out.startswith(("#", " ")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


def subject_name(subject: tuple) -> str:
    """RFC 2253 text of a subject as ``SSLSocket.getpeercert()`` gives it (a tuple of RDNs)."""
    rdns = []
    for rdn in reversed(subject):
        rdns.append("+".join(f"{_KEYWORDS.get(name, name)}={_escape(value)}" for name, value in rdn))
    return ",".join(rdns)


def certificate_principal(peer_certificate: dict | None) -> KafkaPrincipal | None:
    """``User:<subject>`` of a verified client certificate; None when the client showed none."""
    if not peer_certificate or not peer_certificate.get("subject"):
        return None
    return KafkaPrincipal(USER_TYPE, subject_name(peer_certificate["subject"]))
