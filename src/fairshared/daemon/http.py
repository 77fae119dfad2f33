"""The daemon's HTTP endpoints as a WSGI application (served by waitress, see httpserver.py).

* ``GET /metrics``       — Prometheus exposition, text or OpenMetrics as the ``Accept`` header asks;
* ``GET /-/healthy``     — 200 ``ok`` unless the last ``unhealthy_after`` cycles all failed (then 503);
* ``GET /-/ready``       — 200 once a cycle has succeeded (or pushed with some refusals), else 503;
* ``GET /-/status``      — the last cycle as JSON;
* ``GET /api/v1/...``    — the read-only JSON API (api/routes.py, docs/api-v1.md), when given;
* ``POST /-/recompute``  — ask for a cycle now.  200 with its status when it ends; 202 when the
  request was merged but this caller may not wait (too many waiting already); 503 while stopping;
  504 when the cycle did not end in time.

With a token, ``POST /-/recompute`` (and, when reads need it -- ``http.token_for_reads``, by default
when the listener is not loopback -- ``/metrics`` and ``/-/status``) need
``Authorization: Bearer <token>``, compared in constant time.  No
endpoint takes a body: the server refuses one (413) before reading it, so the token is
always checked on a request whose body was never read.
"""

from __future__ import annotations

import hmac
import io
import json
from http import HTTPStatus
from dataclasses import dataclass
from typing import Callable

__all__ = ["Endpoints", "make_app"]

TEXT = "text/plain; charset=utf-8"
FILE_WRAPPER_ABOVE = 64 * 1024  # smaller bodies are simply copied to the connection's buffer


class Parts(io.RawIOBase):
    """Read-only, seekable file over body parts, for ``wsgi.file_wrapper``: waitress then sends
    straight from the parts (the metrics cache's own bytes object) a socket buffer at a time, and
    never copies the body into a per-connection buffer (11 MB per scrape at 50k jobs, held for as
    long as a client does not read)."""

    def __init__(self, parts: tuple[bytes, ...]):
        super().__init__()
        self._views = [memoryview(p) for p in parts if p]
        self._size = sum(len(v) for v in self._views)
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, min(self._size, base + offset))
        return self._pos

    def close(self) -> None:
        self._views = []  # the connection is done with the parts (waitress closes its buffers)
        super().close()

    def read(self, n: int = -1) -> memoryview | bytes:
        """Up to ``n`` bytes from one part (a short read at a part's end, as files may), as a
        memoryview of it: waitress asks for a socket buffer's worth (~4 MB on loopback) at every
        send attempt, and only passes it to ``send()``, so a bytes copy would be pure waste."""
        start = 0
        for v in self._views:
            if self._pos < start + len(v):
                at = self._pos - start
                out = v[at:] if n is None or n < 0 else v[at:at + n]
                self._pos += len(out)
                return out
            start += len(v)
        return b""


@dataclass(frozen=True)
class Endpoints:
    # Accept header -> (body, content type); the body is bytes or a tuple of parts sent in order
    render_metrics: Callable[[str], tuple[bytes | tuple[bytes, ...], str]]
    status: Callable[[], dict]
    health: Callable[[], tuple[bool, str]]
    ready: Callable[[], tuple[bool, str]]
    recompute: Callable[[], tuple[int, dict]]  # (HTTP status, JSON body)
    # () -> (token or None, whether reads need it too): asked at every request, so a reload that
    # rotates the token file or changes http.token_for_reads takes effect at once
    auth: Callable[[], tuple[str | None, bool]] = lambda: (None, False)
    # GET /api/v1/...: (environ, whether it carries the valid token) -> (HTTP status, JSON-ready object
    # or the bytes of a JSON document); api/routes.py says who may see what
    api: Callable[[dict, bool], tuple[int, object]] | None = None


def _authorized(environ, token: str | None) -> bool:
    if not token:
        return True
    got = environ.get("HTTP_AUTHORIZATION", "").encode("latin-1", "replace")
    return hmac.compare_digest(got, f"Bearer {token}".encode())


def make_app(ep: Endpoints):
    def app(environ, start_response):
        path = environ.get("PATH_INFO", "")
        method = environ.get("REQUEST_METHOD", "GET")

        def send(code: str, body: bytes | tuple[bytes, ...], ctype: str = TEXT, extra=()):
            parts = (body,) if isinstance(body, bytes) else tuple(body)
            size = sum(len(p) for p in parts)
            start_response(code, [("Content-Type", ctype), ("Content-Length", str(size)), *extra])
            if method == "HEAD":  # the length, no body (the server would send what we return)
                return []
            wrapper = environ.get("wsgi.file_wrapper")
            if wrapper is not None and size > FILE_WRAPPER_ABOVE:
                return wrapper(Parts(parts))
            return list(parts)

        def send_json(code: str, obj):
            return send(code, (json.dumps(obj) + "\n").encode(), "application/json")

        def unauthorized():
            body = json.dumps({"error": "a valid 'Authorization: Bearer <token>' is required"}) + "\n"
            return send("401 Unauthorized", body.encode(), "application/json",
                        [("WWW-Authenticate", 'Bearer realm="fairshared"')])

        token, token_for_reads = ep.auth()
        if path == "/-/recompute":
            if method != "POST":
                return send("405 Method Not Allowed", b"POST only\n", TEXT, [("Allow", "POST")])
            if not _authorized(environ, token):
                return unauthorized()
            code, obj = ep.recompute()
            return send_json(_REASONS[code], obj)
        if method not in ("GET", "HEAD"):
            return send("405 Method Not Allowed", b"GET only\n", TEXT, [("Allow", "GET, HEAD")])
        if path.startswith("/api/v1/") and ep.api is not None:
            code, obj = ep.api(environ, bool(token) and _authorized(environ, token))
            body = obj if isinstance(obj, bytes) else (json.dumps(obj, separators=(",", ":")) + "\n").encode()
            return send(f"{code} {HTTPStatus(code).phrase}", body, "application/json")
        if path in ("/metrics", "/-/status") and token_for_reads and not _authorized(environ, token):
            return unauthorized()
        if path == "/metrics":
            body, ctype = ep.render_metrics(environ.get("HTTP_ACCEPT", ""))
            return send("200 OK", body, ctype)
        if path in ("/-/healthy", "/-/ready"):
            ok, text = (ep.health if path == "/-/healthy" else ep.ready)()
            return send("200 OK" if ok else "503 Service Unavailable", text.encode())
        if path == "/-/status":
            return send_json("200 OK", ep.status())
        if path == "/":
            return send("200 OK", b"fairshared: /metrics /-/healthy /-/ready /-/status POST /-/recompute\n")
        return send("404 Not Found", b"not found\n")

    return app


_REASONS = {200: "200 OK", 202: "202 Accepted", 503: "503 Service Unavailable", 504: "504 Gateway Timeout"}
