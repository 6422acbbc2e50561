"""Redis URLs in Locust's web UI: the browser sees each with its password redacted, the server
keeps the real one; a value sent back as it was shown is turned back into the real URL, and
``scrub`` takes any remembered secret out of a text before it leaves for the browser.
"""

from __future__ import annotations

from urllib.parse import quote, unquote, urlsplit

from bench.protocol.connection import redact_url

REDIS_SCHEMES = ("redis://", "rediss://", "unix://")
MIN_BARE_SECRET = 6  # a password shorter than this is scrubbed only inside its URL, not as bare text

_urls: list[str] = []  # the real URLs, in the order they were remembered
_shown: list[str] = []  # the Host field's value as the web UI first showed it


def remember(url: str) -> str:
    """Keep ``url`` server-side; returns what the browser may see of it."""
    if url and urlsplit(url).password is not None and url not in _urls:
        _urls.append(url)
    return redact_url(url) if url else url


def unredact(value: str) -> str:
    """The real URL behind ``value`` when it is a remembered URL as shown redacted; else ``value``."""
    for url in _urls:
        if value == redact_url(url):
            return url
    return value


def show_host(value: str) -> str:
    """Record what the Host field shows first (redacted), so a URL typed over it can be told apart."""
    shown = remember(value)
    _shown[:] = [shown]
    return shown


def shown_host() -> str:
    return _shown[0] if _shown else ""


def secrets() -> list[tuple[str, str]]:
    """(secret text, what replaces it), longest first: each URL, its password as it appears in
    URLs (quoted or not), and the bare password when long enough to be told from other text."""
    pairs: dict[str, str] = {}
    for url in _urls:
        pairs[url] = redact_url(url)
        password = urlsplit(url).password or ""
        for form in {password, unquote(password), quote(unquote(password), safe="")}:
            if form:
                pairs[f":{form}@"] = ":***@"
                if len(form) >= MIN_BARE_SECRET:
                    pairs[form] = "***"
    return sorted(pairs.items(), key=lambda pair: -len(pair[0]))


def scrub(text: str) -> str:
    """``text`` with every remembered secret replaced."""
    for secret, shown in secrets():
        text = text.replace(secret, shown)
    return text
