"""``minibroker certs DIR [--host NAME ...]``: a throw-away CA and a broker certificate.

For tests and compose environments, never production: writes ``ca.crt`` (a self-signed CA),
``ca.key``, ``broker.crt`` (signed by it, valid for every ``--host`` as a DNS name or IP
address, ``localhost`` and ``127.0.0.1`` by default) and ``broker.key``, all PEM, plus
``client.crt``/``client.key`` signed by the same CA for clients of ``--ssl-client-auth``.
Clients trust ``ca.crt`` (librdkafka ``ssl.ca.location``, Java ``ssl.truststore.type=PEM`` with
``ssl.truststore.location``, KafkaJS ``ssl.ca``). Keys are EC P-256, certificates valid 825 days.
"""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import os
import sys
from pathlib import Path

VALID_DAYS = 825


def _name(common_name: str):
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "minibroker throw-away"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _alt_names(hosts: list[str]):
    from cryptography import x509

    out: list = []
    for h in hosts:
        try:
            out.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            out.append(x509.DNSName(h))
    return out


def _write(path: Path, data: bytes, private: bool = False) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def write(directory: Path, hosts: list[str]) -> list[Path]:
    """Write the CA, the broker's and a client's certificate and key; the paths written."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID

    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    until = now + datetime.timedelta(days=VALID_DAYS)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("minibroker throw-away CA")
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now).not_valid_after(until)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False,
                                       data_encipherment=False, key_agreement=False,
                                       encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))

    def leaf(common_name: str, usage, alt: list[str] | None):
        key = ec.generate_private_key(ec.SECP256R1())
        b = (x509.CertificateBuilder().subject_name(_name(common_name)).issuer_name(ca_name)
             .public_key(key.public_key()).serial_number(x509.random_serial_number())
             .not_valid_before(now).not_valid_after(until)
             .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
             .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
             .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                            critical=False))
        if alt:
            b = b.add_extension(x509.SubjectAlternativeName(_alt_names(alt)), critical=False)
        return b.sign(ca_key, hashes.SHA256()), key

    broker, broker_key = leaf(hosts[0], ExtendedKeyUsageOID.SERVER_AUTH, hosts)
    client, client_key = leaf("minibroker-client", ExtendedKeyUsageOID.CLIENT_AUTH, None)

    def pem_key(k) -> bytes:
        return k.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                               serialization.NoEncryption())

    def pem_cert(c) -> bytes:
        return c.public_bytes(serialization.Encoding.PEM)

    files = {"ca.crt": (pem_cert(ca), False), "ca.key": (pem_key(ca_key), True),
             "broker.crt": (pem_cert(broker), False), "broker.key": (pem_key(broker_key), True),
             "client.crt": (pem_cert(client), False), "client.key": (pem_key(client_key), True)}
    out = []
    for name, (data, private) in files.items():
        _write(directory / name, data, private)
        out.append(directory / name)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="minibroker certs", description=__doc__.split("\n\n")[0])
    p.add_argument("directory", type=Path)
    p.add_argument("--host", action="append", default=None, metavar="NAME",
                   help="a host name or IP address the broker certificate is valid for "
                        "(repeatable; default localhost and 127.0.0.1)")
    a = p.parse_args(argv)
    hosts = a.host or ["localhost", "127.0.0.1"]
    try:
        written = write(a.directory, hosts)
    except OSError as e:
        print(f"minibroker certs: {e}", file=sys.stderr)
        return 1
    try:
        print("\n".join(str(p) for p in written), flush=True)
    except BrokenPipeError:  # `minibroker certs DIR | head`: not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    print(f"broker: --ssl-certfile {a.directory / 'broker.crt'} --ssl-keyfile {a.directory / 'broker.key'}"
          f"; clients trust {a.directory / 'ca.crt'}", file=sys.stderr)
    return 0
