"""The sprio comparison's one allowance, offline (sprio_compare.unexplained): a PRIORITY 1 off
sprio's passes only where our sum lies within classic F's usage tolerance of a whole number.

Built on the demo cluster under classic, with one job's age moved (PriorityMaxAge long, so a second
is a ten-thousandth of a point) until its sum sits just above a whole number, half the tolerance
away: lowering F by the tolerance truncates one lower, so sprio's one-lower PRIORITY is explained;
two lower is not, nor is one lower for a job far from an edge, nor any other cell.
"""

from __future__ import annotations

import copy
import json
import math

import pytest
from sprio_compare import SPRIO_COLUMNS, cells_of_json, fs_tolerances, unexplained

from fairshared.cli import main
from fairshared.commands.common import engine_result
from fairshared.engine.ranks import assoc_index, fairshare_of, job_assoc
from fairshared.explain_common import details
from fairshared.inputs.priority_snapshot import load_inputs_file
from fairshared.priority import job_priority
from fairshared.priority_sprio import sprio

PRIO = [n for n, _ in SPRIO_COLUMNS].index("priority")
MAX_AGE = 10_000_000  # seconds: 1000 age points over it, 1e-4 a second


def tolerance_points(pi, result, job) -> float:
    """The job's F tolerance (sprio_compare.fs_tolerances), weighted: points of its sum."""
    return fs_tolerances(pi, result)[job_assoc(job, assoc_index(result))] * pi.settings.weights["fairshare"]


def total(pi, result, job) -> float:
    """Our unclamped, untruncated sum for the job (its first row), at the snapshot's time."""
    return job_priority(job, fairshare_of(result)(job), details(pi), pi.settings, int(pi.evaluated_at))[0].total


@pytest.fixture
def edge(tmp_path, capsys):
    """A classic snapshot whose first job's sum is whole + half its tolerance; (path, our rows,
    (the snapshot, our result))."""
    raw = tmp_path / "demo.json"
    assert main(["sprio", "--demo", "--save-snapshot", str(raw)]) == 0
    capsys.readouterr()
    data = json.loads(raw.read_text())
    data["config"]["priority_flags"] = ["NO_FAIR_TREE"]
    data["config"]["max_age_seconds"] = MAX_AGE
    now = data["priority_inputs"]["evaluated_at"]
    first = data["priority_inputs"]["jobs"][0]
    first["accrue_time"] = first["eligible_time"] = first["submit_time"] = now  # age 0: sum = rest

    def load(d):
        path = tmp_path / "classic.json"
        path.write_text(json.dumps(d))
        pi = load_inputs_file(str(path))
        return path, pi, engine_result(pi)

    _, pi, result = load(data)
    assert result.algorithm == "classic"
    points = tolerance_points(pi, result, pi.jobs[0])
    assert 0.001 < points < 0.5, points  # a tolerance the age's steps can place the sum inside
    rest = total(pi, result, pi.jobs[0])
    age_points = math.floor(rest) + 1 + points / 2 - rest  # sum = next whole number + half the tolerance
    back = round(age_points / (pi.settings.weights["age"] / MAX_AGE))
    for key in ("accrue_time", "eligible_time", "submit_time"):
        first[key] = now - back
    path, pi, result = load(data)
    rows = [cells_of_json(r.as_json())
            for r in sprio(pi.jobs, fairshare_of(result), details(pi), pi.settings, int(pi.evaluated_at))]
    edge_sum = total(pi, result, pi.jobs[0])
    assert 0 < edge_sum - math.floor(edge_sum) < points, (edge_sum, points)  # on the edge, as built
    return path, rows, (pi, result)


def test_one_lower_at_the_edge_is_explained(edge):
    path, ours, _ = edge
    theirs = copy.deepcopy(ours)
    theirs[0][PRIO] = str(int(ours[0][PRIO]) - 1)
    assert unexplained(theirs, ours, path) == []


def test_two_lower_at_the_edge_or_one_higher_is_not(edge):
    path, ours, _ = edge
    for delta in (-2, +1):
        theirs = copy.deepcopy(ours)
        theirs[0][PRIO] = str(int(ours[0][PRIO]) + delta)
        bad = unexplained(theirs, ours, path)
        assert len(bad) == 1 and bad[0].startswith(f"sprio {theirs[0]}"), (delta, bad)


def test_one_off_far_from_an_edge_or_in_another_cell_is_not(edge):
    path, ours, (pi, result) = edge

    def margin(job):  # how far the job's sum is above its whole number, in its tolerances
        tol, t = tolerance_points(pi, result, job), total(pi, result, job)
        return (t - math.floor(t)) / tol if tol else math.inf

    jobs = {str(j.job_id): j for j in pi.jobs}
    far = next(n for n, row in enumerate(ours) if n > 0 and margin(jobs[row[0]]) > 2)
    theirs = copy.deepcopy(ours)
    theirs[far][PRIO] = str(int(ours[far][PRIO]) - 1)
    theirs[0][2] = "mallory"  # USER
    bad = unexplained(theirs, ours, path)
    assert [b.split("\n")[0] for b in bad] == [f"sprio {theirs[0]}", f"sprio {theirs[far]}"]
