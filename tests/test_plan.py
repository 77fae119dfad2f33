"""Push planning: which pending job gets which value, and only when it changed."""

from __future__ import annotations

from dataclasses import replace

import pytest

from fairshared.engine import compute
from fairshared.model import Association, Job
from fairshared.plan import LIMIT, JobState, PushState, contribution
from fairshared.push_modes import PlanInputs, mode_for

TREE = [
    Association("root", None, None, 1, None),
    Association("a", None, "root", 1, None),
    Association("a", "busy", "a", 1, 90.0),
    Association("a", "idle", "a", 1, 0.0),
    Association("a", "idle", "a", 1, 30.0, partition="gpu"),
]


@pytest.fixture(scope="module")
def result():
    return compute(TREE, "fair_tree")


def plan(jobs, result, *, mode, weight, state, levels=0):
    """The mode's own plan: (actions, the push state after them, jobs without an association)."""
    p = mode_for(mode).plan(PlanInputs(jobs=jobs, result=result, weight=weight, override_fixed=False, now=0,
                                       levels=levels), state)
    return p.actions, p.state, p.unknown


def job(i, user="busy", **kw):
    return Job(job_id=i, user=user, account="a", partition=kw.pop("partition", "batch"), priority=100, **kw)


def test_site_factor_is_weight_times_factor(result):
    # Fair Tree, N = 3 users: idle (LevelFS inf) 1.0; idle/gpu (30 of 120) 2/3; busy 1/3
    jobs = [job(1), job(2, "idle"), job(3, "idle", partition="gpu"), job(4, "idle", partition="gpu,batch")]
    actions, state, unknown = plan(jobs, result, mode="site_factor", weight=3000, state=PushState("site_factor"))
    assert {a.job_id: a.new for a in actions} == {1: 1000, 2: 3000, 3: 2000, 4: 2000}
    assert all(a.field == "site_factor" and a.old is None for a in actions)
    assert unknown == []
    # the same inputs again: nothing to do
    again, _, _ = plan(jobs, result, mode="site_factor", weight=3000, state=state)
    assert again == []


def test_site_factor_compares_with_what_slurm_holds(result):
    jobs = [job(1, site_factor=1000), job(2, "idle", site_factor=7)]
    actions, _, _ = plan(jobs, result, mode="site_factor", weight=3000, state=PushState("site_factor"))
    assert [(a.job_id, a.old, a.new) for a in actions] == [(2, 7, 3000)]


def test_nice_keeps_the_owners_own_nice_across_cycles_and_restarts(result):
    state = PushState("nice")
    j = job(5, nice=50)  # the owner asked for nice 50
    actions, state, _ = plan([j], result, mode="nice", weight=3000, state=state)
    assert [(a.old, a.new, a.contribution) for a in actions] == [(50, 50 - 1000, 1000)]
    # Slurm now holds our value; a new cycle (or a restart that reloads the state) changes nothing
    j = replace(j, nice=-950)
    restored = PushState.from_dict(state.to_dict(), "nice")
    for st in (state, restored):
        again, st2, _ = plan([j], result, mode="nice", weight=3000, state=st)
        assert again == [] and st2.jobs[5] == JobState(-950, 50)
    # the owner changes their nice to 10: that becomes the base
    j = replace(j, nice=10)
    actions, state, _ = plan([j], result, mode="nice", weight=3000, state=state)
    assert [(a.old, a.new) for a in actions] == [(10, 10 - 1000)]
    assert state.jobs[5].base == 10


def test_nice_after_a_failed_push_recomputes_from_slurms_value(result):
    state = PushState("nice", {6: JobState(-1000, 0)})  # we meant to write -1000 but it never landed
    actions, state, _ = plan([job(6, nice=0)], result, mode="nice", weight=3000, state=state)
    assert [(a.old, a.new) for a in actions] == [(0, -1000)] and state.jobs[6].base == 0


def test_held_finished_and_unknown_jobs(result):
    held = replace(job(7), priority=0)
    running = replace(job(8), state="RUNNING")
    stranger = Job(job_id=9, user="nobody", account="a", partition="batch", priority=5)
    actions, state, unknown = plan([held, running, stranger], result, mode="site_factor", weight=10,
                                   state=PushState("site_factor"))
    assert actions == [] and unknown == [stranger] and state.jobs == {}


def test_clamped_to_slurms_limits(result):
    actions, _, _ = plan([job(10, "idle", nice=-LIMIT)], result, mode="nice", weight=LIMIT,
                         state=PushState("nice"))
    assert actions == []  # -LIMIT - LIMIT clamps to -LIMIT, which the job already has
    actions, _, _ = plan([job(11, "idle")], result, mode="site_factor", weight=LIMIT, state=PushState("site_factor"))
    assert actions[0].new == LIMIT


def test_state_of_another_mode_is_ignored():
    st = PushState("nice", {1: JobState(5, 3)})
    assert PushState.from_dict(st.to_dict(), "site_factor").jobs == {}
    assert PushState.from_dict({"garbage": True}, "nice").jobs == {}


def test_contribution_rounds_and_ignores_nan():
    assert contribution(10000, 0.33333) == 3333 and contribution(3, 0.5) == 2
    assert contribution(100, float("nan")) == 0


def test_each_push_mode_is_one_object_with_its_own_after_push_rule(result):
    from fairshared.push_modes import MODES, PlanInputs, mode_for

    assert set(MODES) == {"site_factor", "nice", "priority", "assoc_priority", "off"}
    assert [m for m in MODES if MODES[m].strict_write_ahead] == ["nice", "priority", "assoc_priority"]
    assert [m for m in MODES if MODES[m].job_details] == ["priority"]
    assert [m for m in MODES if MODES[m].by_association] == ["assoc_priority"]
    inputs = PlanInputs(jobs=[job(1, nice=5), job(2, "idle", nice=0)], result=result, weight=3000,
                        override_fixed=False, now=0)
    nice = mode_for("nice")
    before = PushState("nice")
    planned = nice.plan(inputs, before)
    assert [(a.job_id, a.old, a.new) for a in planned.actions] == [(1, 5, 5 - 1000), (2, 0, -3000)]
    ahead = before.write_ahead(planned.actions, planned.state)
    # job 2's update failed: in nice mode both values stay ours anyway
    after = nice.after_push(before, ahead, planned.state, planned.actions, failed={2})
    assert after.jobs[2].ours(0) and after.jobs[2].ours(-3000) and after.jobs[2].base == 0
    # site_factor forgets what did not land
    sf = mode_for("site_factor")
    planned = sf.plan(inputs, PushState("site_factor"))
    after = sf.after_push(PushState("site_factor"), PushState("site_factor"), planned.state,
                          planned.actions, failed={2})
    assert set(after.jobs) == {1} and after.jobs[1].value == 1000
    off = mode_for("off").plan(inputs, before)
    assert off.actions == [] and off.state is before
    with pytest.raises(ValueError, match="unknown push mode"):
        mode_for("bogus")


# --- push.levels: quantised contributions (issue 19) ------------------------------------------------

@pytest.mark.parametrize("weight,levels", [(10000, 1000), (10000, 100), (1000, 7), (2147483645, 1000)])
def test_levels_never_invert_order_and_bound_the_error(weight, levels):
    import numpy as np
    f = np.sort(np.random.default_rng(levels).random(20000))
    c = [contribution(weight, x, levels) for x in f]
    assert all(a <= b for a, b in zip(c, c[1:]))  # a higher F never gets a lower contribution
    err = max(abs(ci - weight * x) for ci, x in zip(c, f))
    assert err <= weight / (2 * levels) + 0.5
    assert len(set(c)) <= levels + 1 and contribution(weight, 1.0, levels) == weight
    assert contribution(weight, 0.0, levels) == 0 and contribution(weight, float("nan"), levels) == 0


def test_levels_keep_a_small_drift_from_updating_jobs():
    from fairshared.model import Association
    jobs = [job(i, user="busy" if i % 2 else "idle") for i in range(1, 41)]

    def factors(busy_usage):
        tree = [Association("root", None, None, 1, None), Association("a", None, "root", 1, None),
                Association("a", "busy", "a", 1, busy_usage), Association("a", "idle", "a", 1, 10.0)]
        return compute(tree, "classic")

    before, after = factors(90.0), factors(90.5)  # a period of decay and a little use
    fb, fa = before.fairshare[before.tree.is_user], after.fairshare[after.tree.is_user]
    assert 0 < abs(fa - fb).max() < 1e-3  # every user's F moved, by less than a level of 1/1000
    for levels, pushed_again in ((0, 20), (1000, 0)):  # exact: idle's 20 jobs move 4665 -> 4667
        _, state, _ = plan(jobs, before, mode="site_factor", weight=10000, state=PushState("site_factor"),
                           levels=levels)
        # what Slurm holds after the first push
        held = [replace(j, site_factor=state.jobs[j.job_id].value) for j in jobs]
        again, _, _ = plan(held, after, mode="site_factor", weight=10000, state=state, levels=levels)
        assert len(again) == pushed_again


def test_an_array_parent_update_carries_its_split_tasks():
    from fairshared.plan import by_array_parent
    from fairshared.records import PushAction
    jobs = [replace(job(100), display_id="100_[5-9]"),  # the pending remainder of array 100
            replace(job(104), display_id="100_4"),  # split pending tasks of array 100
            replace(job(103), display_id="100_3"),
            replace(job(200), display_id="200_1"),  # a task whose parent record is not pending
            replace(job(7), display_id="7")]
    acts = [PushAction(100, "site_factor", 500), PushAction(104, "site_factor", 500),
            PushAction(103, "site_factor", 700), PushAction(200, "site_factor", 500),
            PushAction(7, "site_factor", 500)]
    kept = by_array_parent(acts, jobs)
    assert [a.job_id for a in kept] == [100, 103, 200, 7]  # 104 gets 500 from JobId=100
    # no action for the parent (it holds 500 already): its tasks are pushed one by one
    assert [a.job_id for a in by_array_parent(acts[1:], jobs)] == [104, 103, 200, 7]
