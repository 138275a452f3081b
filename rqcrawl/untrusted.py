"""Text that came from the web (URLs, titles, servers' errors), made safe where it is shown.

Two places show it verbatim. rq-dashboard's job page inserts a job's description, meta,
result and exc_info into HTML without escaping: whatever a server can put there must reach
those fields as inert text (`inert`). Terminals act on control bytes (ESC c clears the
screen, ESC ] sets the title, BEL rings) and bidirectional overrides (RLO shows `exe.txt` as
`txt.exe`): what the CLI and the logs print must not carry them (`printable`), nor the
exported files a user opens in a terminal or a spreadsheet (`printable_cell` for CSV,
`inert_json` for JSON lines).
"""

from __future__ import annotations

import json
import re

# What HTML gives a meaning to, as percent-escapes: a URL stays a URL (the dashboard escapes
# nothing, so an entity such as &lt; would show as itself wherever it is escaped again).
_HTML_SPECIAL = {c: f"%{ord(c):02X}" for c in "<>\"'&"}
_HTML_RE = re.compile("[<>\"'&]")
# C0 controls, DEL and C1 controls (which some terminals read as escape sequences too), and
# the bidirectional marks, embeddings, overrides and isolates (Unicode's "Trojan Source" set).
_CONTROLS = "\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_CONTROL_RE = re.compile(f"[{_CONTROLS}]")
_CELL_CONTROL_RE = re.compile(f"(?![\t\n])[{_CONTROLS}]")  # a cell keeps its tabs and lines


def inert(text: str) -> str:
    """`text` with no character HTML acts on and no control byte: `<>"'&` as their
    percent-escapes, control characters as `\\xNN` (RQ job fields: rq-dashboard shows them
    unescaped)."""
    return printable(_HTML_RE.sub(lambda m: _HTML_SPECIAL[m[0]], text))


def printable(text: str) -> str:
    """`text` with its control characters written as `\\xNN` escapes (`\\uNNNN` for the
    bidirectional ones), so that printing it cannot move the cursor, clear the screen, ring
    the bell or reorder the line (tabs and newlines too: what came from the web is shown on
    one line)."""
    return _CONTROL_RE.sub(_escape, text)


def printable_cell(text: str) -> str:
    """`text` as a CSV cell shown in a terminal or a spreadsheet: control characters escaped
    as `printable` escapes them, tabs and line breaks kept (a cell may hold several lines)."""
    return _CELL_CONTROL_RE.sub(_escape, text)


def inert_json(value: object) -> str:
    """`value` as one line of JSON with every control character as a `\\uXXXX` escape (which
    decodes back to it): json.dumps escapes C0 controls but leaves DEL, C1 controls and the
    bidirectional ones raw, and other text readable (no `ensure_ascii`)."""
    return _CONTROL_RE.sub(lambda m: f"\\u{ord(m[0]):04x}", json.dumps(value, ensure_ascii=False))


def _escape(match: re.Match) -> str:
    """A control character as `\\xNN`, or `\\uNNNN` past U+00FF."""
    code = ord(match[0])
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable_lines(text: str) -> str:
    """`text` made printable line by line: our own line breaks kept, any other control
    character escaped (a report that quotes titles, URLs and errors from the web)."""
    return "\n".join(printable(line) for line in text.split("\n"))
