"""Credentials never shown: one masking rule for every place a URI or an error text is shown
(the health details, the debug banner and debug pages, log lines, admin pages, stored errors).

``mask_credentials`` hides the password of a URL's user-info (``redis://:secret@h`` ->
``redis://:********@h``, ``https://root:secret@h`` -> ``https://root:********@h``, a bare
``https://token@h`` -> ``https://********@h``) and the value of credential parameters
(``?token=...``, ``&password=...``, ``api_key=...``), wherever they stand in the text.
"""

from __future__ import annotations

import re

MASK = "********"
# scheme://user:password@  or  scheme://:password@  or  scheme://token@ (user-info alone).
_URL_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<userinfo>[^/\s@'\"<>]+)@")
# name=value where the name says credential (not part of a longer name: doc_key= stays).
_CREDENTIAL_PARAM = re.compile(
    r"(?<![A-Za-z0-9_.-])(?P<name>token|access_token|auth_token|password|passwd|pwd|secret|"
    r"api_key|apikey|key|sig|signature)=(?P<value>[^&#\s'\"<>]+)",
    re.IGNORECASE,
)


def mask_credentials(text: str) -> str:
    """``text`` with every URL's password (the user name kept) and every credential parameter's
    value replaced by a mask."""

    def userinfo(match: re.Match) -> str:
        user, sep, _password = match["userinfo"].partition(":")
        kept = f"{user}:{MASK}" if sep else MASK
        return f"{match['scheme']}{kept}@"

    text = _URL_USERINFO.sub(userinfo, text)
    return _CREDENTIAL_PARAM.sub(lambda m: f"{m['name']}={MASK}", text)
