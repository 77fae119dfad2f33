"""What an admin's slip gets offline: one line on stderr naming the culprit and exit 2, never a
traceback (a plot path matplotlib cannot write, a number beyond a double in a snapshot)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fairshared.cli import main

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "deploy" / "examples" / "snapshot.json"


def fails(capsys, *argv) -> str:
    assert main(list(argv)) == 2
    captured = capsys.readouterr()
    err = captured.err
    assert err.startswith("fairshared: error: ") and len(err.splitlines()) == 1, err
    assert captured.out == ""
    return err


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


@pytest.mark.parametrize("cmd", [["compute"], ["sprio"], ["compare"], ["whatif"], ["explain", "26410457"]])
def test_a_usage_beyond_a_double_is_one_line_naming_file_and_line(capsys, tmp_path, cmd):
    path, text = with_usage(tmp_path, "1e400")
    line = text[:text.index("1e400")].count("\n") + 1
    err = fails(capsys, *cmd, "--snapshot", path)
    assert err == f"fairshared: error: {path}:{line}: the number 1e400 is beyond a double's range (1.8e308)\n"


@pytest.mark.parametrize("cmd", [["compute"], ["sprio"], ["compare"], ["whatif"], ["explain", "26410457"]])
def test_usages_whose_sum_is_beyond_a_double_name_the_account(capsys, tmp_path, cmd):
    doc = json.loads(EXAMPLE.read_text())
    for a in doc["associations"]:
        if a["account"] == "physics" and a["user"]:
            a["usage"] = 1.5e308
    path = tmp_path / "s.json"
    path.write_text(json.dumps(doc))
    err = fails(capsys, *cmd, "--snapshot", str(path))
    assert "account 'physics': usage, the sum of its subtree (3.000e+308), is beyond a double's range" in err
