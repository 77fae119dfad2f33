"""The period survives wall-clock steps both ways (issue 26, item 4): APScheduler times its jobs by
the wall clock, so a step back of an hour put the next cycle an hour (plus a period) away."""

from __future__ import annotations

import time
from datetime import datetime, timedelta

import pytest

from daemon_proc import gated_service
from fairshared.daemon.service_cycles import boot_clock


@pytest.mark.parametrize("step", [-3600.0, +3600.0])
def test_a_wall_clock_step_moves_every_timer_by_the_same_step(tmp_path, step):
    with gated_service({"schedule": {"period": 600}, "state": {"directory": str(tmp_path / "state")}}) as svc:
        svc.gate.set()
        svc.scheduler.add_job(svc._run_cycle, "interval", seconds=600, id="cycle",
                              next_run_time=datetime.now().astimezone() + timedelta(seconds=600))
        svc.scheduler.add_job(lambda: None, "date", id="requested",
                              run_date=datetime.now().astimezone() + timedelta(seconds=5))
        # the scheduler's own clock is not stepped here: paused, it does not run what the step made due
        svc.scheduler.pause()
        before = {j.id: j.next_run_time for j in svc.scheduler.get_jobs()}
        mono = boot_clock()
        svc._watch_clock(wall=lambda: time.time(), mono=lambda: mono)  # the reference
        svc._watch_clock(wall=lambda: time.time() + step, mono=lambda: mono)  # the same instant, stepped
        after = {j.id: j.next_run_time for j in svc.scheduler.get_jobs()}
        for job_id in ("cycle", "requested"):
            moved = (after[job_id] - before[job_id]).total_seconds()
            assert abs(moved - step) < 1.5, (job_id, moved)
        # a small drift (NTP slewing, a slow loop) moves nothing
        svc._watch_clock(wall=lambda: time.time() + step + 0.5, mono=lambda: mono)
        assert {j.id: j.next_run_time for j in svc.scheduler.get_jobs()} == after
