"""Run `fairshared run` as a real process in tests: start it, talk to it, read its log."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fairshared_argv() -> list[str]:
    # the interpreter running the tests, not whatever `fairshared` is first on $PATH (a pyenv shim
    # can lead to another checkout's install)
    beside = Path(sys.executable).parent / "fairshared"
    if beside.exists():
        return [str(beside)]
    return [sys.executable, "-m", "fairshared"]


def write_config(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def as_user_argv_env(env: dict) -> tuple[list[str], dict]:
    """``python -m fairshared`` and its environment for a process that runs as another (non-root)
    user: the system's interpreter of this one's version (the one running the tests may live in
    root's home, which others cannot enter), finding this checkout's code and this environment's
    packages on PYTHONPATH (both must be readable by that user)."""
    import sysconfig

    import fairshared

    want = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    python = next((p for p in (f"/usr/bin/{want}", f"/usr/local/bin/{want}") if os.access(p, os.X_OK)), None)
    if python is None:
        raise RuntimeError(f"no system {want} to run the daemon as another user with (the tests' "
                           f"interpreter, {sys.executable}, may be in a directory only root can enter)")
    src = str(Path(fairshared.__file__).resolve().parent.parent)
    paths = [src, sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    if not all(others_can_read(Path(p)) for p in paths):  # a clone in root's home, or any 0700 directory
        paths = [str(readable_copy())]
    out = dict(env)
    out["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return [python, "-m", "fairshared"], out


def others_can_read(path: Path) -> bool:
    """Whether any user may enter every directory down to ``path`` and read it (the bits for others:
    the daemon's user shares no group with the checkout's owner)."""
    path = path.resolve()
    return all(a.stat().st_mode & 0o001 for a in path.parents) and path.stat().st_mode & 0o005 == 0o005


_COPY: Path | None = None


def readable_copy() -> Path:
    """A directory every user can read holding fairshared and every distribution it requires (their
    whole installed files: numpy's bundled libraries sit beside it), copied once per test session from
    where they are (which another user may not be able to enter)."""
    global _COPY
    if _COPY is not None:
        return _COPY
    import atexit
    import re
    import shutil
    import tempfile
    from importlib import metadata

    import fairshared

    dest = Path(tempfile.mkdtemp(prefix="fairshared-as-user-"))
    atexit.register(shutil.rmtree, dest, True)  # 70 MB a test session: gone with it
    shutil.copytree(Path(fairshared.__file__).resolve().parent, dest / "fairshared",
                    ignore=shutil.ignore_patterns("__pycache__"))
    todo, seen = ["fairshared"], set()
    while todo:
        name = todo.pop()
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        key = dist.metadata["Name"].lower().replace("_", "-")
        if key in seen:
            continue
        seen.add(key)
        for req in dist.requires or ():
            if "extra ==" not in req:  # the extras are the tests' and the plot's, not the daemon's
                todo.append(re.match(r"[A-Za-z0-9_.-]+", req).group(0))
        if key == "fairshared":
            continue  # copied above (an editable install's files are elsewhere)
        for f in dist.files or ():
            src = Path(dist.locate_file(f)).resolve()
            if src.is_file() and "__pycache__" not in src.parts:
                to = dest / f
                to.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, to)
    for d, dirs, files in os.walk(dest):
        os.chmod(d, 0o755)
        for x in files:
            os.chmod(os.path.join(d, x), 0o644)
    _COPY = dest
    return dest


class Daemon:
    """A `fairshared run` child process with its log in a file (JSON lines: not a terminal);
    ``user``: run it as that Unix user (the test runs as root) instead of this process's."""

    def __init__(self, tmp: Path, *args: str, env: dict | None = None, user: str | None = None,
                 command: list[str] | None = None):
        self.port = free_port()
        self.log_path = tmp / "daemon.log"
        self.log_file = open(self.log_path, "w")
        env = env or os.environ.copy()
        argv0, ids = fairshared_argv(), {}
        if user is not None:
            import pwd

            pw = pwd.getpwnam(user)
            argv0, env = as_user_argv_env(env)
            env["HOME"] = str(tmp)
            ids = {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": [], "cwd": str(tmp)}
        # command: another program that takes `run`'s place (its last argument the listen address)
        self.argv = (argv0 + ["run", "--listen", f"127.0.0.1:{self.port}", *args] if command is None
                     else [*command, *args, f"127.0.0.1:{self.port}"])
        self.proc = subprocess.Popen(self.argv, stdout=self.log_file, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=env, **ids)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def get(self, path: str, timeout: float = 5) -> bytes:
        with urllib.request.urlopen(self.url + path, timeout=timeout) as r:
            return r.read()

    def post(self, path: str, token: str | None = None, timeout: float = 120) -> tuple[int, dict]:
        req = urllib.request.Request(self.url + path, data=b"", method="POST")
        if token:
            req.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"{}")

    def metric(self, name: str) -> float | None:
        """The value of the unlabelled series ``name`` in /metrics; None when it is not there."""
        for line in self.get("/metrics").decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        return None

    def wait_ready(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"daemon exited with {self.proc.returncode}:\n{self.log()}")
            try:
                if self.get("/-/healthy", timeout=1) == b"ok\n":
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise TimeoutError(f"daemon not ready after {timeout}s:\n{self.log()}")

    def status(self) -> dict:
        return json.loads(self.get("/-/status"))

    def wait_cycle(self, n: int, timeout: float = 60) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            st = self.status()
            if st["cycle"] >= n and st["outcome"] is not None:
                return st
            time.sleep(0.1)
        raise TimeoutError(f"no cycle {n} after {timeout}s:\n{self.log()}")

    def log(self) -> str:
        self.log_file.flush()
        return self.log_path.read_text()

    def log_events(self, event: str | None = None) -> list[dict]:
        out = []
        for line in self.log().splitlines():
            try:
                d = json.loads(line)
            except ValueError:
                continue
            if event is None or d.get("event") == event:
                out.append(d)
        return out

    def signal(self, sig) -> None:
        self.proc.send_signal(sig)

    def stop(self, timeout: float = 10) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log_file.close()
        return self.proc.returncode


@contextlib.contextmanager
def gated_service(config: dict, path: str | None = None, wait: float = 30):
    """A demo Service in this process whose every pull waits on ``svc.gate`` (a threading.Event, up
    to ``wait`` seconds), with a real one-thread scheduler: no HTTP server, no signals.  The tests
    that need a cycle held mid-way (a reload, a burst of requests) set the gate when they are done."""
    from fairshared.daemon.config import config_from_dict
    from fairshared.daemon.scheduler import make_scheduler
    from fairshared.daemon.service import Service

    svc = Service(config_from_dict(config), path, demo=True)
    gate = threading.Event()
    real = svc.runner.source.snapshot

    def slow(*a, **kw):
        gate.wait(wait)
        return real(*a, **kw)

    svc.runner.source.snapshot = slow
    svc.scheduler = make_scheduler()  # the daemon's own
    svc.scheduler.start()
    svc.gate = gate
    try:
        yield svc
    finally:
        gate.set()
        try:
            svc.scheduler.shutdown(wait=False)
        except Exception:
            pass
