"""The web page in a real browser (issue 27, section 6): Debian's chromium, headless, driven by
selenium through Debian's chromedriver (no Selenium Manager, no downloaded browser), against the real
demo daemon (`fairshared run --demo` in a child process) and, for the 2-second first view, the same
daemon on a synthetic tree of 100,000 associations (tests/big_tree_daemon.py).

Chromium and chromedriver come from Debian (`apt-get install chromium chromium-driver`): when they are
missing the session installs them as root under CI=true, and otherwise skips with a one-line reason;
under CI=true a missing browser is a failure, never a skip.  Screenshots go to the pytest tmp dir
(their paths are printed: `pytest -s` shows them).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
from daemon_proc import Daemon, write_config
from prometheus_client.parser import text_string_to_metric_families

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
PACKAGES = ["chromium", "chromium-driver"]
# without the background-networking flags chromium dials out at start, which a closed network refuses
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1366,768"]  # a laptop's screen
BIG = 100_000


def _unavailable(reason: str):
    if os.environ.get("CI") == "true":
        pytest.fail(f"browser tests: {reason}")
    pytest.skip(f"browser tests: {reason}")


def _install() -> str | None:
    """apt-get install Debian's chromium and chromedriver (root under CI only); None or why not."""
    if os.environ.get("CI") != "true":
        return f"{CHROMIUM} or {CHROMEDRIVER} missing: apt-get install {' '.join(PACKAGES)}"
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return f"{CHROMIUM} or {CHROMEDRIVER} missing and not root with apt-get to install {' '.join(PACKAGES)}"
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", "-o", "DPkg::Lock::Timeout=300", *PACKAGES]

    def apt(argv):
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)

    r = apt(install)
    if r.returncode != 0:  # as deploy/dev-cluster/up: update the lists only when the install fails
        apt(["apt-get", "update", "-q", "-o", "DPkg::Lock::Timeout=300"])
        r = apt(install)
    if r.returncode != 0:
        last = ((r.stderr or r.stdout).strip().splitlines() or [f"exit {r.returncode}"])[-1]
        return f"apt-get install {' '.join(PACKAGES)} failed: {last}"
    if not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)):
        return f"apt-get installed {' '.join(PACKAGES)} but {CHROMIUM} or {CHROMEDRIVER} is still missing"
    return None


@pytest.fixture(scope="session")
def chromium():
    """Debian's chromium and chromedriver, installed if need be (see the module's docstring)."""
    if not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)):
        why = _install()
        if why:
            _unavailable(why)
    try:
        import selenium  # noqa: F401  (the test extra's)
    except ImportError:
        _unavailable("selenium is not installed: pip install -e '.[test]'")
    return CHROMIUM, CHROMEDRIVER


@pytest.fixture
def browser(chromium, tmp_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium[0]
    for flag in FLAGS:
        opts.add_argument(flag)
    opts.add_argument(f"--user-data-dir={tempfile.mkdtemp(dir=tmp_path, prefix='chromium-')}")
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(chromium[1]), options=opts)
    driver.set_page_load_timeout(30)
    driver.shots = tmp_path
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The demo daemon, cycles only when asked (the timer's period is an hour), 1 s between asked ones."""
    tmp = tmp_path_factory.mktemp("page")
    cfg = write_config(tmp / "fs.toml", f'[http]\nmin_interval = 1\n[state]\ndirectory = "{tmp}/state"\n')
    d = Daemon(tmp, "--demo", "--period", "3600", "--config", str(cfg))
    d.wait_ready()
    d.wait_cycle(1)
    yield d
    d.stop()


def synthetic_daemon(tmp: Path, cfg: Path, tree: str):
    """A daemon on tests/big_tree_daemon.py's synthetic tree ``tree``, after its first cycle."""
    d = Daemon(tmp, str(cfg), tree, command=[sys.executable, str(Path(__file__).with_name("big_tree_daemon.py"))])
    d.wait_ready(60)
    d.wait_cycle(1, 120)
    yield d
    d.stop()


def screenshot(driver, name: str, show: str | None = None) -> Path:
    """Save the window as NAME.png in the test's tmp dir, scrolled to the element ``show`` (CSS)."""
    if show:
        driver.execute_script("document.querySelector(arguments[0]).scrollIntoView({block: 'center'})", show)
    path = driver.shots / f"{name}.png"
    driver.save_screenshot(str(path))
    print(f"screenshot: {path}")
    return path


def wait_for(driver, script: str, timeout: float = 10):
    """Poll a JavaScript expression until it is truthy; its value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = driver.execute_script(f"return {script}")
        if got:
            return got
        time.sleep(0.05)
    raise TimeoutError(f"{script} still false after {timeout} s")


def console_errors(driver) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def open_page(driver, url: str) -> float:
    """Load the page, wait for the tree; the ms from navigation start to the first tree drawn."""
    driver.get(url)
    return float(wait_for(driver, "document.body.dataset.treeDrawn", 30))


def association_metrics(daemon) -> dict[tuple[str, str], dict[str, float]]:
    """{(account, user): {"fairshare": F, "rank": R}} of every user association in /metrics."""
    out: dict[tuple[str, str], dict[str, float]] = {}
    for fam in text_string_to_metric_families(daemon.get("/metrics").decode()):
        for s in fam.samples:
            if s.name in ("fairshared_association_fairshare", "fairshared_association_rank") and s.labels["user"]:
                key = (s.labels["account"], s.labels["user"])
                out.setdefault(key, {})[s.name.rsplit("_", 1)[1]] = s.value
    return out


def text(driver, css: str) -> str:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.CSS_SELECTOR, css).text


# ---- the demo daemon -----------------------------------------------------------------------------

def test_the_page_loads_without_console_errors_and_draws_the_tree(browser, demo):
    from selenium.webdriver.common.by import By

    open_page(browser, demo.url + "/")
    users = association_metrics(demo)
    assert len(users) == 14  # the demo's user associations
    rects = browser.find_elements(By.CSS_SELECTOR, "#tree svg g rect")
    # the top band and the demo's 21 associations under root (its tree is 4 levels: all in one view)
    assert len(rects) == 22
    drawn = {(g.get_attribute("data-user")) for g in browser.find_elements(By.CSS_SELECTOR, "#tree g.user")}
    assert drawn == {u for _, u in users}
    labels = [t.text for t in browser.find_elements(By.CSS_SELECTOR, "#tree svg text")]
    assert "physics" in labels and "chemistry" in labels
    assert text(browser, "#tree-note") == "21 associations in this view (3 levels down)."
    assert text(browser, "#cycle").startswith(f"cycle {demo.status()['cycle']} · fair_tree · evaluated ")
    screenshot(browser, "tree")
    assert console_errors(browser) == []


def test_the_tree_zooms_by_keyboard_and_back(browser, demo):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    open_page(browser, demo.url + "/")
    # one tab stop for the tree: its first association (root's own user), then the arrows
    stops = browser.find_elements(By.CSS_SELECTOR, "#tree g[tabindex='0']")
    assert [g.get_attribute("aria-label").split(":")[0] for g in stops] == ["root (root)"]
    browser.find_element(By.ID, "tree-h").click()
    ActionChains(browser).send_keys(Keys.TAB).perform()  # from the heading, Tab lands on the tree
    assert browser.switch_to.active_element == stops[0]
    ActionChains(browser).send_keys(Keys.ARROW_RIGHT).perform()
    physics = browser.switch_to.active_element
    assert physics.get_attribute("aria-label").startswith("physics:")
    physics.send_keys(Keys.ENTER)
    wait_for(browser, "document.querySelector('#crumbs [aria-current]').textContent === 'physics'")
    # under physics: alice, bob, astro, theory, and astro's and theory's five users
    wait_for(browser, "document.querySelectorAll('#tree svg g rect').length === 10")
    # the focus stays in the tree, on the first association under physics
    assert browser.switch_to.active_element.get_attribute("aria-label").startswith("alice (physics):")
    assert text(browser, "#tree-note") == "9 associations in this view (3 levels down)."
    screenshot(browser, "tree-physics")
    browser.find_element(By.CSS_SELECTOR, "#crumbs button").click()  # "root"
    wait_for(browser, "document.querySelectorAll('#tree svg g rect').length === 22")
    assert console_errors(browser) == []


def test_clicking_a_user_shows_the_metrics_values_of_that_cycle(browser, demo):
    from selenium.webdriver.common.by import By

    open_page(browser, demo.url + "/")
    cycle = demo.status()["cycle"]
    want = association_metrics(demo)
    assert demo.status()["cycle"] == cycle  # the metrics read are that cycle's
    browser.find_element(By.CSS_SELECTOR, "#tree g.user[data-user='alice'][aria-label*='(physics)']").click()
    wait_for(browser, "document.querySelector('#standing')")
    shown = float(text(browser, "#picked-facts dd[data-k='fairshare']"))
    assert shown == pytest.approx(want["physics", "alice"]["fairshare"], abs=5e-7)
    assert int(text(browser, "#picked-facts dd[data-k='rank']")) == want["physics", "alice"]["rank"]
    # "Me" (the standing from /api/v1/users/alice): both of alice's associations, rank of N
    rows = browser.find_elements(By.CSS_SELECTOR, "#standing tbody tr")
    assert sorted(r.get_attribute("data-account") for r in rows) == ["chemistry", "physics"]
    for r in rows:
        m = want[r.get_attribute("data-account"), "alice"]
        assert float(r.find_element(By.CSS_SELECTOR, "[data-k='fairshare']").text) == pytest.approx(m["fairshare"], abs=5e-7)
        assert r.find_element(By.CSS_SELECTOR, "[data-k='rank']").text == f"{int(m['rank'])} of {len(want)}"
    assert text(browser, "#cycle").startswith(f"cycle {cycle} ")
    screenshot(browser, "alice", "#standing")
    assert console_errors(browser) == []


def pending_job_ids(daemon) -> dict[int, str]:
    """{job id: user} of the pending jobs in /metrics (fairshared_job_fairshare_contribution)."""
    out = {}
    for fam in text_string_to_metric_families(daemon.get("/metrics").decode()):
        for s in fam.samples:
            if s.name == "fairshared_job_fairshare_contribution":
                out[int(s.labels["job_id"])] = s.labels["user"]
    return out


def test_a_pasted_job_id_is_explained_and_compared(browser, demo):
    from selenium.webdriver.common.by import By

    open_page(browser, demo.url + "/")
    jobs = pending_job_ids(demo)
    job = min(jobs)
    browser.find_element(By.ID, "job-input").send_keys(str(job))
    browser.find_element(By.CSS_SELECTOR, "#job-form button").click()
    lead = wait_for(browser, "[...document.querySelectorAll('#job-out p.lead')].map(p => p.textContent).join('\\n')")
    assert lead.startswith(f"Job {job}: {jobs[job]} in ")
    assert " in " in lead and "'s queue." in lead  # its place, "Nth of M in <partition>'s queue."
    expl = json.loads(demo.get(f"/api/v1/jobs/{job}"))
    q = expl["queue"]
    assert f"of {q['of']} in {q['partition']}'s queue." in lead
    others = q["ahead"] + q["behind"]
    if others:  # against whom: the first neighbour, compared
        browser.find_element(By.CSS_SELECTOR, "#job-out ul.against button").click()
        vs = wait_for(browser, "document.querySelector('#job-out table caption')?.textContent === 'points, a − b' && "
                               "document.querySelector('#job-out p.lead').textContent")
        assert f"job {others[0]['job_id']} (" in vs.lower() and f"job {job} (" in vs.lower()
        assert " is ahead of " in vs
        screenshot(browser, "job-vs")
        browser.find_element(By.CSS_SELECTOR, "#job-out > button.link").click()  # back to the job alone
        wait_for(browser, f"document.querySelector('#job-out p.lead')?.textContent.startsWith('Job {job}: ')")
    screenshot(browser, "job")
    assert console_errors(browser) == []


def test_my_pending_jobs_say_where_they_stand_and_recovery_is_estimated(browser, demo):
    from selenium.webdriver.common.by import By

    open_page(browser, demo.url + "/")
    user = next(iter(pending_job_ids(demo).values()))
    field = browser.find_element(By.ID, "user-input")
    field.clear()
    field.send_keys(user + "\n")
    wait_for(browser, "document.querySelector('#standing')")
    standing = json.loads(demo.get(f"/api/v1/users/{user}"))
    summaries = browser.find_elements(By.CSS_SELECTOR, "#jobs details summary")
    assert len(summaries) == len(standing["pending_jobs"]) > 0
    assert [int(d.get_attribute("data-job")) for d in browser.find_elements(By.CSS_SELECTOR, "#jobs details")] \
        == [j["job_id"] for j in standing["pending_jobs"]]
    assert "null" not in text(browser, "#jobs")
    summaries[0].click()
    wait_for(browser, "document.querySelector('#jobs details[open] .why p.lead')")
    # when would the factor recover: the page says what the API answers (others' usage held)
    assert browser.find_element(By.ID, "rec-others").get_attribute("value") == "hold"
    browser.find_element(By.CSS_SELECTOR, "#recovery-form button").click()
    got = wait_for(browser, "[...document.querySelectorAll('#recovery p')].map(p => p.textContent)")
    account = browser.find_element(By.ID, "rec-account").get_attribute("value")
    r = json.loads(demo.get(f"/api/v1/users/{user}/recovery?account={account}&target=0.5&others=hold"))
    assert got[0] == f"Now: factor {r['fairshare_now']:.6f}, rank {r['rank_now']}. Target: factor 0.500000."
    if r["periods"] == 0:
        assert got[1].startswith("Already there")
    elif r["seconds"] is None:
        assert got[1].startswith(f"Not within {r['horizon_periods']:,} periods")
    else:
        assert got[1].startswith("In about ") and f"({r['periods']:,} periods of " in got[1]
    screenshot(browser, "me", "#recovery")
    assert console_errors(browser) == []


def test_the_history_plot_has_points_after_a_few_cycles(browser, demo):
    from selenium.webdriver.common.by import By

    start = demo.status()["cycle"]
    for _ in range(3):
        code, _ = demo.post("/-/recompute")
        assert code == 200
    assert demo.status()["cycle"] >= start + 3
    open_page(browser, demo.url + "/")
    browser.find_element(By.CSS_SELECTOR, "#tree g.user[data-user='bob']").click()
    n = wait_for(browser, "document.querySelectorAll('#history svg circle.pt').length", 15)
    hist = json.loads(demo.get("/api/v1/history?user=bob"))
    assert n == sum(len(s["points"]) for s in hist["series"]) >= 4
    assert text(browser, "#history ul.keys li").startswith("physics · ")
    screenshot(browser, "history", "#history")
    assert console_errors(browser) == []


@pytest.fixture
def prefixed(demo):
    """A reverse proxy on loopback that serves the demo daemon under /rnode/demo/9817/ (as Open
    OnDemand serves an app), forwarding the path without its prefix; its URL."""
    import http.server
    import threading
    import urllib.error

    prefix = "/rnode/demo/9817/"

    class Forward(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if not self.path.startswith(prefix):
                self.send_error(404)
                return
            req = urllib.request.Request(demo.url + "/" + self.path[len(prefix):],
                                         headers={"Accept": self.headers.get("Accept", "*/*")})
            try:
                with urllib.request.urlopen(req, timeout=30) as r:
                    code, headers, body = r.status, r.headers, r.read()
            except urllib.error.HTTPError as exc:
                code, headers, body = exc.code, exc.headers, exc.read()
            self.send_response(code)
            for k in ("Content-Type", "Content-Security-Policy", "X-Content-Type-Options", "Cache-Control"):
                if headers.get(k):
                    self.send_header(k, headers[k])
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Forward)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}{prefix}"
    server.shutdown()
    server.server_close()


def test_the_page_works_under_a_proxy_prefix(browser, prefixed):
    """Every URL of the page is relative: served under a prefix, it loads its files and asks the API there."""
    from selenium.webdriver.common.by import By

    open_page(browser, prefixed)
    assert len(browser.find_elements(By.CSS_SELECTOR, "#tree g.user")) == 14
    browser.find_element(By.CSS_SELECTOR, "#tree g.user[data-user='bob']").click()
    wait_for(browser, "document.querySelector('#standing')")
    assert console_errors(browser) == []


# ---- 100,000 associations ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def big(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("big")
    # per-user series at 100,000 associations would be a 100 MB scrape: accounts only (README)
    cfg = write_config(tmp / "fs.toml", f'[metrics]\nassociations = "accounts"\n[schedule]\nperiod = 3600\n'
                                        f'[state]\ndirectory = "{tmp}/state"\n')
    yield from synthetic_daemon(tmp, cfg, str(BIG))


def test_a_tree_of_100000_associations_shows_its_first_view_within_2_s(browser, big):
    from selenium.webdriver.common.by import By

    with urllib.request.urlopen(big.url + "/api/v1/tree?depth=1&limit=1") as r:
        first = json.loads(r.read())
    assert first["total"] > 0
    drawn = open_page(browser, big.url + "/")  # a fresh profile: nothing cached
    note = text(browser, "#tree-note")
    print(f"100,000 associations: first view drawn {drawn:.0f} ms after navigation start; {note}")
    assert drawn < 2000
    # the deepest view that fits a page (2,000 rows): here root's 18 children and their 289 (three
    # levels would be over 5,000 rows), every band whole
    assert note == "307 associations in this view (2 levels down); zoom in for the rest.", note
    assert len(browser.find_elements(By.CSS_SELECTOR, "#tree svg g rect")) > 100
    screenshot(browser, "tree-100000")
    assert console_errors(browser) == []


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("wide")
    cfg = write_config(tmp / "fs.toml", f'[schedule]\nperiod = 3600\n[state]\ndirectory = "{tmp}/state"\n')
    yield from synthetic_daemon(tmp, cfg, "flat3000")


def test_more_children_than_a_page_are_paged_through(browser, wide):
    from selenium.webdriver.common.by import By

    open_page(browser, wide.url + "/")
    browser.find_element(By.CSS_SELECTOR, "#tree g.account[aria-label^='wide:']").click()
    note = "document.querySelector('#tree-note').textContent"
    wait_for(browser, f"{note}.startsWith('1–2,000 of 3,000 associations in this view (1 level down)')")
    users = browser.find_elements(By.CSS_SELECTOR, "#tree g.user")
    assert len(users) == 2000 and users[0].get_attribute("data-user") == "u0"
    browser.find_element(By.CSS_SELECTOR, "#tree g.more").click()  # "+1,000 more"
    wait_for(browser, f"{note}.startsWith('2,001–3,000 of 3,000 ')")
    users = browser.find_elements(By.CSS_SELECTOR, "#tree g.user")
    assert len(users) == 1000 and users[-1].get_attribute("data-user") == "u2999"
    assert browser.find_element(By.CSS_SELECTOR, "#tree g.more text").text == "← 2,000"
    screenshot(browser, "tree-wide-page-2")
    browser.find_element(By.CSS_SELECTOR, "#tree g.more").click()  # back to the first page
    wait_for(browser, f"{note}.startsWith('1–2,000 of 3,000 ')")
    assert console_errors(browser) == []
