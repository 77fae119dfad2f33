"""The demo daemon in this process with its real HTTP server on loopback, for the API's tests.

:func:`api_daemon` builds the daemon's own :class:`~fairshared.daemon.service.Service` (``--demo``'s
defaults: push mode ``priority``, which reads the job details), serves ``svc.endpoints()`` with the
daemon's waitress server on 127.0.0.1, and runs cycles on demand (no timer).  Every snapshot a cycle
read is kept in ``d.snapshots`` (a publisher of the test's), to check the answers against the
commands' own functions.  :func:`get` sends a GET from a chosen loopback address (127.0.0.2 plays a
reverse proxy: Linux routes all of 127/8 to lo).
"""

from __future__ import annotations

import contextlib
import http.client
import json
from pathlib import Path


class _Capture:
    def __init__(self):
        self.snapshots = []

    def publish(self, res):
        self.snapshots.append(res.snapshot)


class ApiDaemon:
    def __init__(self, svc, server, capture):
        self.svc, self.server, self.capture = svc, server, capture

    @property
    def port(self) -> int:
        return self.server.address[1]

    @property
    def snapshot(self):
        return self.capture.snapshots[-1]

    def cycle(self):
        return self.svc.runner.cycle("test")

    def get(self, path: str, *, token: str | None = None, headers: dict | None = None,
            source: str = "127.0.0.1") -> tuple[int, bytes, dict]:
        return get(self.port, path, token=token, headers=headers, source=source)

    def json(self, path: str, **kw) -> tuple[int, dict]:
        code, body, _ = self.get(path, **kw)
        return code, json.loads(body, parse_constant=_no_constant)


def _no_constant(name):
    raise ValueError(f"{name} is not JSON")


def get(port: int, path: str, *, token=None, headers=None, source="127.0.0.1") -> tuple[int, bytes, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60, source_address=(source, 0))
    try:
        h = dict(headers or {})
        if token:
            h["Authorization"] = f"Bearer {token}"
        conn.request("GET", path, headers=h)
        r = conn.getresponse()
        return r.status, r.read(), dict(r.getheaders())
    finally:
        conn.close()


@contextlib.contextmanager
def api_daemon(tmp: Path, *, http: dict | None = None, jobs: int | None = 300, private: tuple = (),
               cycles: int = 1, history=None, mode: str | None = None, roles=None):
    from fairshared.daemon.config import DEMO_DEFAULTS, config_from_dict
    from fairshared.daemon.http import make_app
    from fairshared.daemon.httpserver import HttpServer, bind
    from fairshared.daemon.service import Service

    cfg = {**DEMO_DEFAULTS, "state": {"directory": str(tmp / "state")}, "http": dict(http or {}),
           "source": {"demo_jobs": jobs}}
    if mode:
        cfg["push"] = {"mode": mode}
    svc = Service(config_from_dict(cfg), None, demo=True)
    svc.cluster_source.cluster.private_data = tuple(private)
    svc.cluster_source.cluster.roles = roles  # fairshared.model.Roles: operators and coordinators
    svc.api.history = history
    capture = _Capture()
    svc.runner.publishers += (capture,)
    server = HttpServer(make_app(svc.endpoints()), bind("127.0.0.1:0", 64), max_connections=64, timeout=10,
                        backlog=64, threads=4)
    server.start()
    d = ApiDaemon(svc, server, capture)
    try:
        for _ in range(cycles):
            d.cycle()
        yield d
    finally:
        server.stop(2)


class FakeHistory:
    """A history with ``series(keys, since, until)`` (fairshared.history's interface): two points per key,
    and every call recorded."""

    def __init__(self, fail: Exception | None = None):
        self.calls = []
        self.fail = fail

    def series(self, keys, since, until):
        self.calls.append((list(keys), since, until))
        if self.fail:
            raise self.fail
        return [{"account": a, "user": u, "partition": p, "resolution": "cycle",
                 "points": [[1000.0, 0.5, 1, 10.0, 2], [1015.0, 0.25, 2, 20.0, 0]]} for a, u, p in keys]
