"""Who can reach the server: loopback by default, another address only when asked for twice.

fimble serves private code to whoever reaches its sockets. A bind to anything but loopback (an
address a mistyped ``--http 0.0.0.0:8080`` or a copied service file exposes to the network) is
therefore refused unless the user says so with ``--allow-remote``, and for HTTP also sets a bearer
key: a warning on stderr is read by nobody when an editor starts the server. The LSP has no
authentication at all, so ``--allow-remote`` is the only way to open its TCP socket to others.

Checked before the model loads, so the mistake costs one line, not a minute.
"""

from __future__ import annotations

import ipaddress

from fimble.errors import ConfigError

__all__ = ["check_bind", "is_loopback"]


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps the server on this machine."""
    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(kind: str, host: str, port: int, *, allow_remote: bool, api_key: str | None) -> None:
    """Raise ``ConfigError`` for a bind the user did not clearly ask for.

    ``kind`` is ``"http"`` (needs ``--allow-remote`` and a key off loopback) or ``"lsp"`` (needs
    ``--allow-remote``: the protocol has no key to ask for)."""
    if is_loopback(host):
        return
    where = f"{host}:{port}"
    if kind == "http":
        if allow_remote and api_key:
            return
        missing = " and ".join(
            part
            for part, absent in (("--allow-remote", not allow_remote), ("--api-key KEY", not api_key))
            if absent
        )
        raise ConfigError(
            f"refusing to serve HTTP on {where}: other machines could reach it and use your code and "
            f"model. Bind 127.0.0.1, or add {missing} (or FIMBLE_API_KEY) to serve it on purpose"
        )
    if not allow_remote:
        raise ConfigError(
            f"refusing to serve LSP on {where}: other machines could reach it, and the LSP has no "
            "authentication. Bind 127.0.0.1, or add --allow-remote to serve it on purpose"
        )
