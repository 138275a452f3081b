"""Text that came from the web (URLs, titles, servers' errors), made safe where it is shown.

Two places show it verbatim. rq-dashboard's job page inserts a job's description, meta,
result and exc_info into HTML without escaping: whatever a server can put there must reach
those fields as inert text (`inert`). Terminals act on control bytes (ESC c clears the
screen, ESC ] sets the title, BEL rings): what the CLI and the logs print must not carry them
(`printable`).
"""

from __future__ import annotations

import re

# What HTML gives a meaning to, as percent-escapes: a URL stays a URL (the dashboard escapes
# nothing, so an entity such as &lt; would show as itself wherever it is escaped again).
_HTML_SPECIAL = {c: f"%{ord(c):02X}" for c in "<>\"'&"}
_HTML_RE = re.compile("[<>\"'&]")
# C0 controls, DEL and C1 controls (which some terminals read as escape sequences too).
_CONTROL_RE = re.compile("[\x00-\x1f\x7f-\x9f]")


def inert(text: str) -> str:
    """`text` with no character HTML acts on and no control byte: `<>"'&` as their
    percent-escapes, control characters as `\\xNN` (RQ job fields: rq-dashboard shows them
    unescaped)."""
    return printable(_HTML_RE.sub(lambda m: _HTML_SPECIAL[m[0]], text))


def printable(text: str) -> str:
    """`text` with its control characters written as `\\xNN` escapes, so that printing it
    cannot move the cursor, clear the screen or ring the bell (tabs and newlines too: what
    came from the web is shown on one line)."""
    return _CONTROL_RE.sub(lambda m: f"\\x{ord(m[0]):02x}", text)


def printable_lines(text: str) -> str:
    """`text` made printable line by line: our own line breaks kept, any other control
    character escaped (a report that quotes titles, URLs and errors from the web)."""
    return "\n".join(printable(line) for line in text.split("\n"))
