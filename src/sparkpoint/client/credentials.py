"""What the client presents to the coordinators: a bearer token and TLS settings.

The token file holds the token alone, or one line in the coordinators' own format
(``<role> <name> <token>``: the last field is taken), so an operator can hand a driver
its line of the server's file. ``#`` comments and blank lines are ignored.

From the environment (:meth:`Credentials.from_env`): ``SPARKPOINT_TOKEN_FILE``,
``SPARKPOINT_CA_FILE`` (verify the coordinators' certificates against this CA; addresses
without a scheme then mean ``https``), ``SPARKPOINT_CLIENT_CERT_FILE`` and
``SPARKPOINT_CLIENT_KEY_FILE`` (a client certificate, when the coordinators require one).
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

TOKEN_FILE_ENV = "SPARKPOINT_TOKEN_FILE"
CA_FILE_ENV = "SPARKPOINT_CA_FILE"
CERT_FILE_ENV = "SPARKPOINT_CLIENT_CERT_FILE"
KEY_FILE_ENV = "SPARKPOINT_CLIENT_KEY_FILE"


def read_token_file(path: str | Path) -> str:
    """The token in ``path``; raises ValueError (never quoting the file) if there is none."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ValueError(f"token file {path} cannot be read: {exc.strerror}") from None
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].split()
        if line:
            return line[-1]
    raise ValueError(f"token file {path} holds no token")


@dataclass(frozen=True, slots=True)
class Credentials:
    token: str | None = None
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Credentials:
        env = os.environ if environ is None else environ
        token_file = env.get(TOKEN_FILE_ENV)
        return cls(
            token=read_token_file(token_file) if token_file else None,
            ca_file=env.get(CA_FILE_ENV) or None,
            cert_file=env.get(CERT_FILE_ENV) or None,
            key_file=env.get(KEY_FILE_ENV) or None,
        )

    def with_token_file(self, path: str | None) -> Credentials:
        return replace(self, token=read_token_file(path)) if path else self

    @property
    def default_scheme(self) -> str:
        return "https" if self.ca_file else "http"

    def verify(self) -> ssl.SSLContext | bool:
        """httpx's ``verify``: a context trusting only ``ca_file``, else the system CAs."""
        if not self.ca_file and not self.cert_file:
            return True
        context = ssl.create_default_context(cafile=self.ca_file)
        if self.cert_file:
            context.load_cert_chain(self.cert_file, self.key_file)
        return context

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def __repr__(self) -> str:  # never print the token
        return f"Credentials(token={'***' if self.token else None}, ca_file={self.ca_file!r})"
