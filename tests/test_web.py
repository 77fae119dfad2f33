"""The web page's files and how the daemon's HTTP app serves them (no browser: tests/test_page_browser.py)."""

from __future__ import annotations

import re
from pathlib import Path
from html.parser import HTMLParser
from importlib import resources

import pytest

from fairshared import web
from fairshared.daemon.http import Endpoints, make_app

BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,*/*;q=0.8"


def call(app, path, accept="*/*", method="GET"):
    got = {}

    def start_response(status, headers):
        got["status"], got["headers"] = status, dict(headers)

    body = b"".join(app({"PATH_INFO": path, "REQUEST_METHOD": method, "HTTP_ACCEPT": accept}, start_response))
    return got["status"], got["headers"], body


@pytest.fixture
def app():
    return make_app(Endpoints(render_metrics=lambda a: (b"", "text/plain"), status=dict,
                              health=lambda: (True, "ok"), ready=lambda: (True, "ready"),
                              recompute=lambda: (200, {})))


def test_a_browser_gets_the_page_and_curl_the_one_line_list(app):
    status, headers, body = call(app, "/", BROWSER_ACCEPT)
    assert status == "200 OK" and headers["Content-Type"] == "text/html; charset=utf-8"
    assert b'<script type="module" src="static/app.js"></script>' in body
    status, headers, body = call(app, "/", "*/*")  # curl's default
    assert (status, headers["Content-Type"]) == ("200 OK", "text/plain; charset=utf-8")
    assert body.startswith(b"fairshared: /metrics /-/healthy")


@pytest.mark.parametrize("path,ctype", [("/static/app.js", "text/javascript; charset=utf-8"),
                                        ("/static/app.css", "text/css; charset=utf-8")])
def test_assets_carry_their_type_and_the_security_headers(app, path, ctype):
    status, headers, body = call(app, path)
    assert status == "200 OK" and headers["Content-Type"] == ctype
    assert body == resources.files("fairshared.web").joinpath(path.rsplit("/", 1)[1]).read_bytes()
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Cache-Control"] == "no-cache"
    csp = headers["Content-Security-Policy"]
    assert "default-src 'none'" in csp and "script-src 'self';" in csp and "unsafe" not in csp
    assert int(headers["Content-Length"]) == len(body)


def test_head_sends_the_length_and_no_body(app):
    status, headers, body = call(app, "/static/app.js", method="HEAD")
    assert status == "200 OK" and body == b"" and int(headers["Content-Length"]) > 1000


@pytest.mark.parametrize("path", ["/static/", "/static/index.html", "/static/../__init__.py", "/static/app.js/",
                                  "/static/nope.js", "/app.js", "/index.html", "/static/APP.JS"])
def test_anything_else_is_not_found(app, path):
    assert web.asset(path, BROWSER_ACCEPT) is None
    status, _, _ = call(app, path, BROWSER_ACCEPT)
    assert status == "404 Not Found"


@pytest.mark.parametrize("accept,html", [("text/html", True), ("TEXT/HTML;q=0.9", True), (BROWSER_ACCEPT, True),
                                         ("*/*", False), ("", False), ("application/json", False),
                                         ("text/htmlx", False)])
def test_only_a_client_asking_for_html_gets_the_page(accept, html):
    assert web.wants_html(accept) is html


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def test_the_page_has_no_inline_script_or_style_and_every_field_a_label():
    """The CSP forbids inline script and style: the page must not need them (a browser would refuse
    them and log an error), and every input is labelled for a screen reader."""
    html = resources.files("fairshared.web").joinpath("index.html").read_text()
    p = _Tags()
    p.feed(html)
    for tag, attrs in p.tags:
        assert "style" not in attrs, tag
        assert not [a for a in attrs if a.startswith("on")], (tag, attrs)
        if tag == "script":
            assert attrs.get("src", "").startswith("static/"), attrs
    assert "<style" not in html
    fields = {a["id"] for t, a in p.tags if t in ("input", "select")}
    labelled = {a["for"] for t, a in p.tags if t == "label"}
    assert fields and fields <= labelled, fields - labelled
    js = resources.files("fairshared.web").joinpath("app.js").read_text()
    assert not re.search(r"\binnerHTML\b|\beval\(|new Function|setAttribute\(\s*[\"']style", js)
    assert not re.search(r"https?://(?!www\.w3\.org/2000/svg)", js + html)  # nothing from elsewhere
    # and every URL relative, so that the page works behind a proxy that serves it under a prefix
    # (Open OnDemand's /rnode/HOST/PORT/): <prefix>/static/app.js, <prefix>/api/v1/...
    assert not re.search(r"""(?:src|href)="/|["'`]/(?:api|static)/""", js + html)


def test_the_page_weighs_what_the_docs_say_and_under_60_kb():
    files = {n: len(resources.files("fairshared.web").joinpath(n).read_bytes()) for n in web.TYPES}
    total_kb = sum(files.values()) / 1024
    assert total_kb < 60, files
    readme = (Path(__file__).resolve().parents[1] / "docs" / "users.md").read_text()
    m = re.search(r"The page weighs (\d+) KB", readme)
    assert m, "docs/users.md: 'The page weighs N KB' (index.html, app.js, app.css) is missing"
    assert abs(int(m.group(1)) - total_kb) <= 2, (m.group(1), total_kb)
