"""A directory of recording stand-ins for Slurm's command-line tools.

``make_bin(directory, responses)`` writes executables named sshare, scontrol, sacctmgr,
squeue, sacct and sprio.  Each one appends its ``sys.argv`` (and the SLURM_TIME_FORMAT it
was given) as a JSON line to ``calls.jsonl`` beside it, then answers from
``responses.json``: ``{command: [{"when": [token, ...], "stdout": ..., "rc": 0}, ...]}``,
the first rule whose tokens all occur in its arguments wins (no rule: exit 2).

They are real executables started by the code under test, so what they record is exactly
the argv the kernel passed: a shell anywhere in between would show (split words, expanded
``$(...)``), and nothing is ever interpreted by them.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

COMMANDS = ("sshare", "scontrol", "sacctmgr", "squeue", "sacct", "sprio")

SCRIPT = r'''
import json, os, sys
here = os.path.dirname(os.path.abspath(__file__))
name = os.path.basename(sys.argv[0])
with open(os.path.join(here, "calls.jsonl"), "a", encoding="utf-8") as fh:
    fh.write(json.dumps({"argv": sys.argv, "cwd": os.getcwd(),
                         "SLURM_TIME_FORMAT": os.environ.get("SLURM_TIME_FORMAT")}) + "\n")
with open(os.path.join(here, "responses.json"), encoding="utf-8") as fh:
    table = json.load(fh)
args = sys.argv[1:]
for rule in table.get(name, []):
    if all(tok in args for tok in rule["when"]):
        sys.stdout.write(rule.get("stdout", ""))
        sys.stderr.write(rule.get("stderr", ""))
        sys.exit(rule.get("rc", 0))
sys.stderr.write(name + ": no canned answer for " + repr(args) + "\n")
sys.exit(2)
'''


def _shebang() -> str:
    exe = sys.executable
    if " " in exe or len(exe) > 120:
        return "#!/usr/bin/env python3"
    return f"#!{exe}"


def make_bin(directory: Path, responses: dict) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name in COMMANDS:
        p = directory / name
        p.write_text(_shebang() + "\n" + SCRIPT, encoding="utf-8")
        p.chmod(0o755)
    set_responses(directory, responses)
    (directory / "calls.jsonl").write_text("", encoding="utf-8")
    return directory


def set_responses(directory: Path, responses: dict) -> None:
    (directory / "responses.json").write_text(json.dumps(responses), encoding="utf-8")


def calls(directory: Path) -> list[dict]:
    """Every recorded call, in order: {"argv": [...], "cwd": ..., "SLURM_TIME_FORMAT": ...}."""
    text = (directory / "calls.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line]


def clear_calls(directory: Path) -> None:
    (directory / "calls.jsonl").write_text("", encoding="utf-8")


def command(call: dict) -> list[str]:
    """A recorded call as [command name, arguments...] (the executable's directory dropped)."""
    return [os.path.basename(call["argv"][0]), *call["argv"][1:]]
