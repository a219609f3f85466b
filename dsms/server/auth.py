"""Users and SCRAM-SHA-256 password authentication (RFC 5802/7677, as PostgreSQL does it).

The users file has one ``name:secret`` a line (``#`` starts a comment),
where the secret is a password or a PostgreSQL SCRAM verifier
(``SCRAM-SHA-256$4096:<salt>$<StoredKey>:<ServerKey>``, what
``pg_authid.rolpassword`` holds), so the file need not hold passwords.
Only verifiers are kept in memory.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
from dataclasses import dataclass

from ..errors import DsmsError

ITERATIONS = 4096


@dataclass(frozen=True)
class Verifier:
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes

    @classmethod
    def from_password(cls, password: str, salt: bytes | None = None, iterations: int = ITERATIONS) -> "Verifier":
        salt = salt or secrets.token_bytes(16)
        salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
        client_key = hmac.digest(salted, b"Client Key", "sha256")
        return cls(salt, iterations, hashlib.sha256(client_key).digest(), hmac.digest(salted, b"Server Key", "sha256"))

    @classmethod
    def parse(cls, text: str) -> "Verifier":
        head, keys = text.split("$", 1)[1].split("$")
        iterations, salt = head.split(":")
        stored, server = keys.split(":")
        b64 = base64.b64decode
        return cls(b64(salt), int(iterations), b64(stored), b64(server))

    def text(self) -> str:
        b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
        return f"SCRAM-SHA-256${self.iterations}:{b64(self.salt)}${b64(self.stored_key)}:{b64(self.server_key)}"


def load_users(path: str) -> dict[str, Verifier]:
    """Read a users file (see the module docstring)."""
    if not os.path.exists(path):
        raise DsmsError(f"users file '{path}' does not exist")
    users: dict[str, Verifier] = {}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, sep, secret = line.partition(":")
            if not sep or not name or not secret:
                raise DsmsError(f"{path}:{number}: expected 'name:password' (or 'name:SCRAM-SHA-256$…')")
            try:
                users[name] = Verifier.parse(secret) if secret.startswith("SCRAM-SHA-256$") \
                    else Verifier.from_password(secret)
            except (ValueError, IndexError):
                raise DsmsError(f"{path}:{number}: the SCRAM verifier of '{name}' is malformed") from None
    return users


class ScramExchange:
    """The server's side of one SCRAM-SHA-256 exchange: two client messages in, two server messages out."""

    def __init__(self, verifier: Verifier | None):
        # An unknown user gets a made-up verifier, so the exchange looks the same and then fails.
        self.verifier = verifier or Verifier.from_password(secrets.token_hex(16))
        self.known = verifier is not None
        self.nonce = ""
        self.first_bare = self.server_first = ""

    def first(self, client_first: str) -> str:
        """client-first-message -> server-first-message."""
        if not client_first.startswith(("n,", "y,")):
            raise ValueError("channel binding is not supported")
        self.first_bare = client_first.split(",", 2)[2]
        attrs = dict(part.split("=", 1) for part in self.first_bare.split(","))
        self.nonce = attrs["r"] + base64.b64encode(secrets.token_bytes(18)).decode()
        salt = base64.b64encode(self.verifier.salt).decode()
        self.server_first = f"r={self.nonce},s={salt},i={self.verifier.iterations}"
        return self.server_first

    def final(self, client_final: str) -> str | None:
        """client-final-message -> server-final-message, or None if the password is wrong."""
        without_proof, _, proof = client_final.rpartition(",p=")
        attrs = dict(part.split("=", 1) for part in without_proof.split(","))
        if attrs.get("r") != self.nonce:
            return None
        auth_message = f"{self.first_bare},{self.server_first},{without_proof}".encode()
        signature = hmac.digest(self.verifier.stored_key, auth_message, "sha256")
        client_key = bytes(a ^ b for a, b in zip(base64.b64decode(proof), signature))
        if not self.known or not hmac.compare_digest(hashlib.sha256(client_key).digest(), self.verifier.stored_key):
            return None
        server_signature = hmac.digest(self.verifier.server_key, auth_message, "sha256")
        return "v=" + base64.b64encode(server_signature).decode()
