"""Test helpers written once: each was copied into several test modules before (issue 28 §4).

* :func:`wait_until` — poll a condition, with one deadline rule and one failure message;
* :func:`run` / :func:`run_out_err` / :func:`fails` — a ``fairshared`` command run in-process
  under pytest's ``capsys``: exit 0 and its output, or exit 2 and the one-line error an admin's
  slip must get (no traceback, nothing on stdout).
"""

from __future__ import annotations

import time

from fairshared.cli import main


def wait_until(cond, timeout: float = 10.0, what: str = "the condition", interval: float = 0.05):
    """Call ``cond()`` every ``interval`` seconds until it returns something true, and return that;
    after ``timeout`` seconds fail the test, naming ``what`` it waited for."""
    deadline = time.monotonic() + timeout
    while True:
        got = cond()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out after {timeout:g} s waiting for {what}"
        time.sleep(interval)


def run_out_err(capsys, *argv) -> tuple[str, str]:
    """``fairshared ARGV`` must exit 0: its standard output and standard error."""
    assert main(list(argv)) == 0, capsys.readouterr().err
    c = capsys.readouterr()
    return c.out, c.err


def run(capsys, *argv) -> str:
    """``fairshared ARGV`` must exit 0: its standard output."""
    return run_out_err(capsys, *argv)[0]


def fails(capsys, *argv) -> str:
    """``fairshared ARGV`` must exit 2 with one line on stderr, ``fairshared: error: ...``, and
    nothing on stdout: that line (with its newline)."""
    assert main(list(argv)) == 2
    captured = capsys.readouterr()
    err = captured.err
    assert err.startswith("fairshared: error: ") and len(err.splitlines()) == 1, err
    assert captured.out == ""
    return err
