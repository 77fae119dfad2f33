"""deploy/ondemand/: the Open OnDemand app in front of the daemon.

The app (deploy/ondemand/fairshared/passenger_wsgi.py) runs here under waitress on loopback, as
Passenger would run it in a user's PUN: first in front of a recording server (what reaches the
daemon, exactly), then in front of the real demo daemon configured to believe 127.0.0.1's user
header, which must see the PUN's user and nobody else.
"""

from __future__ import annotations

import ast
import http.client
import http.server
import importlib.util
import json
import os
import pwd
import sys
import threading
from pathlib import Path

import pytest
import waitress

APP_DIR = Path(__file__).resolve().parent.parent / "deploy" / "ondemand" / "fairshared"
ME = pwd.getpwuid(os.getuid()).pw_name


def load_app_module():
    spec = importlib.util.spec_from_file_location("ood_fairshared_app", APP_DIR / "passenger_wsgi.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def serve_app():
    """Start the app (built with the given settings) under waitress on a free loopback port."""
    servers = []

    def start(config: dict) -> int:
        app = load_app_module().make_app(config)
        srv = waitress.create_server(app, host="127.0.0.1", port=0, threads=2)
        threading.Thread(target=srv.run, daemon=True).start()
        servers.append(srv)
        return srv.effective_port

    yield start
    for srv in servers:
        srv.close()


def request(port: int, path: str, method: str = "GET", headers: dict | None = None) -> tuple[int, dict, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, headers=headers or {})
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


# -- what the app may be: Python 3.6 and the standard library (an OnDemand host's python3) ------------

def test_the_app_is_python_3_6_and_standard_library_only():
    source = (APP_DIR / "passenger_wsgi.py").read_text()
    tree = ast.parse(source, feature_version=(3, 6))  # RHEL 8's python3: no walrus, no match
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert imported and imported <= set(sys.stdlib_module_names), imported - set(sys.stdlib_module_names)
    assert "from __future__" not in source  # annotations: 3.7; nothing here needs it
    manifest = (APP_DIR / "manifest.yml").read_text()
    assert "name: Fair share" in manifest and "role:" not in manifest  # no role: a Passenger app


# -- what reaches the daemon: recorded ----------------------------------------------------------------

class Recorder(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.server.seen.append((self.command, self.path, dict(self.headers)))
        body = json.dumps({"ok": True}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Set-Cookie", "daemon=1")  # nothing the app passes back
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_HEAD = do_GET

    def log_message(self, *args):
        pass


@pytest.fixture
def recorder():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    srv.seen = []
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv
    srv.shutdown()
    srv.server_close()


def test_the_daemon_gets_the_puns_user_and_nothing_the_browser_said_about_itself(serve_app, recorder):
    port = serve_app({"FAIRSHARED_URL": f"http://127.0.0.1:{recorder.server_address[1]}"})
    status, headers, body = request(port, "/api/v1/users/alice?x=1%202", headers={
        "X-Forwarded-User": "alice", "X_Forwarded_User": "alice", "Cookie": "mod_auth_openidc_session=secret",
        "Authorization": "Bearer stolen", "Accept": "application/json", "X-Remote-User": "alice"})
    assert (status, json.loads(body)) == (200, {"ok": True})
    assert "set-cookie" not in headers and headers["content-type"] == "application/json"
    [(method, path, seen)] = recorder.seen
    assert (method, path) == ("GET", "/api/v1/users/alice?x=1%202")
    assert seen["X-Forwarded-User"] == ME
    assert {k.lower() for k in seen} == {"host", "accept", "accept-encoding", "x-forwarded-user"}, seen
    assert "identity" == seen["Accept-Encoding"]  # http.client's own, not the browser's


def test_the_header_name_is_the_daemons_and_only_get_and_head_pass(serve_app, recorder):
    port = serve_app({"FAIRSHARED_URL": f"http://127.0.0.1:{recorder.server_address[1]}/",
                      "FAIRSHARED_USER_HEADER": "X-Remote-User"})
    assert request(port, "/", headers={"X-Remote-User": "alice"})[0] == 200
    assert request(port, "/-/recompute", method="POST")[0] == 405
    assert request(port, "/metrics", method="HEAD")[0] == 200
    assert [(m, p, h.get("X-Remote-User"), h.get("X-Forwarded-User")) for m, p, h in recorder.seen] == [
        ("GET", "/", ME, None), ("HEAD", "/metrics", ME, None)]  # the POST never left


def test_no_daemon_is_one_line_naming_it(serve_app):
    from daemon_proc import free_port

    url = f"http://127.0.0.1:{free_port()}"
    status, _, body = request(serve_app({"FAIRSHARED_URL": url}), "/api/v1/whoami")
    assert status == 502 and body.decode().count("\n") == 1 and f"cannot reach the daemon at {url}" in body.decode()
    status, _, body = request(serve_app({}), "/")
    assert status == 500 and "FAIRSHARED_URL is not set" in body.decode()


def test_settings_come_from_the_environment_then_the_env_file(tmp_path):
    env_file = tmp_path / "env"
    env_file.write_text("# comment\nFAIRSHARED_URL=http://head:9817\nFAIRSHARED_TIMEOUT = '5'\nJUNK\n")
    settings = load_app_module().settings
    assert settings({}, str(env_file)) == {"FAIRSHARED_URL": "http://head:9817", "FAIRSHARED_TIMEOUT": "5"}
    assert settings({"FAIRSHARED_URL": "http://other:1"}, str(env_file))["FAIRSHARED_URL"] == "http://other:1"
    assert settings({}, str(tmp_path / "absent")) == {}


def test_the_apps_own_address_without_its_slash_is_sent_to_it_with_one():
    """OnDemand's dashboard links to /pun/sys/fairshared; the page's relative links need the slash."""
    app = load_app_module().make_app({"FAIRSHARED_URL": "http://127.0.0.1:1"})
    seen = []
    body = app({"REQUEST_METHOD": "GET", "SCRIPT_NAME": "/pun/sys/fairshared", "PATH_INFO": "",
                "QUERY_STRING": "user=alice"}, lambda status, headers: seen.append((status, dict(headers))))
    assert b"".join(body) == b""
    assert seen == [("301 Moved Permanently", {"Location": "/pun/sys/fairshared/?user=alice", "Content-Length": "0"})]
