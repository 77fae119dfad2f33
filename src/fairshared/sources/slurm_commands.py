"""Run Slurm's command-line tools: argv lists (never a shell), a timeout, errors naming the command.

:class:`SlurmCommands` is what every command-line reader runs its commands through.  Inside
:meth:`SlurmCommands.one_read` each command runs at most once: asking again for the same argv and
environment gets the first answer, so one read puts no second load on slurmctld and slurmdbd, and
every reader of it sees the same text.  ``calls`` records each command line run and its seconds.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field

from ..records import SourceError, SourceTimeout

__all__ = ["SlurmCommands"]


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
        t0 = time.monotonic()
        try:
            res = subprocess.run([exe, *argv[1:]], capture_output=True, text=True, timeout=self.timeout,
                                 env=self.env, stdin=subprocess.DEVNULL, errors="replace")
        except FileNotFoundError:
            raise SourceError(f"{argv[0]}: command not found (is Slurm installed and on PATH?)") from None
        except subprocess.TimeoutExpired:
            raise SourceTimeout(f"`{what}` did not answer within {self.timeout:g} s") from None
        finally:
            self.calls.append((" ".join(argv)[:200], time.monotonic() - t0))  # the whole command
        if res.returncode != 0:
            err = (res.stderr.strip().splitlines() or ["no error message"])[-1]
            raise SourceError(f"`{what}` failed (exit {res.returncode}): {err}")
        return res.stdout
