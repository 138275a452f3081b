"""Why a seed was not crawled, in words a newcomer can act on: its record's outcome and
error, and the flag or check that would change it (`rqcrawl crawl` prints them when no seed
could be crawled, instead of finishing quietly with "0 fetched")."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from rqcrawl.fetch import guard

_ALLOW_HINT = "add --allow-private for a site on your own machine or network"
_REFUSED_HINT = (
    "rqcrawl refuses private, loopback and link-local addresses unless the crawl allows "
    f"them: {_ALLOW_HINT}"
)
_DNS_HINT = (
    "its host name does not resolve: check the URL, and this machine's DNS and internet "
    "access (HTTP_PROXY / HTTPS_PROXY if it needs a proxy)"
)
_HINTS = {
    "robots_disallowed": "the site's robots.txt disallows it for our user agent; --no-robots "
    "ignores robots.txt (only for sites you may crawl so)",
    "out_of_scope": "it redirects to a host outside the crawl's scope: seed the final URL, or "
    "set scope_hosts in a --config file",
    "not_html": "it is not an HTML page: seed a page that links to it",
    "connection_refused": "nothing listens at that address and port: is the server up?",
    "timeout": "the server did not answer in time: is it up and reachable from here?",
    "job_timeout": "its job ran over job_timeout (a --config file setting): a page served "
    "slower than that, or a hook or rendering that long",
    "tls": "the TLS handshake failed (certificate or protocol)",
}


def seed_problem(rec: dict) -> str:
    """One line for the record of a seed that was not fetched: its URL, what happened, and
    what would change it."""
    outcome, error = rec["outcome"], rec.get("error") or ""
    if outcome == "refused_address":
        hint = _REFUSED_HINT
    else:
        reason = rec.get("reason") or ""  # the failure's kind, by its exception's type
        if reason == "dns" or "nameresolution" in error.lower():  # (robots.txt's: its text)
            hint = _DNS_HINT
        elif reason == "robots":
            hint = "its robots.txt could not be fetched; --no-robots skips robots.txt"
        else:
            hint = _HINTS.get(outcome) or _HINTS.get(reason) or ""
    what = f"{outcome}: {error}" if error else outcome
    return f"{rec['url']}: {what}" + (f"\n  -> {hint}" if hint else "")


def refused_seeds(seeds: list[str], allow_networks: list[str]) -> list[str]:
    """The seeds the workers' address guard will refuse (a crawl without allow_private),
    each with why, that this machine can tell without DNS: an IP address or localhost. Other
    names are left to the workers, as a name can resolve elsewhere than here."""
    allowed, found = guard.networks(allow_networks), []
    for url in seeds:
        if not _local_answer(urlsplit(url).hostname or ""):
            continue
        try:
            guard.check_url(url, allowed)
        except guard.AddressRefused as exc:
            found.append(f"{url} ({exc.detail})")
        except OSError:  # does not resolve: the workers record what it is
            continue
    return found


def _local_answer(host: str) -> bool:
    """Whether `host` resolves without DNS: an IP address, or localhost (RFC 6761)."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return host == "localhost" or host.endswith(".localhost")
    return True


def refusal(refused: list[str], seeds: int) -> str:
    """One line for the seeds the guard will refuse, and the flag that lets them through."""
    more = f" and {len(refused) - 1} more seed(s)" if len(refused) > 1 else ""
    alone = " (nothing else will be crawled)" if len(refused) == seeds else ""
    return f"{refused[0]}{more} will be skipped as refused_address: {_ALLOW_HINT}{alone}"
