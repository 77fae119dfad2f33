"""The daemon's HTTP endpoints as a WSGI application (served by waitress, see httpserver.py).

* ``GET /metrics``       — Prometheus exposition, text or OpenMetrics as the ``Accept`` header asks;
* ``GET /-/healthy``     — 200 ``ok`` unless the last ``unhealthy_after`` cycles all failed (then 503);
* ``GET /-/ready``       — 200 once a cycle has succeeded (or pushed with some refusals), else 503;
* ``GET /-/status``      — the last cycle as JSON;
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
import json
from dataclasses import dataclass
from typing import Callable

__all__ = ["Endpoints", "make_app"]

TEXT = "text/plain; charset=utf-8"


@dataclass(frozen=True)
class Endpoints:
    render_metrics: Callable[[str], tuple[bytes, str]]  # Accept header -> (body, content type)
    status: Callable[[], dict]
    health: Callable[[], tuple[bool, str]]
    ready: Callable[[], tuple[bool, str]]
    recompute: Callable[[], tuple[int, dict]]  # (HTTP status, JSON body)
    # () -> (token or None, whether reads need it too): asked at every request, so a reload that
    # rotates the token file or changes http.token_for_reads takes effect at once
    auth: Callable[[], tuple[str | None, bool]] = lambda: (None, False)


def _authorized(environ, token: str | None) -> bool:
    if not token:
        return True
    got = environ.get("HTTP_AUTHORIZATION", "").encode("latin-1", "replace")
    return hmac.compare_digest(got, f"Bearer {token}".encode())


def make_app(ep: Endpoints):
    def app(environ, start_response):
        path = environ.get("PATH_INFO", "")
        method = environ.get("REQUEST_METHOD", "GET")

        def send(code: str, body: bytes, ctype: str = TEXT, extra=()):
            start_response(code, [("Content-Type", ctype), ("Content-Length", str(len(body))), *extra])
            return [body]

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
