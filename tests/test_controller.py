"""Which head pushes (issue 18 item 2), offline: ``scontrol show config``'s controller lines, the
heartbeat file, slurmctld's GET /readyz, and the runner stopping a push when control moves.

The live proof, two daemons beside a primary and a backup slurmctld, is test_ha_slurm.py."""

from __future__ import annotations

import http.server
import re
import socket
import struct
import threading
import time
from dataclasses import replace

import pytest

from fairshared.daemon.config import config_from_dict
from fairshared.daemon.runner import Runner
from fairshared.model import Association, Controllers, InputError, Job, Snapshot
from fairshared.plan import JobState, PushState
from fairshared.push_modes import PlanInputs, mode_for
from fairshared.sinks.base import AppliesEach
from fairshared.sources.controller import ControllerCheck
from fairshared.slurm.config import controllers, parse_config
from fairshared.slurm.state_files import parse_heartbeat
from fairshared.settings import ClusterSettings

CONFIG_2205 = """Configuration data as of 2026-11-25T10:00:00
SlurmctldHost[0]        = fsctl1(127.0.0.1)
SlurmctldHost[1]        = fsctl2(127.0.0.12)
SlurmctldPort           = 6817-6818
SlurmctldTimeout        = 10 sec
SLURM_VERSION           = 22.05.8
StateSaveLocation       = /var/spool/slurmctld
"""


def test_controllers_from_scontrol_show_config():
    ctl = controllers(parse_config(CONFIG_2205))
    assert ctl == Controllers(hosts=(("fsctl1", "127.0.0.1"), ("fsctl2", "127.0.0.12")), port=6817,
                              state_save_location="/var/spool/slurmctld", timeout=10, release=(22, 5))
    one = controllers(parse_config("SlurmctldHost[0] = head\nSLURM_VERSION = 25.11.7\n"))
    assert one.hosts == (("head", "head"),) and one.port == 6817 and one.timeout == 120
    assert one.state_save_location is None and one.release == (25, 11)


def test_a_controller_line_that_is_not_name_or_name_address_is_refused_naming_it():
    with pytest.raises(InputError, match=r"SlurmctldHost\[1\] = 'b\(1 2\)'"):
        controllers(parse_config("SlurmctldHost[0] = a\nSlurmctldHost[1] = b(1 2)\n"))


def test_heartbeat_is_two_big_endian_uint64():
    assert parse_heartbeat(struct.pack(">QQ", 1764064800, 1)) == (1764064800, 1)
    assert parse_heartbeat(b"\0" * 15) is None


@pytest.fixture
def listener():
    """Something accepting connections on loopback (a slurmctld's port, as far as accepts() can tell)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    yield s.getsockname()[1]
    s.close()


def beat(state, index, age=1.0):
    (state / "heartbeat").write_bytes(struct.pack(">QQ", int(time.time() - age), index))


def pair(state, port, release=(22, 5)):
    return Controllers(hosts=(("h1", "127.0.0.1"), ("h2", "127.0.0.1")), port=port,
                       state_save_location=str(state), timeout=10, release=release)


def test_heartbeat_decides_before_25_11(tmp_path, listener):
    ctl = pair(tmp_path, listener)
    h1, h2 = ControllerCheck("h1"), ControllerCheck("h2")
    beat(tmp_path, 0)
    assert h1.role(ctl).active and not h2.role(ctl).active
    assert "h1 in control" in h2.role(ctl).detail
    beat(tmp_path, 1)  # scontrol takeover: the backup writes its index
    assert not h1.role(ctl).active and h2.role(ctl).active
    beat(tmp_path, 1, age=30)  # older than SlurmctldTimeout: the writer may be dead, nobody pushes
    r = h2.role(ctl)
    assert not r.active and re.search(r"from h2 is 3[01] s old", r.detail) and not r.fault
    (tmp_path / "heartbeat").unlink()
    r = h1.role(ctl)
    assert not r.active and "no such file" in r.detail and r.fault  # a warning, not the other head's turn
    assert not h2.role(replace(ctl, state_save_location=str(tmp_path / "nowhere"))).active


def test_a_fresh_heartbeat_of_a_dead_controller_is_not_control(tmp_path):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now: the killed primary
    beat(tmp_path, 0)
    r = ControllerCheck("h1").role(pair(tmp_path, port))
    assert not r.active and "nothing listens" in r.detail


def test_who_am_i(tmp_path, listener):
    ctl = pair(tmp_path, listener)
    beat(tmp_path, 1)
    assert ControllerCheck(hostnames=("h2", "h2.example.org")).role(ctl).active  # by this machine's name
    lost = ControllerCheck("h3").role(ctl)
    assert not lost.active and lost.host is None and "controller.host 'h3' is none of" in lost.detail
    assert lost.fault
    assert ControllerCheck("h3", push_when="always").role(ctl).active
    one = Controllers(hosts=(("h1", "127.0.0.1"),), port=listener)
    assert ControllerCheck("anything").role(one).active
    assert ControllerCheck().role(None).active  # demo and offline sources name no controller


class Readyz(http.server.BaseHTTPRequestHandler):
    status = 204

    def do_GET(self):  # noqa: N802
        self.send_response(self.status if self.path == "/readyz" else 404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def test_readyz_decides_from_25_11_and_the_heartbeat_when_it_does_not_answer(tmp_path, listener):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Readyz)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        ctl = pair(tmp_path, server.server_address[1], release=(25, 11))
        beat(tmp_path, 1)  # the heartbeat says h2; slurmctld's own answer wins
        r = ControllerCheck("h1").role(ctl)
        assert r.active and r.detail.endswith(": 204")
        Readyz.status = 500  # standby
        assert not ControllerCheck("h1").role(ctl).active
    finally:
        Readyz.status = 204
        server.shutdown()
        server.server_close()
    # a 25.11 slurmctld built without HTTP (no libhttp_parser) answers no HTTP: the heartbeat decides
    ctl = pair(tmp_path, listener, release=(25, 11))
    assert ControllerCheck("h2").role(ctl).active and "heartbeat" in ControllerCheck("h2").role(ctl).detail


TREE = [Association("root", None, None, 1, None), Association("a", None, "root", 1, None),
        Association("a", "busy", "a", 1, 90.0), Association("a", "idle", "a", 1, 0.0)]


def test_nice_adopts_only_jobs_it_can_tell_apart_after_becoming_active():
    from fairshared.engine import compute
    from fairshared.engine.tree_build import build_tree
    result = compute(build_tree(TREE), "fair_tree", {})
    # job 1's nice may hold the other head's push: left alone
    old = Job(1, "busy", "a", "batch", priority=100, nice=-300, submit_time=1000)
    new = Job(2, "busy", "a", "batch", priority=100, nice=0, submit_time=3000)
    mine = Job(3, "busy", "a", "batch", priority=100, nice=-500, submit_time=1000)
    state = PushState("nice", {3: JobState(-500, base=0)})
    nice = mode_for("nice")
    actions = nice.plan(PlanInputs(jobs=[old, new, mine], result=result, weight=1000, override_fixed=False,
                                   now=0, adopt_since=2000), state).actions
    # job 1 left alone; job 2 planned from its owner's nice 0; job 3 already holds ours (-500 = 0 - 1000 F)
    assert [(a.job_id, a.new) for a in actions] == [(2, -500)]
    actions = nice.plan(PlanInputs(jobs=[old], result=result, weight=1000, override_fixed=False, now=0),
                        PushState("nice")).actions  # one head
    assert [a.job_id for a in actions] == [1]


class TwoHeads(AppliesEach):
    """A static queue beside slurmctld h1, whose heartbeat moves to h2 after ``switch_after`` updates."""

    name = "static"

    def __init__(self, state, port, n, switch_after):
        self.state, self.port, self.switch_after = state, port, switch_after
        self.jobs = {i: Job(i, "busy" if i % 2 else "idle", "a", "batch", priority=100, site_factor=0)
                     for i in range(1, n + 1)}
        self.applied = []

    def snapshot(self, *, jobs=True):
        return Snapshot(associations=list(TREE), jobs=list(self.jobs.values()),
                        settings=ClusterSettings(weight_fairshare=0, calc_period_seconds=60),
                        controllers=pair(self.state, self.port))

    def apply(self, action):
        self.applied.append(action)
        self.jobs[action.job_id] = replace(self.jobs[action.job_id], site_factor=action.new)
        if len(self.applied) == self.switch_after:
            beat(self.state, 1)  # scontrol takeover mid-push


class Recorder:
    def publish(self, cycle):
        pass


def test_a_takeover_mid_push_stops_it_at_the_next_batch(tmp_path, listener, monkeypatch):
    monkeypatch.setattr("fairshared.daemon.runner_push.PUSH_BATCH", 10)  # the job push reads it there
    monkeypatch.setattr("fairshared.daemon.runner_assoc.PUSH_BATCH", 10)
    beat(tmp_path, 0)
    q = TwoHeads(tmp_path, listener, n=35, switch_after=5)
    cfg = config_from_dict({"push": {"weight": 1000}, "controller": {"host": "h1"}})
    r = Runner(cfg, q, q, Recorder(), tmp_path / "state")
    res = r.cycle()
    assert len(q.applied) == 10 and res.pushed == 10  # the batch under way finishes, no further one
    assert res.deferred == 25 and not res.controller.active and r.status()["controller_active"] is False
    again = r.cycle()  # standby now: nothing pushed, everything deferred
    assert again.pushed == 0 and again.deferred == 25 and len(q.applied) == 10
