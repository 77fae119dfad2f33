"""The daemon's HTTP endpoints (loopback by default).

* ``GET /metrics``       — Prometheus exposition;
* ``GET /-/healthy``     — 200 while the process serves;
* ``GET /-/status``      — the last cycle as JSON;
* ``POST /-/recompute``  — run a cycle now, answer with its status when it ends.  With
  ``http.token`` set it needs ``Authorization: Bearer <token>`` (compared in constant time).
"""

from __future__ import annotations

import hmac
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable


class DaemonHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr, *, render_metrics: Callable[[], tuple[bytes, str]], status: Callable[[], dict],
                 recompute: Callable[[float], dict | None], token: str | None = None):
        self.render_metrics = render_metrics
        self.status = status
        self.recompute = recompute
        self.token = token
        super().__init__(addr, _Handler)

    def start(self) -> threading.Thread:
        t = threading.Thread(target=self.serve_forever, name="http", daemon=True)
        t.start()
        return t


class _Handler(BaseHTTPRequestHandler):
    server: DaemonHTTPServer
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # quiet: the daemon logs cycles, not scrapes
        pass

    def _send(self, code: int, body: bytes, ctype: str = "text/plain; charset=utf-8") -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _json(self, code: int, obj) -> None:
        self._send(code, (json.dumps(obj) + "\n").encode(), "application/json")

    def do_GET(self):  # noqa: N802
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            body, ctype = self.server.render_metrics()
            self._send(200, body, ctype)
        elif path == "/-/healthy":
            self._send(200, b"ok\n")
        elif path == "/-/status":
            self._json(200, self.server.status())
        elif path == "/":
            self._send(200, b"fairshared: /metrics /-/healthy /-/status POST /-/recompute\n")
        else:
            self._send(404, b"not found\n")

    def do_POST(self):  # noqa: N802
        path = self.path.split("?", 1)[0]
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(min(length, 65536))
        if path != "/-/recompute":
            self._send(404, b"not found\n")
            return
        token = self.server.token
        if token:
            got = self.headers.get("Authorization", "")
            if not hmac.compare_digest(got.encode(), f"Bearer {token}".encode()):
                self._json(401, {"error": "a valid 'Authorization: Bearer <token>' is required"})
                return
        result = self.server.recompute(300.0)
        if result is None:
            self._json(504, {"error": "the cycle did not finish in time"})
        else:
            self._json(200, result)
