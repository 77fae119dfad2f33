"""Run Slurm's command-line tools: argv lists (never a shell), a timeout, errors naming the command.

:class:`SlurmCommands` is what every command-line reader runs its commands through.  Inside
:meth:`SlurmCommands.one_read` each command runs at most once: asking again for the same argv and
environment gets the first answer, so one read puts no second load on slurmctld and slurmdbd, and
every reader of it sees the same text.  ``calls`` records each command line run and its seconds.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field

from ..records import SourceError, SourceTimeout

__all__ = ["SlurmCommands", "no_slurm_conf"]

# where Slurm's commands find slurm.conf without $SLURM_CONF: Debian's and most packages' default,
# Debian's before 21.08, and the cache that slurmd or sackd keep on a configless node (23.11+ docs)
NO_CONF_WAIT = 5.0  # seconds a command may take when no slurm.conf is in sight (a configless answer is quick)
CONF_PLACES = ("/etc/slurm/slurm.conf", "/etc/slurm-llnl/slurm.conf", "/run/slurm/conf/slurm.conf")


def no_slurm_conf(exe: str, env) -> str | None:
    """Why Slurm's commands cannot find their configuration, or None when they may.

    Without $SLURM_CONF and with no slurm.conf where a command looks (CONF_PLACES, or beside a
    source build: ``<prefix>/etc/slurm.conf`` for ``<prefix>/bin/<command>``), every Slurm command
    asks DNS for a configless SRV record and fails after about a minute: said at once instead, naming
    what was looked for (a host that only has Slurm's commands, the README's newcomer without
    --demo)."""
    if env.get("SLURM_CONF"):
        return None
    found = shutil.which(exe, path=env.get("PATH")) if os.sep not in exe else exe
    if not found:
        return None  # "command not found" says it better
    places = list(CONF_PLACES)
    if found:
        places.append(os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(found))), "etc", "slurm.conf"))
    if any(os.path.exists(p) for p in places):
        return None
    return (f"no slurm.conf: $SLURM_CONF is not set and none of {', '.join(places)} exists (without one "
            "Slurm's commands ask DNS for a configless record, a minute to fail); set SLURM_CONF, or use "
            "--demo to try fairshared without Slurm")


@dataclass
class SlurmCommands:
    """``bin_dir`` prefixes the commands (default: $PATH); ``env`` replaces the environment."""

    timeout: float = 60.0
    bin_dir: str | None = None
    env: dict[str, str] | None = None
    # (command line, seconds) of the last commands run; bounded: a daemon runs them forever
    calls: deque[tuple[str, float]] = field(default_factory=lambda: deque(maxlen=1000), repr=False)
    # inside one_read(): the output of each command already run, by (argv, environment)
    _memo: dict | None = field(default=None, repr=False)

    @contextmanager
    def one_read(self):
        """One read of the cluster: inside it each command runs once (see the module docs)."""
        outer = self._memo is not None
        if not outer:
            self._memo = {}
        try:
            yield self
        finally:
            if not outer:
                self._memo = None

    def run(self, argv: list[str]) -> str:
        """The standard output of ``argv``; raises :class:`SourceError` naming the command."""
        if self._memo is None:
            return self._run(argv)
        key = (tuple(argv), tuple(sorted(self.env.items())) if self.env is not None else None)
        if key not in self._memo:
            self._memo[key] = self._run(argv)
        return self._memo[key]

    def run_with(self, argv: list[str], env_extra: dict[str, str] | None = None) -> str:
        """:meth:`run` with extra environment variables, naming the whole command when it fails
        (not just its first three words; arguments longer than 40 characters as ``…``)."""
        old = self.env
        if env_extra:
            base = dict(old) if old is not None else dict(os.environ)
            self.env = {**base, **env_extra}
        try:
            return self.run(argv)
        except SourceError as exc:
            short, full = " ".join(argv[:3]), " ".join(a if len(a) <= 40 else "…" for a in argv)
            raise type(exc)(str(exc).replace(f"`{short}`", f"`{full}`", 1)) from None
        finally:
            self.env = old

    def _run(self, argv: list[str]) -> str:
        exe = os.path.join(self.bin_dir, argv[0]) if self.bin_dir else argv[0]
        what = " ".join(argv[:3])
        # no slurm.conf in sight: a configless node answers at once, one without Slurm after a minute
        missing = no_slurm_conf(exe, self.env if self.env is not None else os.environ)
        timeout = min(self.timeout, NO_CONF_WAIT) if missing else self.timeout
        t0 = time.monotonic()
        try:
            res = subprocess.run([exe, *argv[1:]], capture_output=True, text=True, timeout=timeout,
                                 env=self.env, stdin=subprocess.DEVNULL, errors="replace")
        except FileNotFoundError:
            raise SourceError(f"{argv[0]}: command not found (is Slurm installed and on PATH?)") from None
        except subprocess.TimeoutExpired:
            if missing:
                raise SourceError(f"`{what}` did not answer within {timeout:g} s and {missing}") from None
            raise SourceTimeout(f"`{what}` did not answer within {self.timeout:g} s") from None
        finally:
            self.calls.append((" ".join(argv)[:200], time.monotonic() - t0))  # the whole command
        if res.returncode != 0:
            err = (res.stderr.strip().splitlines() or ["no error message"])[-1]
            raise SourceError(f"`{what}` failed (exit {res.returncode}): {err}" + (f"; {missing}" if missing else ""))
        return res.stdout
