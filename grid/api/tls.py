"""TLS for the controller: the bind rule, the server's certificate, clients' verification, and a
throw-away certificate authority for logical fleets and tests.

Rules (docs/addressing.md):
- a controller bound to a non-loopback address serves HTTPS (`--tls-cert`, `--tls-key`), unless
  the operator says `--insecure-http` (then no client of ours sends it a credential: see
  `grid.wire.client`);
- clients verify the controller with `--ca-file` (a private CA) or the system store, and a
  certificate that is expired or issued by another CA is refused before any credential is sent.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import ssl
from dataclasses import dataclass
from pathlib import Path

from grid.fleet import GridError, atomic_write_text
from grid.wire import is_loopback


def check_bind(host: str, *, tls: bool, insecure_http: bool) -> None:
    """Refuse a plain-HTTP bind to a non-loopback address unless asked for explicitly."""
    if tls or insecure_http or is_loopback(host):
        return
    raise GridError(
        "insecure_bind",
        f"the controller would listen on {host} without TLS, so node and operator "
        "credentials would cross the network in the clear",
        fix="pass --tls-cert FILE --tls-key FILE (a certificate whose SAN names this address), "
        "or --insecure-http if a TLS proxy in front of it terminates the connection",
        next_command=f"grid up --host {host} --tls-cert cert.pem --tls-key key.pem",
    )


def check_server_files(cert: Path, key: Path) -> None:
    """Both files readable, the key owner-only, and they form a usable server context."""
    for label, path in (("certificate", cert), ("private key", key)):
        if not path.is_file():
            raise GridError(
                "tls_file_missing",
                f"the TLS {label} {path} does not exist",
                fix=f"pass the path of an existing PEM {label}",
                next_command="grid up --help",
            )
    if os.name == "posix" and key.stat().st_mode & 0o077:
        raise GridError(
            "tls_key_not_private",
            f"the TLS private key {key} is readable by other users",
            fix=f"chmod 600 {key}",
            next_command=f"chmod 600 {key}",
        )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(str(cert), str(key))
    except (ssl.SSLError, OSError, ValueError) as exc:
        raise GridError(
            "tls_files_invalid",
            f"{cert} and {key} are not a PEM certificate and its private key ({exc})",
            fix="pass the certificate chain and the key it was issued for",
            next_command="grid up --help",
        ) from None


# ----------------------------------------------------------------------------- a private CA


@dataclass(frozen=True)
class IssuedFiles:
    ca_file: Path
    cert_file: Path
    key_file: Path


def generate_ca_and_server(
    folder: Path,
    addresses: list[str],
    *,
    not_before: dt.datetime | None = None,
    not_after: dt.datetime | None = None,
    common_name: str = "Grid private CA",
    ca_days: int = 60,
) -> IssuedFiles:
    """A fresh CA and a server certificate for `addresses` (IPs or DNS names), written to
    `folder` (ca.pem, server.pem, server-key.pem; keys 0600). For logical fleets and tests."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = dt.datetime.now(dt.UTC)
    start = not_before or now - dt.timedelta(minutes=5)
    end = not_after or now + dt.timedelta(days=30)
    folder.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=ca_days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, key_cert_sign=True, crl_sign=True,
                content_commitment=False, key_encipherment=False, data_encipherment=False,
                key_agreement=False, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    names: list[x509.GeneralName] = []
    for address in addresses:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(address)))
        except ValueError:
            names.append(x509.DNSName(address))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, addresses[0])]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    files = IssuedFiles(folder / "ca.pem", folder / "server.pem", folder / "server-key.pem")
    files.ca_file.write_bytes(ca_cert.public_bytes(pem))
    files.cert_file.write_bytes(cert.public_bytes(pem))
    private = key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    atomic_write_text(files.key_file, private.decode("ascii"), 0o600)
    return files
