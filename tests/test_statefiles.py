"""The daemon's own files: a damaged push state is set aside (never a crash), writes never follow
symlinks, the state directory must be ours, and two daemons never share one."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from daemon_proc import fairshared_argv, write_config
from fakes import Queue, jobs, runner

from fairshared.daemon import statefiles
from fairshared.model import InputError

SHAPES = {
    "jobs is a list": '{"version": 1, "mode": "site_factor", "jobs": [1, 2]}',
    "job is a string": '{"version": 1, "mode": "site_factor", "jobs": {"5": "x"}}',
    "value too big": '{"version": 1, "mode": "site_factor", "jobs": {"5": {"value": 1e400}}}',
    "float value": '{"version": 1, "mode": "site_factor", "jobs": {"5": {"value": 1.5}}}',
    "bad job id": '{"version": 1, "mode": "site_factor", "jobs": {"x5": {"value": 1}}}',
    "a bare number": "1e400",
    "a list": "[1, 2]",
    "not json": "{{{",
    "not utf-8": b"\xff\xfe{}",
    "deep": "[" * 100000 + "]" * 100000,
}


@pytest.mark.parametrize("content", list(SHAPES.values()), ids=list(SHAPES))
def test_untrusted_push_state_is_set_aside_and_replaced(tmp_path, content):
    f = tmp_path / "push-state.json"
    original = content if isinstance(content, bytes) else content.encode()
    f.write_bytes(original)
    q = Queue(jobs())
    r = runner(q, tmp_path)  # must not raise
    res = r.cycle()
    assert res.outcome == "success" and res.pushed == 2
    aside = [p for p in tmp_path.iterdir() if p.name.startswith("push-state.json.bad-")]
    assert len(aside) == 1 and aside[0].read_bytes() == original  # kept for a post-mortem
    assert set(json.loads(f.read_text())["jobs"]) == {"1", "2"}  # replaced by a good one


def test_another_modes_state_is_kept_to_be_taken_back_not_set_aside(tmp_path):
    (tmp_path / "push-state.json").write_text('{"version": 1, "mode": "nice", "jobs": {"1": {"value": 3}}}')
    r = runner(Queue(jobs()), tmp_path)
    # kept with the mode that wrote it: the first cycle takes job 1's nice back (fairshared.takeback)
    assert r.state.mode == "nice" and r.state.jobs[1].value == 3
    assert not any(p.name.endswith(".bad") or ".bad-" in p.name for p in tmp_path.iterdir())


def test_a_symlinked_state_file_is_neither_read_nor_written_through(tmp_path):
    target = tmp_path / "elsewhere.json"
    target.write_text('{"version": 1, "mode": "site_factor", "jobs": {}}')
    state = tmp_path / "state"
    state.mkdir()
    (state / "push-state.json").symlink_to(target)
    res = runner(Queue(jobs()), state).cycle()
    assert res.pushed == 2
    assert target.read_text() == '{"version": 1, "mode": "site_factor", "jobs": {}}'  # untouched
    f = state / "push-state.json"
    assert not f.is_symlink() and set(json.loads(f.read_text())["jobs"]) == {"1", "2"}


def test_write_atomic_leaves_no_temporary_files_and_replaces_a_planted_link(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep")
    (tmp_path / "s.json").symlink_to(victim)
    statefiles.write_atomic(tmp_path, "s.json", b"{}")
    assert victim.read_text() == "keep" and (tmp_path / "s.json").read_bytes() == b"{}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.json", "victim"]


def test_read_json_refuses_what_it_cannot_trust(tmp_path):
    assert statefiles.read_json(tmp_path / "absent") is None
    (tmp_path / "big").write_bytes(b" " * 100)
    with pytest.raises(statefiles.Untrusted, match="more than 10"):
        statefiles.read_json(tmp_path / "big", max_bytes=10)
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(statefiles.Untrusted, match="not a regular file"):
        statefiles.read_json(tmp_path / "fifo")


def test_state_directory_must_be_ours_and_not_writable_by_others(tmp_path):
    d = tmp_path / "st"
    statefiles.check_directory(d)
    assert oct(d.stat().st_mode & 0o777) == oct(0o700)
    d.chmod(0o777)
    with pytest.raises(InputError, match="writable by others"):
        statefiles.check_directory(d)
    f = tmp_path / "file"
    f.write_text("")
    with pytest.raises(InputError, match="not a directory"):
        statefiles.check_directory(f)


def test_lock_is_exclusive_and_names_the_holder(tmp_path):
    fd = statefiles.lock(tmp_path / "x.pid", "pid file")
    try:
        assert (tmp_path / "x.pid").read_text() == f"{os.getpid()}\n"
        with pytest.raises(InputError, match=rf"pid file .*in use by another fairshared \(pid {os.getpid()}\)"):
            statefiles.lock(tmp_path / "x.pid", "pid file")
    finally:
        os.close(fd)
    os.close(statefiles.lock(tmp_path / "x.pid", "pid file"))  # free again once released


def test_a_world_writable_state_directory_stops_the_daemon_in_one_line(tmp_path):
    d = tmp_path / "state"
    d.mkdir()
    d.chmod(0o777)
    cfg = write_config(tmp_path / "fs.toml", f'[state]\ndirectory = "{d}"\n')
    res = subprocess.run(fairshared_argv() + ["run", "--demo", "--once", "--config", str(cfg)],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1
    assert "writable by others" in res.stderr and str(d) in res.stderr and "Traceback" not in res.stderr


def test_write_atomic_fsyncs_the_file_then_the_directory(tmp_path, monkeypatch):
    import stat

    synced = []
    real = os.fsync

    def record(fd):
        st = os.fstat(fd)
        synced.append("dir" if stat.S_ISDIR(st.st_mode) else f"file:{st.st_size}")
        real(fd)

    monkeypatch.setattr(os, "fsync", record)
    statefiles.write_atomic(tmp_path, "s.json", b"12345")
    assert synced == ["file:5", "dir"]  # the data before the rename, the rename itself after


# -- symlinks are never followed; a full disk at start-up is one line ---------------------------------

def one_line_exit_2(res, *needles):
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    for n in needles:
        assert n in lines[0], lines[0]


def run_once(cfg, *extra) -> subprocess.CompletedProcess:
    return subprocess.run(fairshared_argv() + ["run", "--demo", "--once", "--config", str(cfg), *extra],
                          capture_output=True, text=True, timeout=60, check=False, stdin=subprocess.DEVNULL)


def test_a_symlinked_state_directory_is_refused_not_followed(tmp_path):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "state"
    link.symlink_to(real)
    with pytest.raises(InputError, match=r"state directory .*/state: is a symbolic link .*refusing to"):
        statefiles.check_directory(link)
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    with pytest.raises(InputError, match="is a symbolic link"):
        statefiles.check_directory(dangling)
    assert not (tmp_path / "nowhere").exists()  # not created through the link either
    res = run_once(write_config(tmp_path / "fs.toml", f'[state]\ndirectory = "{link}"\n'))
    one_line_exit_2(res, f"state directory {link}: is a symbolic link")
    assert list(real.iterdir()) == []  # nothing written where the link points


def test_a_symlinked_audit_log_is_refused_at_start_and_never_written_through(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    log = tmp_path / "audit.jsonl"
    log.symlink_to(victim)
    cfg = write_config(tmp_path / "fs.toml",
                       f'[state]\ndirectory = "{tmp_path}/state"\naudit_log = "{log}"\n')
    one_line_exit_2(run_once(cfg), f"state.audit_log {log}: is a symbolic link")
    assert victim.read_text() == "keep\n"
    # a link planted after the start: the append fails (logged), the target is untouched
    from test_runner_audit import runner as audited_runner

    r = audited_runner(Queue(jobs()), tmp_path, state={"audit_log": str(log)})
    assert r.cycle().outcome == "success"
    assert victim.read_text() == "keep\n" and log.is_symlink()


def test_a_full_disk_at_start_up_is_one_line(tmp_path, monkeypatch, capsys):
    import errno

    from fairshared import cli
    from fairshared.daemon import service

    def full(fd, data, offset):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "pwrite", full)
    monkeypatch.setattr(service, "configure", lambda *a, **kw: None)  # leave this process's logging alone
    cfg = write_config(tmp_path / "fs.toml", f'[state]\ndirectory = "{tmp_path}/state"\n')
    assert cli.main(["run", "--demo", "--once", "--config", str(cfg)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [(f"fairshared: error: state directory lock {tmp_path}/state/fairshared.lock: "
                    f"cannot write: No space left on device")]


def test_a_pid_file_that_cannot_be_written_is_one_line(tmp_path):
    # /dev/full: opens and locks like a file, but takes no write (and no truncate)
    cfg = write_config(tmp_path / "fs.toml",
                       f'[state]\ndirectory = "{tmp_path}/state"\npid_file = "/dev/full"\n')
    res = subprocess.run(fairshared_argv() + ["run", "--demo", "--config", str(cfg),
                                              "--listen", "127.0.0.1:0"],
                         capture_output=True, text=True, timeout=60, check=False, stdin=subprocess.DEVNULL)
    one_line_exit_2(res, "pid file /dev/full: cannot write:")


def test_a_reload_to_a_symlinked_audit_log_is_rejected(tmp_path):
    from fairshared.daemon.config import load_config
    from fairshared.daemon.service import Service

    good, link = tmp_path / "audit.jsonl", tmp_path / "link.jsonl"
    link.symlink_to(tmp_path / "victim")
    cfg = write_config(tmp_path / "fs.toml",
                       f'[state]\ndirectory = "{tmp_path}/state"\naudit_log = "{good}"\n')
    svc = Service(load_config(cfg), str(cfg), demo=True)
    cfg.write_text(f'[state]\ndirectory = "{tmp_path}/state"\naudit_log = "{link}"\n')
    svc.reload()
    assert svc.config.state.audit_log == str(good)  # rejected: the running configuration is kept
    assert not (tmp_path / "victim").exists()


def test_a_parent_another_user_controls_is_refused(tmp_path):
    """A symbolic link on the way to the state directory, owned by another user, was followed: that
    user chose where the push state went.  So is a parent directory of theirs (they could swap it)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to give files to another user")
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    os.lchown(link, 65534, 65534)
    with pytest.raises(InputError, match=r"state directory .*/link/state: .*link.* is a symbolic link owned "
                                         r"by uid 65534"):
        statefiles.check_directory(link / "state")
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    os.chown(theirs, 65534, 65534)
    with pytest.raises(InputError, match=r"theirs is owned by uid 65534"):
        statefiles.check_directory(theirs / "state")
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)  # writable by all, not sticky: anyone could rename the state directory
    with pytest.raises(InputError, match=r"open is writable by others"):
        statefiles.check_directory(open_dir / "state")
    ours = tmp_path / "ours"  # a link of our own (or root's) is fine, and so is a sticky /tmp
    ours.symlink_to(real)
    statefiles.check_directory(ours / "state")


def test_a_pid_file_planted_and_locked_by_another_user_does_not_stop_the_start(tmp_path):
    """Another user who may write the pid file's directory plants the file and holds its lock: the
    daemon refused to start ('in use by another fairshared').  It starts without a pid file."""
    import fcntl
    import signal

    from daemon_proc import Daemon

    if os.geteuid() != 0:
        pytest.skip("needs root to give the file to another user")
    run = tmp_path / "run"
    run.mkdir()
    run.chmod(0o1777)
    pf = run / "fairshared.pid"
    pf.write_text("1\n")
    os.chown(pf, 65534, 65534)
    fd = os.open(pf, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)  # held as the planting user would
    cfg = write_config(tmp_path / "fs.toml", f'[state]\ndirectory = "{tmp_path}/state"\npid_file = "{pf}"\n')
    d = Daemon(tmp_path, "--demo", "--period", "3600", "--config", str(cfg))
    try:
        d.wait_ready()
        warned = d.log_events("pid file refused; running without one")
        assert warned and "owned by uid 65534" in warned[0]["reason"], d.log()
        assert pf.read_text() == "1\n"  # nothing written into their file
        d.signal(signal.SIGTERM)
        assert d.proc.wait(20) == 0 and pf.exists()  # and nothing of theirs removed
    finally:
        d.stop()
        os.close(fd)
