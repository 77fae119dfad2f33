"""Every example session in README.md and docs/*.md is what the current code prints.

A session is a line ``$ fairshared ARGS`` inside a fenced block, and the lines after it up to the next
``$`` line or the end of the block: its standard output.  Each one is run here (in-process, offline:
``--demo --at WHEN``, ``--snapshot``, ``--from-sshare``) and must equal the page's text.  With
``FAIRSHARED_WRITE_README=1`` the pages' blocks are rewritten with what the code prints instead
(then rerun without it).

A session that reads a live Slurm (no offline source on its command line) cannot come from here: it
must be listed in :data:`LIVE`, with the live test that prints it, or this test fails.

A session's output is what the command writes from its own thread: ``sys.stdout`` is the whole
process's, and any other thread of the test run writing there meanwhile (structlog's default
logger writes to stdout: a daemon test's cycle still ending in its scheduler's worker, later
under load) would have been taken for the session's output.
"""

from __future__ import annotations

import io
import os
import re
import shlex
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from fairshared.cli import main

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]  # the front page and every doc
OFFLINE = ("--demo", "--snapshot", "--from-sshare")
# sessions printed by a real Slurm, and the test that prints them in every matrix run
LIVE = {"fairshared explain 225 --vs 226": "tests/test_whatif_slurm.py (a real Slurm 23.11.11 session)"}


@dataclass
class Session:
    command: str  # "fairshared whatif --demo ..."
    page: Path
    start: int  # index of its first output line in the README's lines
    end: int  # one past its last
    expected: str


def sessions(lines: list[str], page: Path = README) -> list[Session]:
    out: list[Session] = []
    fence = False
    current: Session | None = None

    def close(k: int) -> None:
        nonlocal current
        if current is not None:
            current.end = k
            current.expected = "".join(line + "\n" for line in lines[current.start:k])
            out.append(current)
            current = None

    for k, line in enumerate(lines):
        if re.match(r"^\s*```", line):
            close(k)
            fence = not fence
        elif fence and line.startswith("$ "):
            close(k)
            if line.startswith("$ fairshared "):
                current = Session(line[2:].strip(), page, k + 1, k + 1, "")
    return out


def offline(command: str) -> bool:
    return any(opt in shlex.split(command) for opt in OFFLINE)


class ThreadStdout(io.TextIOBase):
    """``sys.stdout`` that keeps what one thread writes and passes every other thread's on."""

    def __init__(self, other):
        super().__init__()
        self.other, self.thread, self.kept = other, threading.get_ident(), io.StringIO()

    def _target(self):
        return self.kept if threading.get_ident() == self.thread else self.other

    def write(self, text: str) -> int:
        return self._target().write(text)

    def flush(self) -> None:  # each thread its own stream: a text stream is not for two threads at once
        self._target().flush()


@contextmanager
def this_threads_stdout():
    out = ThreadStdout(sys.stdout)
    sys.stdout = out
    try:
        yield out.kept
    finally:
        sys.stdout = out.other


def output_of(command: str) -> str:
    argv = shlex.split(command)[1:]
    with this_threads_stdout() as kept:
        code = main(argv)
    assert code == 0, f"{command}: exit {code}"
    return kept.getvalue()


SESSIONS = [s for page in PAGES for s in sessions(page.read_text().splitlines(), page)]


def test_the_readme_has_sessions_and_each_is_run_here_or_by_a_live_test():
    assert len(SESSIONS) >= 4
    for s in SESSIONS:
        assert offline(s.command) or s.command in LIVE, (
            f"{s.page.name} session `{s.command}` reads a live Slurm: print it from a live test and list it in LIVE")
        if offline(s.command) and "--demo" in shlex.split(s.command):
            assert "--at" in shlex.split(s.command), f"`{s.command}`: a demo session needs --at"


@pytest.mark.parametrize("session", [s for s in SESSIONS if offline(s.command)],
                         ids=lambda s: f"{s.page.name}: {s.command}")
def test_a_readme_session_is_what_the_code_prints(session):
    got = output_of(session.command)
    if os.environ.get("FAIRSHARED_WRITE_README") == "1":
        _rewrite(session, got)
        return
    assert got == session.expected, f"{session.page.name} is stale for `{session.command}` (FAIRSHARED_WRITE_README=1)"


def test_another_thread_writing_to_stdout_meanwhile_is_not_the_sessions_output():
    session = next(s for s in SESSIONS if offline(s.command))
    stop, wrote = threading.Event(), threading.Event()

    def chatter():
        while not stop.wait(0.001):
            print("a cycle logged by another test's leftover thread")
            wrote.set()

    t = threading.Thread(target=chatter, daemon=True)
    t.start()
    try:
        assert wrote.wait(5)
        got = output_of(session.command)
    finally:
        stop.set()
        t.join(5)
    assert got == session.expected


def _rewrite(session: Session, got: str) -> None:
    """Replace the session's output in its page (found again by its command: earlier rewrites may have
    moved it)."""
    lines = session.page.read_text().splitlines()
    [now] = [s for s in sessions(lines, session.page) if s.command == session.command]
    lines[now.start:now.end] = got.splitlines()
    session.page.write_text("\n".join(lines) + "\n")
