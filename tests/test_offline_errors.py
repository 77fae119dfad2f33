"""What an admin's slip gets offline: one line on stderr naming the culprit and exit 2, never a
traceback (a plot path matplotlib cannot write, a number beyond a double in a snapshot)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import fails
from helpers import run_out_err as run

from fairshared.cli import main

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "deploy" / "examples" / "snapshot.json"


@pytest.mark.parametrize("name", ["x.txt", "x.PNGG", "x"])
def test_a_plot_path_matplotlib_cannot_write_is_one_line(capsys, tmp_path, name):
    pytest.importorskip("matplotlib")
    path = tmp_path / name
    err = fails(capsys, "compare", "--demo", "--plot", str(path))
    assert f"{path}: --plot: matplotlib" in err and ".png" in err and ".svg" in err
    assert not list(tmp_path.iterdir())  # nothing written, not even FILE.png


def test_a_plot_in_another_format_is_drawn(capsys, tmp_path):
    pytest.importorskip("matplotlib")
    assert main(["compare", "--demo", "--plot", str(tmp_path / "x.svg")]) == 0
    assert (tmp_path / "x.svg").read_text().lstrip().startswith("<?xml")


def with_usage(tmp_path, literal: str, index: int = 3) -> str:
    doc = json.loads(EXAMPLE.read_text())
    doc["associations"][index]["usage"] = 12345.0
    text = json.dumps(doc, indent=1).replace("12345.0", literal)
    path = tmp_path / "s.json"
    path.write_text(text)
    return str(path), text


@pytest.mark.parametrize("cmd", [["compute"], ["sprio"], ["compare"], ["whatif"], ["explain", "26410457"],
                                 ["standing", "alice"]])
def test_a_usage_beyond_a_double_is_one_line_naming_file_and_line(capsys, tmp_path, cmd):
    path, text = with_usage(tmp_path, "1e400")
    line = text[:text.index("1e400")].count("\n") + 1
    err = fails(capsys, *cmd, "--snapshot", path)
    assert err == f"fairshared: error: {path}:{line}: the number 1e400 is beyond a double's range (1.8e308)\n"


@pytest.mark.parametrize("cmd", [["compute"], ["sprio"], ["compare"], ["whatif"], ["explain", "26410457"],
                                 ["standing", "alice"]])
def test_usages_near_a_double_s_range_are_refused_naming_the_association(capsys, tmp_path, cmd):
    """Two usages of 1.5e308 would sum beyond a double in their account: each is refused first, being
    beyond what Slurm's sshare can show (a 64-bit integer)."""
    doc = json.loads(EXAMPLE.read_text())
    for a in doc["associations"]:
        if a["account"] == "physics" and a["user"]:
            a["usage"] = 1.5e308
    path = tmp_path / "s.json"
    path.write_text(json.dumps(doc))
    err = fails(capsys, *cmd, "--snapshot", str(path))
    assert err == (f"fairshared: error: {path}: associations[3] (physics/alice): usage 1.5e+308 is beyond what "
                   "Slurm shows (sshare prints RawUsage as a 64-bit integer, at most 1.845e+19)\n")


# --- sprio -l, and filters that match nothing --------------------------------------------------------


# Slurm 23.02 to 26.05 (src/sprio/sprio.c, 25.11.7 l.161): "%.15i %9r %.8u %.8o %.10Y %.10S %.10A %.10B %.10F
# %.10J %.10P %.10n %.10Q %.11N %.20T"
LONG = ["JOBID", "PARTITION", "USER", "ACCOUNT", "PRIORITY", "SITE", "AGE", "ASSOC", "FAIRSHARE", "JOBSIZE",
        "PARTITION", "QOSNAME", "QOS", "NICE", "TRES"]


@pytest.mark.parametrize("flag", ["-l", "--long"])
def test_sprio_l_is_accepted_and_prints_the_long_columns(capsys, flag):
    out, err = run(capsys, "sprio", "--demo", flag)
    assert err == "" and out == run(capsys, "sprio", "--demo")[0]  # the long format is what it prints
    lines = out.splitlines()
    assert lines[0].split() == LONG and len(lines) > 2
    widths = [15, 9, 8, 8, 10, 10, 10, 10, 10, 10, 10, 10, 10, 11, 20]
    assert len(lines[0]) == sum(widths) + len(widths) - 1
    assert run(capsys, "sprio", "--demo", flag, "-u", "alice")[0].splitlines()[0].split() == LONG


def test_sprio_l_of_a_22_05_cluster_has_that_releases_columns(capsys, tmp_path):
    doc = json.loads(EXAMPLE.read_text())
    doc["config"]["slurm_version"] = "22.05.8"
    path = tmp_path / "s.json"
    path.write_text(json.dumps(doc))
    head = run(capsys, "sprio", "--snapshot", str(path), "-l")[0].splitlines()[0].split()
    assert head == [c for c in LONG if c not in ("ACCOUNT", "QOSNAME")]


def test_sprio_l_w_prints_the_weights_under_the_long_header(capsys):
    out = run(capsys, "sprio", "--demo", "-l", "-w")[0].splitlines()
    assert out[0].split() == LONG and len(out) == 2
    cells = {}
    at = 0
    for name, width in zip(LONG, [15, 9, 8, 8, 10, 10, 10, 10, 10, 10, 10, 10, 10, 11, 20]):
        cells.setdefault(name, []).append(out[1][at:at + width].strip())
        at += width + 1
    assert cells["JOBID"] == ["Weights"] and cells["SITE"] == ["1"] and cells["PRIORITY"] == [""]
    assert cells["FAIRSHARE"] == ["10000"] and cells["AGE"] == ["1000"] and cells["ASSOC"] == ["0"]
    assert cells["PARTITION"] == ["", "1000"] and cells["QOS"] == ["2000"] and cells["QOSNAME"] == [""]


@pytest.mark.parametrize("argv, said", [
    (["-u", "zed"], "-u zed"),
    (["-u", "zed,yann"], "-u zed,yann"),
    (["-j", "5,6"], "-j 5,6"),
    (["-p", "debug"], "-p debug"),
    (["-u", "alice", "-p", "nowhere"], "-u alice -p nowhere"),
    (["-u", "zed", "--format", "json"], "-u zed"),
])
def test_sprio_filters_that_match_no_job_say_so(capsys, argv, said):
    out, err = run(capsys, "sprio", "--demo", *argv)
    assert err == f"fairshared: no pending job matches {said}\n"
    assert out.splitlines()[0].split() == LONG if "json" not in argv else json.loads(out) == {"jobs": []}


def test_sprio_filters_that_match_say_nothing(capsys):
    assert run(capsys, "sprio", "--demo", "-p", "gpu")[1] == ""
    assert run(capsys, "sprio", "--demo", "-u", "zed", "-w")[1] == ""  # -w lists weights, not jobs


@pytest.mark.parametrize("argv, said", [(["-u", "zed"], "-u zed"), (["-A", "nosuch"], "-A nosuch"),
                                        (["-u", "lee", "-A", "physics"], "-u lee -A physics")])
def test_compute_filters_that_match_no_association_say_so(capsys, argv, said):
    out, err = run(capsys, "compute", "--demo", "-P", *argv)
    assert err == f"fairshared: no association matches {said}\n" and out.startswith("Account|User|")
    assert run(capsys, "compute", "--demo", "-u", "lee")[1] == ""


# --- --save-snapshot - ---------------------------------------------------------------------------------


SAVERS = [["compute"], ["sprio"], ["compare"], ["explain", "JOB"], ["explain", "JOB", "--vs", "hana"],
          ["whatif", "--shares", "chemistry=70"], ["standing", "alice"]]


@pytest.mark.parametrize("saver", SAVERS)
def test_save_snapshot_dash_writes_the_snapshot_to_stdout_and_nothing_else(capsys, tmp_path, monkeypatch,
                                                                         saver):
    import io

    job = str(json.loads(run(capsys, "sprio", "--demo", "--format", "json")[0])["jobs"][0]["job_id"])
    saver = [job if a == "JOB" else a for a in saver]
    out, _ = run(capsys, *saver, "--demo", "--save-snapshot", "-")
    assert not (tmp_path / "-").exists()
    doc = json.loads(out)  # the whole of stdout is one JSON document
    assert doc["schema"] == "fairshared-snapshot" and doc["priority_inputs"]["jobs"]
    path = tmp_path / "s.json"
    run(capsys, *saver, "--demo", "--save-snapshot", str(path))
    assert json.loads(path.read_text()) == doc  # the same snapshot a file gets
    monkeypatch.setattr("sys.stdin", io.StringIO(out))
    assert run(capsys, "sprio", "--snapshot", "-")[0] == run(capsys, "sprio", "--demo")[0]


# --- explain --format json without --vs -----------------------------------------------------------------


def test_explain_format_json_prints_the_page_as_json(capsys):
    sprio_rows = json.loads(run(capsys, "sprio", "--demo", "--format", "json")[0])["jobs"]
    text_of = {}
    for row in sprio_rows:
        out = run(capsys, "explain", str(row["job_id"]), "--demo", "--format", "json")[0]
        doc = json.loads(out)
        assert doc["job"]["job_id"] == row["job_id"] and doc["job"]["user"] == row["user"]
        [p] = doc["priorities"]
        assert p["priority"] == row["priority"] and p["partition"] == row["partition"]
        assert round(p["weighted"]["fairshare"]) == row["fairshare"] and p["weights"]["fairshare"] == 10000
        path = doc["fairshare"]["path"]
        assert path[0]["account"] == "root" and path[0]["user"] is None
        assert (path[-1]["account"], path[-1]["user"]) == (row["account"], row["user"])
        assert path[-1]["fairshare"] == doc["fairshare"]["factor"]
        q = doc["queue"]
        text = run(capsys, "explain", str(row["job_id"]), "--demo")[0]
        assert f"Queue in partition {q['partition']}: " in text and f" of {q['of']} " in text
        for n in q["ahead"] + q["behind"]:
            assert f"job {n['job_id']} ({n['user']}): priority {n['priority']}" in text
        text_of[row["job_id"]] = text
    assert len(text_of) == len(sprio_rows) > 3


def test_explain_format_json_names_an_unknown_job(capsys, tmp_path):
    assert main(["explain", "4", "--demo", "--format", "json"]) == 2
    assert capsys.readouterr().err.startswith("fairshared: error: job 4 is not pending in the demo cluster at ")
    path = tmp_path / "s.json"
    path.write_text(EXAMPLE.read_text())
    assert main(["explain", "4", "--snapshot", str(path), "--format", "json"]) == 2
    assert capsys.readouterr().err == "fairshared: error: job 4 is not among the pending jobs read\n"
