"""Redis URLs in messages: the password never shown."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

_QUERY_PASSWORD = re.compile(r"([?&]password=)[^&\s'\"]*")


def masked(text: str, url: str) -> str:
    """`text` (the URL itself, or a message that may quote it) with the URL's password
    replaced by `***`, for `redis://:pw@`, `redis://user:pw@`, `rediss://` and a
    `?password=` query alike."""
    text = _QUERY_PASSWORD.sub(r"\1***", text)
    try:
        password = urlsplit(url).password
    except ValueError:  # an unparsable URL: hide everything between :// and @
        password = url.partition("://")[2].rpartition("@")[0].partition(":")[2] or None
    if not password:
        return text
    return text.replace(f":{password}@", ":***@")
