"""``CREATE USER``, ``ALTER USER … PASSWORD`` and ``DROP USER``: users kept in the state directory.

Spelled as PostgreSQL, RisingWave and Materialize spell them (``USER`` or
``ROLE``, ``WITH`` optional)::

    CREATE USER alice WITH PASSWORD 'secret';
    ALTER USER alice PASSWORD 'SCRAM-SHA-256$4096:…';   -- what psql's \\password sends
    DROP USER IF EXISTS alice;

Only SCRAM-SHA-256 verifiers are stored (``DIR/users``, in the format of
a ``--users`` file), written whole and atomically, so users survive
restarts and the directory never holds a password. Once any user exists
(from ``--users`` or from here), every client must log in as one of them
with its password. Users of the ``--users`` file belong to that file:
they are changed by editing it.
"""

from __future__ import annotations

import logging
import os
import re
import threading

from .auth import Verifier, load_users
from .errors import DUPLICATE_OBJECT, FEATURE_NOT_SUPPORTED, SYNTAX_ERROR, WireError
from .statements import Outcome

USER_DDL = re.compile(r"^\s*(CREATE|ALTER|DROP)\s+(?:USER|ROLE)\b(.*)$", re.I | re.S)
_NAME = r'"(?:[^"]|"")+"|[A-Za-z_][A-Za-z0-9_$]*'
_CREATE_OR_ALTER = re.compile(rf"^\s*({_NAME})\s*(?:\bWITH\b)?(.*?)\s*;?\s*$", re.I | re.S)
_DROP = re.compile(rf"^\s*(IF\s+EXISTS\s+)?((?:{_NAME})(?:\s*,\s*(?:{_NAME}))*)\s*;?\s*$", re.I | re.S)
_OPTION = re.compile(r"\s*(?:(?:ENCRYPTED\s+)?PASSWORD\s+(?:'((?:[^']|'')*)'|(NULL))|(LOGIN|SUPERUSER|INHERIT))\s*",
                     re.I | re.S)
log = logging.getLogger("dsms.server")
UNDEFINED_OBJECT, NOT_IN_PREREQUISITE_STATE = "42704", "55000"


def _unquote(name: str) -> str:
    return name[1:-1].replace('""', '"') if name.startswith('"') else name.lower()


class Users:
    """The users a server admits: those of its ``--users`` file and those created over the wire."""

    def __init__(self, users_file: str | None, state_dir: str):
        self.fixed = load_users(users_file) if users_file else {}
        self.from_file = users_file is not None
        self.path = os.path.join(state_dir, "users")
        self.created = load_users(self.path) if os.path.exists(self.path) else {}
        self._lock = threading.Lock()

    @property
    def required(self) -> bool:
        """Whether clients must log in with a password."""
        return self.from_file or bool(self.created)

    def get(self, name: str) -> Verifier | None:
        return self.fixed.get(name) or self.created.get(name)

    def names(self) -> list[str]:
        return sorted(set(self.fixed) | set(self.created))

    def run(self, text: str) -> Outcome:
        """Run one CREATE/ALTER/DROP USER statement (any thread; it may take a few milliseconds of hashing)."""
        verb, rest = USER_DDL.match(text).groups()
        verb = verb.upper()
        with self._lock:
            if verb == "DROP":
                return self._drop(rest)
            match = _CREATE_OR_ALTER.match(rest)
            if match is None:
                raise WireError(SYNTAX_ERROR, f"expected: {verb} USER name [WITH] PASSWORD 'password'")
            name, password = _unquote(match.group(1)), self._password(match.group(2), verb)
            self._check_own(name, verb)
            if verb == "CREATE" and name in self.created:
                raise WireError(DUPLICATE_OBJECT, f'role "{name}" already exists')
            if verb == "ALTER" and name not in self.created:
                raise WireError(UNDEFINED_OBJECT, f'role "{name}" does not exist')
            notices = [] if self.required else [
                "password authentication is now on: from the next connection every client logs in as a user "
                "with its password"]
            if password is not None:
                self.created[name] = (Verifier.parse(password) if password.startswith("SCRAM-SHA-256$")
                                      else Verifier.from_password(password))
            self._save()
            log.info("user %s %s", name, "created" if verb == "CREATE" else "given a new password")
            return Outcome(f"{verb} ROLE", notices=notices)

    def _password(self, options: str, verb: str) -> str | None:
        password, at = None, 0
        while at < len(options):
            option = _OPTION.match(options, at)
            if option is None or option.end() == at:
                raise WireError(FEATURE_NOT_SUPPORTED, f"{verb} USER takes PASSWORD 'password' (and LOGIN): "
                                f"'{options[at:].strip()}' is not supported")
            if option.group(2):
                raise WireError(FEATURE_NOT_SUPPORTED, "a user without a password cannot log in: "
                                "give PASSWORD 'password', or DROP USER")
            if option.group(1) is not None:
                password = option.group(1).replace("''", "'")
            at = option.end()
        if password is None and verb == "CREATE":
            raise WireError(FEATURE_NOT_SUPPORTED, "CREATE USER needs PASSWORD 'password': users log in with "
                            "SCRAM-SHA-256")
        if password is not None and password.startswith("md5") and len(password) == 35:
            raise WireError(FEATURE_NOT_SUPPORTED, "MD5 password hashes are not supported; send the password or "
                            "a SCRAM-SHA-256 verifier")
        if password is not None and password.startswith("SCRAM-SHA-256$"):
            try:
                Verifier.parse(password)
            except (ValueError, IndexError):
                raise WireError(SYNTAX_ERROR, "the SCRAM-SHA-256 verifier is malformed") from None
        return password

    def _drop(self, rest: str) -> Outcome:
        match = _DROP.match(rest)
        if match is None:
            raise WireError(SYNTAX_ERROR, "expected: DROP USER [IF EXISTS] name [, …]")
        names = [_unquote(n) for n in re.findall(_NAME, match.group(2))]
        notices = []
        for name in names:
            self._check_own(name, "DROP")
            if name not in self.created:
                if not match.group(1):
                    raise WireError(UNDEFINED_OBJECT, f'role "{name}" does not exist')
                notices.append(f'role "{name}" does not exist, skipping')
        if not self.from_file and self.created and set(self.created) <= set(names):
            raise WireError(NOT_IN_PREREQUISITE_STATE, "cannot drop the last user: the server would admit every "
                            "client without a password again; create another user first")
        for name in names:
            if self.created.pop(name, None) is not None:
                log.info("user %s dropped", name)
        self._save()
        return Outcome("DROP ROLE", notices=notices)

    def _check_own(self, name: str, verb: str) -> None:
        if name in self.fixed:
            raise WireError(FEATURE_NOT_SUPPORTED, f"user '{name}' is defined in the --users file; edit the file "
                            f"and restart the server rather than {verb} USER")

    def _save(self) -> None:
        temporary = self.path + ".tmp"
        with open(temporary, "w", encoding="utf-8") as f:
            f.write("# dsms server users: name:SCRAM-SHA-256 verifier (CREATE/ALTER/DROP USER)\n")
            f.writelines(f"{name}:{verifier.text()}\n" for name, verifier in sorted(self.created.items()))
            f.flush()
            os.fsync(f.fileno())
        os.chmod(temporary, 0o600)
        os.replace(temporary, self.path)
