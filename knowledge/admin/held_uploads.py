"""A file chosen on the add form, held on the server while the form is corrected.

Browsers never let a page set a file input's value, so a form answered with a validation error
comes back with its file input empty. When the error is elsewhere (the domain, the doc key) the
file itself was fine: it is kept here, under ``var/held-uploads/``, and the form carries an
unguessable token for it (``forms.HeldFileInput``), so the next submit may leave the file input
empty. A token is bound to the staff user who chose the file; held files are dropped once used
and after HOLD_SECONDS. On a deployment whose web processes do not share ``var/`` the token is
not found and the form says to choose the file again.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from pathlib import Path

from django.conf import settings

HOLD_SECONDS = 3600
_TOKEN = re.compile(r"[0-9a-f]{32}")


def _held_dir() -> Path:
    from config.env import VAR_DIR

    return Path(getattr(settings, "HELD_UPLOADS_DIR", "") or VAR_DIR / "held-uploads")


def _paths(owner: int, token: str) -> tuple[Path, Path]:
    base = _held_dir() / f"{int(owner)}-{token}"
    return base.with_suffix(".bin"), base.with_suffix(".json")


def _prune() -> None:
    cutoff = time.time() - HOLD_SECONDS
    for path in _held_dir().glob("*-*.*"):
        try:
            if path.stat().st_mtime < cutoff:
                path.unlink()
        except FileNotFoundError:
            pass


def upload_hold(*, owner: int, name: str, data: bytes) -> str:
    """Keep ``data`` (file ``name``) for ``owner``; returns its token."""
    _held_dir().mkdir(mode=0o700, parents=True, exist_ok=True)
    _prune()
    token = secrets.token_hex(16)
    data_path, name_path = _paths(owner, token)
    data_path.write_bytes(data)
    name_path.write_text(json.dumps({"name": name}), encoding="ascii")
    return token


def upload_held(*, owner: int | None, token: str) -> tuple[str, bytes] | None:
    """(file name, data) held under ``token`` for ``owner``, or None (unknown, expired, another
    user's, or not a token at all)."""
    if owner is None or not isinstance(token, str) or not _TOKEN.fullmatch(token):
        return None
    data_path, name_path = _paths(owner, token)
    try:
        if data_path.stat().st_mtime < time.time() - HOLD_SECONDS:
            return None
        return json.loads(name_path.read_text(encoding="ascii"))["name"], data_path.read_bytes()
    except (FileNotFoundError, ValueError, KeyError):
        return None


def upload_release(*, owner: int | None, token: str) -> None:
    if owner is None or not isinstance(token, str) or not _TOKEN.fullmatch(token):
        return
    for path in _paths(owner, token):
        path.unlink(missing_ok=True)
