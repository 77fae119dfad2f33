"""The web page at ``/``: three files shipped in the package (no CDN, no build step), read once.

:func:`asset` maps a request path to ``(body, content type)`` or None; the HTTP adapter
(``daemon/http.py``) sends what it returns with :data:`HEADERS`.  ``/`` is the page only for a
client that asks for HTML (``Accept: text/html``, as every browser does); ``curl`` and scripts keep
the daemon's one-line list of endpoints (None here, so the adapter answers as it did before).
"""

from __future__ import annotations

from functools import cache
from importlib import resources

__all__ = ["HEADERS", "asset"]

TYPES = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
}

# Everything the page loads comes from this origin; no inline script or style, no frames, no forms
# posted anywhere.  img-src data: is for the empty favicon (no /favicon.ico request, no 404).
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
       "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'self'")

# no-cache = revalidate every time: the page is ~40 KB and must never run an old app.js against a
# new daemon's API after an upgrade.
HEADERS = (
    ("Cache-Control", "no-cache"),
    ("Content-Security-Policy", CSP),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
)


@cache
def _read(name: str) -> bytes:
    """The bytes of one packaged file, read at its first request and kept."""
    return resources.files(__name__).joinpath(name).read_bytes()


def wants_html(accept: str) -> bool:
    """Does this Accept header ask for HTML?  Browsers send ``text/html,...``; curl sends ``*/*``."""
    return any(part.split(";")[0].strip().lower() == "text/html" for part in accept.split(","))


def asset(path: str, accept: str = "") -> tuple[bytes, str] | None:
    """``(body, content type)`` of the page's file at ``path`` (``/`` for HTML clients,
    ``/static/<name>``), or None: not a file of the page (404), or ``/`` asked for by a non-HTML client."""
    if path == "/":
        return (_read("index.html"), TYPES["index.html"]) if wants_html(accept) else None
    name = path.removeprefix("/static/")
    if name == path or name not in TYPES or name == "index.html":
        return None
    return _read(name), TYPES[name]
