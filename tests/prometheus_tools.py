"""Find (or install) Debian's Prometheus server and promtool for tests.

Plain helper module (not a conftest), like tests/slurm_cluster.py and with the same policy:
``prometheus_or_skip()`` returns the tools; when they cannot be had, ``CI == "true"``
makes that a test failure and elsewhere the test is skipped with a one-line reason.

Installing needs root: ``apt-get install -y --no-install-recommends prometheus``
(``apt-get update`` first only if that fails).  The package's maintainer scripts
would start the system's own Prometheus on :9090; a ``policy-rc.d`` that denies
every service start (exit 101) is put in place for the install when none denies
already, and removed afterwards.  (Without systemd, ``deb-systemd-invoke`` does
nothing anyway; ``invoke-rc.d`` is what policy-rc.d governs.)  Tests run their own
Prometheus on an ephemeral 127.0.0.1 port.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "prometheus"
POLICY_RC_D = Path("/usr/sbin/policy-rc.d")
APT_TIMEOUT = 900.0
SEARCH_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/bin", "/usr/sbin", "/usr/local/bin"])


class PrometheusUnavailable(RuntimeError):
    """promtool / prometheus are missing and could not be installed."""


@dataclass(frozen=True)
class PrometheusTools:
    promtool: str
    prometheus: str


def must_fail_loudly() -> bool:
    """In CI (CI=true) missing tools are a failure, not a skip."""
    return os.environ.get("CI") == "true"


def find() -> PrometheusTools | None:
    promtool = shutil.which("promtool", path=SEARCH_PATH)
    prometheus = shutil.which("prometheus", path=SEARCH_PATH)
    return PrometheusTools(promtool, prometheus) if promtool and prometheus else None


def _policy_denies() -> bool:
    """True when the installed policy-rc.d refuses to start services (exit 101)."""
    if not os.access(POLICY_RC_D, os.X_OK):
        return False
    try:
        return subprocess.run([str(POLICY_RC_D), "prometheus", "start"], capture_output=True,
                              timeout=10).returncode == 101
    except (OSError, subprocess.SubprocessError):
        return False


def _apt(argv: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=APT_TIMEOUT,
                          stdin=subprocess.DEVNULL)


def install() -> None:
    """apt-get install the package with service starts denied; raises PrometheusUnavailable."""
    if os.geteuid() != 0:
        raise PrometheusUnavailable("promtool/prometheus not found and not root: apt-get install prometheus")
    if shutil.which("apt-get") is None:
        raise PrometheusUnavailable("promtool/prometheus not found and no apt-get to install them")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    install_argv = ["apt-get", "install", "-y", "-q", "--no-install-recommends",
                    "-o", "DPkg::Lock::Timeout=300", PACKAGE]
    saved: bytes | None = None
    placed = False
    if not _policy_denies():
        if POLICY_RC_D.exists():
            saved = POLICY_RC_D.read_bytes()
        POLICY_RC_D.write_text("#!/bin/sh\n# fairshared tests: no service starts during apt-get\nexit 101\n")
        POLICY_RC_D.chmod(0o755)
        placed = True
    try:
        r = _apt(install_argv, env)
        if r.returncode != 0:
            u = _apt(["apt-get", "update", "-q", "-o", "DPkg::Lock::Timeout=300"], env)
            if u.returncode != 0:
                raise PrometheusUnavailable(f"apt-get update failed: {_last_line(u)}")
            r = _apt(install_argv, env)
        if r.returncode != 0:
            raise PrometheusUnavailable(f"apt-get install {PACKAGE} failed: {_last_line(r)}")
    except subprocess.TimeoutExpired:
        raise PrometheusUnavailable(f"apt-get install {PACKAGE} timed out") from None
    finally:
        if placed:
            if saved is None:
                POLICY_RC_D.unlink(missing_ok=True)
            else:
                POLICY_RC_D.write_bytes(saved)


def _last_line(r: subprocess.CompletedProcess) -> str:
    lines = [ln for ln in (r.stderr or r.stdout or "").splitlines() if ln.strip()]
    return lines[-1].strip() if lines else f"exit {r.returncode}"


_cached: PrometheusTools | None = None


def ensure_prometheus() -> PrometheusTools:
    """The tools, installing the Debian package if needed; raises PrometheusUnavailable."""
    global _cached
    if _cached is None:
        tools = find()
        if tools is None:
            install()
            tools = find()
            if tools is None:
                raise PrometheusUnavailable(f"{PACKAGE} installed but promtool/prometheus are not on PATH")
        _cached = tools
    return _cached


def prometheus_or_skip() -> PrometheusTools:
    """ensure_prometheus(), or pytest.skip with a one-line reason outside CI (pytest.fail in CI)."""
    import pytest

    try:
        return ensure_prometheus()
    except PrometheusUnavailable as exc:
        msg = f"Prometheus tools unavailable: {str(exc).splitlines()[0]}"
        if must_fail_loudly():
            pytest.fail(msg)
        pytest.skip(msg)
