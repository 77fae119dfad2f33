"""Input fuzzing: whatever an operator or a broken cluster feeds in, a clear error, never a traceback.

Five kinds of input, each with at least 1000 hypothesis cases per run (deterministic:
``derandomize=True`` and no example database, so CI runs the same cases every time):

a. the daemon's TOML config — random keys and values mixed with valid ones, mutated text,
   random bytes, pathological nesting and numbers: ``load_config`` returns a Config or raises
   InputError, one line, naming the file (and, when the TOML itself is readable, the key);
b. ``sshare -a -l -P`` dumps — mutations of real dumps (columns dropped, duplicated or
   swapped, bad numbers, indentation, truncated lines, random unicode, raw bytes): the
   loader returns a snapshot or raises InputError naming the file; ``fairshared compute
   --from-sshare`` (in-process for every case, as a real process for a few) exits 0, or 2
   with one line on stderr and no traceback;
c. fairshared snapshot files — mutated valid snapshot documents and mutated JSON text: the same;
d. job records for the usage — sacct parsable lines (end before start, negative or
   unparseable TRES, bad times, wrong field counts, garbage) and record objects (unknown
   association, non-finite values): every bad record is counted and reported with its job
   id, the others are charged, never an exception;
e. a daemon cycle whose source returns or raises garbage — the Runner ends the cycle as
   ``pull_failed``/``compute_failed`` and the updater is never called.

The number of cases run per kind is printed at the end (``test_zz_case_counts``).
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import re
import subprocess
import tomllib
from collections import Counter
from datetime import date, datetime, time as dtime, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from daemon_proc import fairshared_argv
from fairshared import cli
from fairshared.daemon.config import Config, config_from_dict, load_config
from fairshared.daemon.runner import Runner
from fairshared.inputs.snapshot import load_snapshot, snapshot_to_dict
from fairshared.model import Association, InputError, Job, Snapshot
from fairshared.records import SourceError
from fairshared.sinks.base import AppliesEach
from fairshared.settings import ClusterSettings
from fairshared.slurm.sshare import parse_sshare
from fairshared.slurm.tres import parse_tres_exact
from fairshared.sources.sacct import parse_sacct
from fairshared.usage import JobRecord, UsagePolicy
from fairshared.usage_charge import compute_usage
from samples import DUMP

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE_DUMP = (ROOT / "examples" / "sshare-fair-tree.txt").read_text()
EXAMPLE_TOML = (ROOT / "deploy" / "fairshared.toml").read_text()

# Deterministic by default.  For a deeper local hunt: FAIRSHARED_FUZZ_CASES=20000 FAIRSHARED_FUZZ_SEED=7
CASES = int(os.environ.get("FAIRSHARED_FUZZ_CASES", "1000"))  # per kind
CLI_CASES = 12  # real `fairshared compute` processes per input kind (each costs ~0.5 s)
_SEED = os.environ.get("FAIRSHARED_FUZZ_SEED")


def _settings(n: int):
    s = settings(max_examples=n, deadline=None, derandomize=_SEED is None, database=None,
                 suppress_health_check=list(HealthCheck))
    if _SEED is None:
        return s
    return lambda f: seed(int(_SEED))(s(f))


FUZZ = _settings(CASES)
FEW = _settings(CLI_CASES)

COUNTS: Counter = Counter()
KINDS = {
    "a": "TOML configs (load_config)",
    "b": "sshare -a -l -P dumps (parse_sshare + compute)",
    "c": "snapshot JSON files (load_snapshot + compute)",
    "d": "job records (parse_sacct + compute_usage)",
    "e": "daemon cycles on a garbage snapshot (Runner)",
}


def one_line(text: str) -> bool:
    return len(text.splitlines()) == 1 and text.strip() == text.rstrip("\n").strip()


def run_main(argv: list[str]) -> tuple[int, str, str]:
    """``fairshared ...`` in-process: (exit status, stdout, stderr); any exception escapes."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(argv)
    return rc, out.getvalue(), err.getvalue()


def check_cli_outcome(rc: int, out: str, err: str, kind: str) -> None:
    COUNTS[kind, f"exit {rc}"] += 1
    assert "Traceback" not in err and "Traceback" not in out
    if rc == 0:
        assert err == "" and out
    else:
        assert rc == cli.EXIT_BAD_INPUT, (rc, err)
        assert err.startswith("fairshared: error: ") and err.endswith("\n") and one_line(err), err


def fairshared_process(*args: str) -> subprocess.CompletedProcess:
    argv = fairshared_argv()  # this interpreter's fairshared, not a PATH shim's (daemon_proc.py)
    return subprocess.run(argv + list(args), capture_output=True, timeout=60)


def check_process(res: subprocess.CompletedProcess) -> None:
    err = res.stderr.decode("utf-8", "replace")
    assert "Traceback" not in err, err
    if res.returncode == 0:
        assert err == "" and res.stdout
    else:
        assert res.returncode == cli.EXIT_BAD_INPUT, (res.returncode, err)
        assert err.startswith("fairshared: error: ") and one_line(err), err


# --- shared strategies ------------------------------------------------------------------------------

WEIRD_TEXT = st.sampled_from([
    "", " ", "\t", "|", "||", "-", "parent", "PARENT", "nan", "NaN", "inf", "-inf", "1e400", "-1e400",
    "-1", "-0", "0", "1", "1.5", "0x10", "1_000", "١٢٣", "²", "9" * 30, "9" * 5000, "2147483647",
    "2147483646", "\x00", "\r", "\x0b", "\x1c", "\x85", "\u2028", "\ufeff", "é", "名前", "🙂",
    "(null)", "None", "Unknown", "=", "a=b", "cpu=-1", "'", '"', "\\", "$(touch x)", "`id`",
])
TEXT = st.one_of(WEIRD_TEXT, st.text(max_size=12))
NUMBER_TEXT = st.one_of(WEIRD_TEXT, st.integers(-10**6, 10**6).map(str),
                        st.floats(allow_nan=True, allow_infinity=True).map(repr),
                        st.integers(-2**80, 2**80).map(str))


# --- (a) TOML configs ------------------------------------------------------------------------------

def _toml_str(s: str) -> str:
    out = []
    for ch in s:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _toml_key(k: str) -> str:
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else _toml_str(k)


def toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        r = repr(v)
        return r if any(c in r for c in ".e") else r + ".0"
    if isinstance(v, str):
        return _toml_str(v)
    if isinstance(v, (datetime, date, dtime)):
        return v.isoformat()
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_toml_key(k)} = {toml_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(v)


def toml_document(doc: dict) -> str:
    lines = [f"{_toml_key(k)} = {toml_value(v)}" for k, v in doc.items() if not isinstance(v, dict)]
    for k, v in doc.items():
        if isinstance(v, dict):
            lines.append(f"[{_toml_key(k)}]")
            lines += [f"{_toml_key(kk)} = {toml_value(vv)}" for kk, vv in v.items()]
    return "\n".join(lines) + "\n"


SECTIONS = {name: list(f.annotation.model_fields) for name, f in Config.model_fields.items()}
PLAUSIBLE = st.sampled_from([
    "auto", "cli", "pyslurm", "demo", "slurmctld", "accounting", "slurm", "exact", "classic", "fair_tree",
    "level_based", "site_factor", "nice", "priority", "off", "json", "console", "debug", "info", "warning",
    "error", "127.0.0.1:9817", "[::1]:80", "localhost:99999", "9817", ":80", "host:", "host:x", "/tmp/x",
    0, 1, -1, 16, 17, 60, 3600, 3601, 2147483645, 2147483646, 2**63 - 1, -2**63, 2**70,
    0.0, -0.0, 0.5, 1e-300, 3600.0001, 1e308, math.nan, math.inf, -math.inf, True, False,
])
TOML_SCALAR = st.one_of(
    PLAUSIBLE, st.booleans(), st.integers(-2**70, 2**70), st.floats(), st.text(max_size=10),
    st.datetimes(max_value=datetime(9999, 1, 1)), st.datetimes(timezones=st.just(timezone.utc),
                                                                max_value=datetime(9999, 1, 1)),
    st.dates(), st.times(),
)
TOML_VALUE = st.recursive(TOML_SCALAR, lambda c: st.one_of(
    st.lists(c, max_size=3), st.dictionaries(st.text(max_size=6), c, max_size=3)), max_leaves=6)


@st.composite
def config_docs(draw) -> dict:
    doc: dict = {}
    names = draw(st.lists(st.one_of(st.sampled_from(sorted(SECTIONS)), st.text(max_size=8)), max_size=5,
                          unique=True))
    for name in names:
        if name in SECTIONS and draw(st.integers(0, 9)) > 0:
            keys = draw(st.lists(st.one_of(st.sampled_from(SECTIONS[name]), st.text(max_size=8)),
                                 max_size=5, unique=True))
            doc[name] = {k: draw(st.one_of(PLAUSIBLE, TOML_VALUE) if k in SECTIONS[name] else TOML_VALUE)
                         for k in keys}
        else:
            doc[name] = draw(TOML_VALUE)
    return doc


@st.composite
def mutated_text(draw, base: str, alphabet=TEXT) -> str:
    """Random edits of a text: insertions, deletions, duplicated or dropped lines, truncation."""
    text = base
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["insert", "delete", "dup_line", "drop_line", "truncate", "swap_lines"]))
        lines = text.split("\n")
        if op == "insert":
            i = draw(st.integers(0, len(text)))
            text = text[:i] + draw(alphabet) + text[i:]
        elif op == "delete" and text:
            i = draw(st.integers(0, len(text) - 1))
            text = text[:i] + text[i + draw(st.integers(1, 20)):]
        elif op == "truncate":
            text = text[:draw(st.integers(0, len(text)))]
        elif op in ("dup_line", "drop_line", "swap_lines") and lines:
            i = draw(st.integers(0, len(lines) - 1))
            j = draw(st.integers(0, len(lines) - 1))
            if op == "dup_line":
                lines.insert(j, lines[i])
            elif op == "drop_line":
                del lines[i]
            else:
                lines[i], lines[j] = lines[j], lines[i]
            text = "\n".join(lines)
    return text


VALID_TOML = toml_document({"source": {"kind": "cli", "timeout": 30.0, "bin_dir": "/usr/bin"},
                            "usage": {"origin": "accounting", "model": "exact"},
                            "algorithm": {"name": "classic", "dampening": 2.0, "priority_levels": 4},
                            "schedule": {"period": 60.0, "max_backoff": 600.0},
                            "push": {"mode": "nice", "weight": 1000, "dry_run": True},
                            "http": {"listen": "127.0.0.1:9817", "token": "t"},
                            "logging": {"format": "json", "level": "info"},
                            "state": {"directory": "/var/lib/fairshared"}})
PATHOLOGICAL_TOML = st.sampled_from([
    "a = " + "[" * 3000 + "]" * 3000 + "\n",
    "[push]\nweight = " + "[" * 3000 + "]" * 3000 + "\n",
    "a = " + "{b = " * 2000 + "1" + "}" * 2000 + "\n",
    "[push]\nweight = " + "9" * 5000 + "\n",
    "[schedule]\nperiod = 1" + "0" * 400 + ".0\n",
    "[schedule]\nperiod = 1e400\n",
    "[\"a\\nb\"]\nx = 1\n",
    "[push]\n\"mo\\nde\" = \"nice\"\n",
    "[push]\n\"\" = 1\n",
    "\"\\u2028\" = 1\n",
    "[http]\nlisten = \"a\\nb:80\"\n",
    "[http]\nlisten = \"host:\\u0085\"\n",
    "\ufeff[push]\nmode = \"nice\"\n",
])


@st.composite
def config_files(draw) -> bytes:
    kind = draw(st.integers(0, 9))
    if kind <= 4:
        return toml_document(draw(config_docs())).encode()
    if kind == 5:
        return draw(mutated_text(toml_document(draw(config_docs())))).encode()
    if kind == 6:
        return draw(mutated_text(draw(st.sampled_from([VALID_TOML, EXAMPLE_TOML])))).encode()
    if kind == 7:
        return draw(st.binary(max_size=200))
    if kind == 8:
        return draw(PATHOLOGICAL_TOML).encode()
    good = VALID_TOML.encode()
    i = draw(st.integers(0, len(good)))
    return good[:i] + draw(st.binary(min_size=1, max_size=4)) + good[i:]


def _loc_name(x) -> str:
    s = str(x)
    return s if s and s.isprintable() and not any(c in s for c in ".: ") else repr(s)


def test_config_fuzz(tmp_path):
    path = tmp_path / "fairshared.toml"

    @FUZZ
    @given(config_files())
    def case(data: bytes):
        COUNTS["a"] += 1
        path.write_bytes(data)
        try:
            cfg = load_config(path)
        except InputError as exc:
            msg = str(exc)
            assert one_line(msg), msg
            assert msg.startswith(f"{path}: "), msg
            try:
                doc = tomllib.loads(data.decode("utf-8"))
            except (ValueError, RecursionError):
                COUNTS["a", "not TOML"] += 1
                return  # not TOML: naming the file is all there is
            COUNTS["a", "bad key"] += 1
            # readable TOML: the message names the offending key (its section first)
            rest = msg[len(f"{path}: "):]
            assert any(rest.startswith(_loc_name(k) + sep) for k in doc for sep in (":", ".")), msg
        else:
            assert isinstance(cfg, Config)
            COUNTS["a", "valid"] += 1

    before = COUNTS["a"]
    case()
    assert COUNTS["a"] - before >= CASES


# --- (b) sshare dumps --------------------------------------------------------------------------------

BASE_DUMPS = [DUMP, EXAMPLE_DUMP, DUMP.replace("\n", "|\n"),
              "Account|User|Partition|RawShares|NormShares|RawUsage|\nroot||||1.0|10|\n a|||5|1.0|10|\n"
              "  a|u|gpu|1|1.0|10|\n  a|u|cpu|1|1.0|0|\n"]
CELL = st.one_of(NUMBER_TEXT, TEXT, st.sampled_from(["root", "phys", "alice", " phys", "  x", "\tphys"]))


@st.composite
def sshare_dumps(draw) -> str:
    """A real dump with 1..4 structural edits, then maybe text-level edits."""
    base = draw(st.sampled_from(BASE_DUMPS))
    rows = [line.split("|") for line in base.rstrip("\n").split("\n")]
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["drop_col", "dup_col", "swap_cols", "cell", "cell", "cell", "indent",
                                   "truncate_line", "drop_row", "dup_row", "swap_rows", "random_row",
                                   "short_row", "long_row", "header_case", "no_header"]))
        width = max(len(r) for r in rows) if rows else 1
        c = draw(st.integers(0, max(width - 1, 0)))
        if not rows:
            rows = [[draw(TEXT)]]
            continue
        r = draw(st.integers(0, len(rows) - 1))
        if op == "drop_col":
            scope = draw(st.sampled_from(["all", "header", "body", "one"]))
            for i, row in enumerate(rows):
                if c < len(row) and (scope == "all" or (scope == "header") == (i == 0)
                                     or (scope == "one" and i == r)):
                    del row[c]
        elif op == "dup_col":
            for row in rows:
                if c < len(row):
                    row.insert(c, row[c])
        elif op == "swap_cols":
            d = draw(st.integers(0, max(width - 1, 0)))
            for row in rows:
                if c < len(row) and d < len(row):
                    row[c], row[d] = row[d], row[c]
        elif op == "cell":
            if c < len(rows[r]):
                rows[r][c] = draw(CELL)
        elif op == "indent" and rows[r]:
            cell = rows[r][0]
            rows[r][0] = " " * draw(st.integers(0, 6)) + cell.lstrip(" ") if draw(st.booleans()) else \
                draw(st.sampled_from(["\t", " \t", "\u00a0", "\u3000"])) + cell
        elif op == "truncate_line":
            line = "|".join(rows[r])
            rows[r] = line[:draw(st.integers(0, len(line)))].split("|")
        elif op == "drop_row":
            del rows[r]
        elif op == "dup_row":
            rows.insert(draw(st.integers(0, len(rows))), list(rows[r]))
        elif op == "swap_rows":
            s = draw(st.integers(0, len(rows) - 1))
            rows[r], rows[s] = rows[s], rows[r]
        elif op == "random_row":
            rows.insert(draw(st.integers(0, len(rows))), draw(st.lists(CELL, max_size=width + 1)))
        elif op == "short_row":
            rows[r] = rows[r][:draw(st.integers(0, len(rows[r])))]
        elif op == "long_row":
            rows[r] = rows[r] + draw(st.lists(CELL, min_size=1, max_size=3))
        elif op == "header_case":
            rows[0] = [h.upper() if draw(st.booleans()) else f" {h} " for h in rows[0]]
        elif op == "no_header":
            del rows[0]
    text = "\n".join("|".join(row) for row in rows) + draw(st.sampled_from(["\n", "", "\r\n", "\n\n"]))
    if draw(st.integers(0, 3)) == 0:
        text = draw(mutated_text(text))
    return text


@st.composite
def sshare_files(draw) -> bytes:
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return draw(st.binary(max_size=300))
    data = draw(sshare_dumps()).encode("utf-8")
    if kind == 1:  # a stray byte that is not UTF-8
        i = draw(st.integers(0, len(data)))
        data = data[:i] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80\x80"])) + data[i:]
    return data


ALGORITHM_ARGS = st.sampled_from([[], ["--algorithm", "classic"], ["--algorithm", "level_based"],
                                  ["--algorithm", "fair_tree", "--format", "json"],
                                  ["--format", "parsable"], ["--algorithm", "level_based", "--format", "json"]])


def _check_loader(load, data: bytes, name: str) -> None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return  # bytes that are not text: the CLI's business (checked there)
    try:
        snap = load(text, name)
    except InputError as exc:
        msg = str(exc)
        assert one_line(msg) and msg.startswith(name), msg
    else:
        assert isinstance(snap, Snapshot) and snap.associations


def test_sshare_dump_fuzz(tmp_path):
    path = tmp_path / "sshare dump.txt"

    @FUZZ
    @given(sshare_files(), ALGORITHM_ARGS)
    def case(data: bytes, extra: list[str]):
        COUNTS["b"] += 1
        path.write_bytes(data)
        _check_loader(lambda text, name: parse_sshare(io.StringIO(text, newline=None), name), data, str(path))
        check_cli_outcome(*run_main(["compute", "--from-sshare", str(path), *extra]), "b")

    before = COUNTS["b"]
    case()
    assert COUNTS["b"] - before >= CASES


def test_sshare_dump_cli_process(tmp_path):
    """A few cases through the installed console script: exit status, stderr, no traceback."""
    path = tmp_path / "dump.txt"
    seen = Counter()

    @FEW
    @given(sshare_files())
    def case(data: bytes):
        path.write_bytes(data)
        res = fairshared_process("compute", "--from-sshare", str(path))
        check_process(res)
        seen[res.returncode] += 1

    case()
    assert seen[cli.EXIT_BAD_INPUT] >= 1  # mostly bad input: the errors were exercised


# --- (c) snapshot files ------------------------------------------------------------------------------

def _base_snapshot() -> dict:
    snap = parse_sshare(io.StringIO(DUMP), "dump")
    doc = snapshot_to_dict(snap)
    doc.update(cluster="c", source="test", taken_at=1763800000.0, sibling_order="lft",
               config={"priority_flags": ["NO_FAIR_TREE"], "dampening": 2, "priority_levels": 3})
    for i, a in enumerate(doc["associations"]):
        a["order"] = i * 2 + 1
    return doc


BASE_SNAPSHOT = _base_snapshot()
JSON_VALUE = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.sampled_from([10**400, -10**400]),
              st.floats(), TEXT, st.sampled_from(["parent", "root", "phys", "alice", "lft", "\ud800", "a\udfff"])),
    lambda c: st.one_of(st.lists(c, max_size=3), st.dictionaries(TEXT, c, max_size=3)), max_leaves=8)
BAD_FIELD = {
    "shares": st.sampled_from([-1, 2**31, 2**31 - 1, 10**400, 1.5, True, None, "x", "-3", " parent ", [], {}]),
    "usage": st.sampled_from([-1, -0.0, 10**400, 1e308, "nan", "1e400", "12", True, [], {}, None]),
    "account": st.sampled_from(["", None, 3, "root", "phys", "theory", "nobody", "\ud800", "a b", "-x"]),
    "user": st.sampled_from(["", None, 3, "root", "alice", "\udc80", "-u", "$(id)"]),
    "parent": st.sampled_from([None, "root", "phys", "chem", "theory", "nobody", 5, "", "\ud800"]),
    "partition": st.sampled_from([None, "", "gpu", 7, "\ud800"]),
    "order": st.sampled_from([None, 0, -1, "0001", 1.5, True, [], 10**400]),
}
TOP_FIELD = {
    "schema": st.sampled_from(["fairshared-snapshot", "x", None, 1]),
    "version": st.sampled_from([1, 2, "1", 1.0, True, None]),
    "sibling_order": st.sampled_from(["lft", "lineage", "input", "x", None, 1, []]),
    "taken_at": st.sampled_from([None, 0, -1, 1e308, 10**400, "now", True, [], math.nan]),
    "cluster": st.sampled_from([None, "c", 1, [], {}, "\ud800"]),
    "config": st.sampled_from([None, {}, [], "x", 1, {"priority_flags": 5}, {"priority_flags": "NO_FAIR_TREE"},
                               {"priority_flags": [1, None]}, {"priority_flags": None},
                               {"dampening": 0}, {"dampening": -1}, {"dampening": "2"}, {"dampening": True},
                               {"dampening": 10**400}, {"dampening": 1e-320}, {"dampening": None},
                               {"dampening": 1e308}, {"priority_levels": 0}, {"priority_levels": 17},
                               {"priority_levels": "3"}, {"priority_levels": 2.5},
                               {"priority_levels": None}, {"priority_levels": 1}, {"priority_levels": True}]),
}


def _paths(doc, prefix=()):
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _paths(v, prefix + (i,))


def _set(doc, path, value):
    if not path:
        return value
    target = doc
    for p in path[:-1]:
        target = target[p]
    target[path[-1]] = value
    return doc


@st.composite
def snapshot_docs(draw):
    doc = json.loads(json.dumps(BASE_SNAPSHOT))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["field", "field", "field", "top", "top", "replace", "delete", "add_key",
                                   "drop_row", "dup_row", "swap_rows", "row_type"]))
        rows = doc.get("associations") if isinstance(doc, dict) else None
        if op == "field" and isinstance(rows, list) and rows and isinstance(rows[0], dict):
            i = draw(st.integers(0, len(rows) - 1))
            if isinstance(rows[i], dict):
                key = draw(st.sampled_from(sorted(BAD_FIELD)))
                rows[i][key] = draw(BAD_FIELD[key])
        elif op == "top" and isinstance(doc, dict):
            key = draw(st.sampled_from(sorted(TOP_FIELD)))
            doc[key] = draw(TOP_FIELD[key])
        elif op == "replace":
            path = draw(st.sampled_from(list(_paths(doc))))
            doc = _set(doc, path, draw(JSON_VALUE))
        elif op == "delete":
            path = draw(st.sampled_from([p for p in _paths(doc) if p] or [()]))
            if path:
                parent = doc
                for p in path[:-1]:
                    parent = parent[p]
                del parent[path[-1]]
        elif op == "add_key":
            containers = [p for p in _paths(doc) if isinstance(_get(doc, p), dict)]
            if containers:
                _get(doc, draw(st.sampled_from(containers)))[draw(TEXT)] = draw(JSON_VALUE)
        elif isinstance(rows, list) and rows:
            i = draw(st.integers(0, len(rows) - 1))
            j = draw(st.integers(0, len(rows) - 1))
            if op == "drop_row":
                del rows[i]
            elif op == "dup_row":
                rows.insert(j, json.loads(json.dumps(rows[i])))
            elif op == "swap_rows":
                rows[i], rows[j] = rows[j], rows[i]
            else:
                rows[i] = draw(JSON_VALUE)
    return doc


def _get(doc, path):
    for p in path:
        doc = doc[p]
    return doc


@st.composite
def snapshot_files(draw) -> bytes:
    kind = draw(st.integers(0, 11))
    if kind <= 6:
        # NaN/Infinity tokens are what json writes for non-finite floats: the loader must refuse them;
        # with ensure_ascii=False a lone surrogate is written as such (bytes that are not UTF-8)
        text = json.dumps(draw(snapshot_docs()), ensure_ascii=draw(st.booleans()),
                          indent=draw(st.sampled_from([None, 1])))
    elif kind <= 8:
        text = draw(mutated_text(json.dumps(BASE_SNAPSHOT, indent=1),
                                 st.one_of(TEXT, st.sampled_from(["{", "}", "[", "]", ",", ":", '"', "\\ud800",
                                                                  "NaN", "-Infinity", "1e999", "null"]))))
    elif kind == 9:
        depth = draw(st.sampled_from([10, 500, 5000, 100000]))
        text = draw(st.sampled_from(["[" * depth, "[" * depth + "]" * depth,
                                     '{"schema": "fairshared-snapshot", "version": 1, "associations": '
                                     + "[" * depth + "]" * depth + "}",
                                     '{"a":' * depth + "1" + "}" * depth]))
    elif kind == 10:
        text = '{"schema": "fairshared-snapshot", "version": 1, "taken_at": ' + "9" * 5000 + "}"
    else:
        return draw(st.binary(max_size=200))
    return text.encode("utf-8", "surrogatepass")


def test_snapshot_fuzz(tmp_path):
    path = tmp_path / "snap.json"

    @FUZZ
    @given(snapshot_files(), ALGORITHM_ARGS)
    def case(data: bytes, extra: list[str]):
        COUNTS["c"] += 1
        path.write_bytes(data)
        _check_loader(lambda text, name: load_snapshot(io.StringIO(text), name), data, str(path))
        check_cli_outcome(*run_main(["compute", "--snapshot", str(path), *extra]), "c")

    before = COUNTS["c"]
    case()
    assert COUNTS["c"] - before >= CASES


def test_snapshot_cli_process(tmp_path):
    path = tmp_path / "snap.json"
    seen = Counter()

    @FEW
    @given(snapshot_files())
    def case(data: bytes):
        path.write_bytes(data)
        res = fairshared_process("compute", "--snapshot", str(path), "--format", "json")
        check_process(res)
        seen[res.returncode] += 1

    case()
    assert seen[cli.EXIT_BAD_INPUT] >= 1


def test_surrogates_in_a_snapshot_are_a_clear_error_not_a_crash_on_output(tmp_path):
    """JSON can spell a lone surrogate (\\ud800): as a name it cannot be printed, so the loader refuses it."""
    doc = json.loads(json.dumps(BASE_SNAPSHOT))
    doc["associations"][3]["user"] = "al\ud800ice"
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(doc))
    res = fairshared_process("compute", "--snapshot", str(path))
    check_process(res)
    assert res.returncode == cli.EXIT_BAD_INPUT and b"associations[3]" in res.stderr


# --- (d) job records -----------------------------------------------------------------------------------

AT = 1795330000.0
TREE = [
    Association("root", None, None, 1, None),
    Association("root", "root", "root", 1, 0.0),
    Association("phys", None, "root", 40, None),
    Association("phys", "alice", "phys", 1, 0.0),
    Association("phys", "bob", "phys", "parent", 0.0),
    Association("chem", None, "root", 60, None),
    Association("chem", "dave", "chem", 1, 0.0),
    Association("chem", "dave", "chem", 1, 0.0, "gpu"),
]
KNOWN = [("phys", "alice"), ("phys", "bob"), ("chem", "dave"), ("root", "root")]
UNKNOWN = [("phys", "dave"), ("nope", "alice"), ("chem", ""), ("", "")]
POLICIES = [
    UsagePolicy(half_life=7 * 86400, calc_period=300, iteration_anchor=AT - 17),
    UsagePolicy(half_life=3600, calc_period=60, billing_weights={"debug": "CPU=1.0,Mem=0.25G,GRES/gpu=2"},
                max_tres=True),
    UsagePolicy(half_life=0, calc_period=300, reset_period="DAILY", timezone="UTC", enforce_limits=False),
]
GOOD_TIME = st.integers(int(AT) - 30 * 86400, int(AT) + 3600)
TIME_TEXT = st.one_of(GOOD_TIME.map(str), st.sampled_from(["Unknown", "None", "", "0", "yesterday", "-5",
                                                           "9" * 400, "9" * 5000, "1e9", "²", "١٢٣"]), TEXT)
TRES_TEXT = st.one_of(
    st.sampled_from(["billing=6,cpu=3,mem=1000M,node=1,gres/gpu=2", "cpu=1", "cpu=4,mem=2G", "", "cpu=-4",
                     "cpu=four", "cpu", "=3", "cpu=1,", "mem=5Q", "cpu=1e400", "cpu=nan", "cpu=inf",
                     "cpu=1,cpu=2", "mem=-0", "gres/gpu=1e308T", "cpu=1e308K", "CPU=2", "1cpu=2", "cpu=²"]),
    st.lists(st.tuples(st.sampled_from(["cpu", "mem", "node", "billing", "gres/gpu", "x"]),
                       st.one_of(st.integers(-5, 10**6).map(str), NUMBER_TEXT),
                       st.sampled_from(["", "K", "M", "G", "T", "P", "Q"])),
             max_size=4).map(lambda items: ",".join(f"{n}={v}{u}" for n, v, u in items)),
    TEXT)


@st.composite
def sacct_lines(draw, job_id: int) -> str:
    """One line of ``sacct -P -n -o SACCT_FORMAT``: mostly well formed, often not."""
    account, user = draw(st.sampled_from(KNOWN + UNKNOWN))
    start = draw(GOOD_TIME)
    fields = [str(job_id), account, user, draw(st.sampled_from(["debug", "gpu", ""])),
              draw(st.sampled_from(["normal", "half", "zero", "odd"])), str(start),
              str(start + draw(st.integers(0, 86400))) if draw(st.booleans()) else "Unknown",
              "COMPLETED", draw(st.sampled_from(["billing=2,cpu=2,node=1", "cpu=4,mem=2G,gres/gpu=1"]))]
    for _ in range(draw(st.integers(0, 2))):
        op = draw(st.sampled_from(["start", "end", "end_before", "tres", "cell", "drop", "add", "truncate"]))
        if op in ("start", "end", "end_before", "tres", "cell") and len(fields) < 9:
            continue  # the line already lost fields
        if op == "start":
            fields[5] = draw(TIME_TEXT)
        elif op == "end":
            fields[6] = draw(TIME_TEXT)
        elif op == "end_before":
            fields[6] = str(start - draw(st.integers(1, 10**6)))
        elif op == "tres":
            fields[8] = draw(TRES_TEXT)
        elif op == "cell":
            fields[draw(st.integers(1, 8))] = draw(TEXT)
        elif op == "drop" and len(fields) > 1:
            del fields[draw(st.integers(1, len(fields) - 1))]
        elif op == "add":
            fields.insert(draw(st.integers(1, len(fields))), draw(TEXT))
        elif op == "truncate":
            line = "|".join(fields)
            fields = line[:draw(st.integers(len(str(job_id)), len(line)))].split("|")
    return "|".join(fields)


FLOAT_EXTREME = st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                          st.sampled_from([math.nan, math.inf, -math.inf, -1.0, 0.0, -0.0, 1e308]))


@st.composite
def job_records(draw, job_id: int) -> JobRecord:
    """A record object as a source builds it, with values a broken source might give."""
    account, user = draw(st.sampled_from(KNOWN + UNKNOWN))
    start = float(draw(GOOD_TIME)) if draw(st.integers(0, 4)) else draw(FLOAT_EXTREME)
    end = draw(st.one_of(st.none(), st.floats(start - 1e6, start + 1e6) if math.isfinite(start) else st.none(),
                         FLOAT_EXTREME))
    tres = draw(st.dictionaries(st.sampled_from(["cpu", "mem", "node", "billing", "gres/gpu"]),
                                st.one_of(st.floats(0, 1e4), FLOAT_EXTREME), max_size=4))
    return JobRecord(job_id, (account, user or None, draw(st.sampled_from([None, None, "gpu", "nope"]))),
                     start, end, tres, draw(st.sampled_from([None, "debug", "gpu", "nope"])),
                     draw(st.one_of(st.sampled_from([1.0, 0.5, 0.0]), FLOAT_EXTREME)))


def expected_bad(r: JobRecord, policy: UsagePolicy) -> bool:
    """The documented rule: skipped iff end < start, start not finite, a billed TRES negative or not
    finite, or the association unknown."""
    needed = {"cpu"} | {k for w in policy.billing_weights.values() for k, v in w.items() if v and k != "billing"}
    known = {a.key for a in TREE if a.user is not None}
    account, user, part = r.assoc
    assoc_ok = (account, user, part) in known or (account, user, None) in known
    return (not math.isfinite(r.start) or (r.end is not None and r.end < r.start)
            or any(not math.isfinite(r.tres.get(n, 0.0)) or r.tres.get(n, 0.0) < 0 for n in needed)
            or not assoc_ok)


# Records a broken source might build (infinite TRES) make numpy warn while the billable TRES are
# worked out for every record at once; such records are then skipped as bad, as asserted.
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_job_record_fuzz():
    @FUZZ
    @given(st.data())
    def case(data):
        COUNTS["d"] += 1
        n_lines = data.draw(st.integers(0, 12))
        lines = [data.draw(sacct_lines(100 + i)) for i in range(n_lines)]
        lines += data.draw(st.lists(TEXT, max_size=2))  # garbage lines
        text = "\n".join(lines) + "\n"
        qos = {"normal": 1.0, "half": 0.5, "zero": 0.0, "odd": math.nan}
        rows = parse_sacct(text, qos)
        COUNTS["d", "sacct lines"] += len(lines)
        COUNTS["d", "bad sacct lines"] += len(rows.bad)
        # every non-blank line is accounted for: a record, a bad record or a job that never started
        nonblank = [ln for ln in text.split("\n") if ln.strip()]  # Slurm ends lines at \n only
        assert len(rows.records) + len(rows.bad) + rows.not_started == len(nonblank)
        firsts = {ln.split("|")[0] for ln in nonblank}
        for b in rows.bad:  # reported with the job id (a line's first field) and a reason
            assert b.reason and str(b).startswith(f"job {b.job_id}: ")
            assert b.job_id in firsts or str(b.job_id) in {f.strip() for f in firsts} or any(
                f.strip().isascii() and f.strip().isdigit() and len(f.strip()) <= 20 and int(f) == b.job_id
                for f in firsts)
        for r in rows.records:
            assert math.isfinite(r.start) and (r.end is None or r.end >= r.start)
            assert all(math.isfinite(v) and v >= 0 for v in r.tres.values())
        ids = {r.job_id for r in rows.records}
        assert rows.running <= ids

        objects = [data.draw(job_records(1000 + i)) for i in range(data.draw(st.integers(0, 8)))]
        records = rows.records + objects
        policy = data.draw(st.sampled_from(POLICIES))
        res = compute_usage(records, TREE, policy, AT)
        COUNTS["d", "records"] += len(records)
        COUNTS["d", "skipped as bad"] += len(res.bad)
        assert res.records == len(records) and res.charged + len(res.bad) == len(records)
        bad_ids = [b.job_id for b in res.bad]
        assert len(set(bad_ids)) == len(bad_ids)  # one report per bad record (ids are unique here)
        expected = {r.job_id for r in records if expected_bad(r, policy)}
        assert expected <= set(bad_ids)
        for b in res.bad:  # beyond the documented rules: records whose usage overflows (absurd times)
            assert b.job_id in expected or b.reason.startswith("its usage is not a finite number"), b
        assert all(b.reason for b in res.bad)
        for model, u in res.usage.items():  # the rest computed: finite, never negative
            assert all(math.isfinite(x) and x >= 0 for x in u.tolist()), (model, u)

    before = COUNTS["d"]
    case()
    assert COUNTS["d"] - before >= CASES


def test_sacct_huge_and_exotic_numbers_are_bad_records():
    """Digits beyond a double (a traceback before) and non-ASCII digits: bad records or text ids."""
    rows = parse_sacct(f"7|phys|alice|debug|normal|{'9' * 400}|Unknown|RUNNING|cpu=1\n"
                       "²|phys|alice|debug|normal|1795326130|1795326135|COMPLETED|cpu=1\n"
                       f"8|phys|alice|debug|normal|1795326130|{'9' * 400}|COMPLETED|cpu=1\n")
    assert [b.job_id for b in rows.bad] == [7, 8] and "unreadable Start" in rows.bad[0].reason
    assert [r.job_id for r in rows.records] == ["²"]  # not a number: kept as text, like any odd JobIDRaw
    with pytest.raises(ValueError):
        parse_tres_exact("cpu=²")


# --- (e) daemon cycles on a garbage snapshot -------------------------------------------------------------

GOOD_TREE = [
    Association("root", None, None, 1, None, order=1),
    Association("a", None, "root", 1, None, order=2),
    Association("a", "busy", "a", 1, 90.0, order=3),
    Association("a", "idle", "a", 1, 0.0, order=4),
    Association("b", None, "a", 3, 5.0, order=5),
    Association("b", "carol", "b", 2, 5.0, order=6),
]
GOOD_JOBS = [Job(1, "busy", "a", "batch", priority=10, site_factor=0),
             Job(2, "idle", "a", "batch", priority=10, site_factor=0),
             Job(3, "carol", "b", "batch", priority=10, site_factor=0, nice=5)]
GOOD_CONFIG = {"priority_flags": [], "weight_fairshare": 0, "calc_period_seconds": 60, "dampening": 1}
GOOD_SETTINGS = ClusterSettings.from_dict(GOOD_CONFIG)


class GarbageSource:
    name = "garbage"

    def __init__(self, make):
        self.make = make

    def snapshot(self, *, jobs=True):
        return self.make()


class NeverUpdater(AppliesEach):
    name = "never"

    def __init__(self):
        self.calls = []

    def apply(self, action):
        self.calls.append(action)


class Boom(Exception):
    pass


EXCEPTIONS = st.sampled_from([SourceError("`sshare -a -l -P -m` did not answer within 60 s"),
                              InputError("bad", "sshare:3"), OSError(5, "Input/output error"),
                              TimeoutError(), ValueError("x"), KeyError("ClusterName"), TypeError("y"),
                              ZeroDivisionError(), RecursionError(), UnicodeDecodeError("utf-8", b"\xff", 0, 1, "x"),
                              RuntimeError(""), Boom(), AttributeError("z"), IndexError(), MemoryError()])
NOT_ASSOCIATION = st.one_of(st.none(), st.integers(), TEXT, st.dictionaries(TEXT, st.integers(), max_size=2),
                            st.just(("root", None, None, 1, 0.0)))


def _assoc(a: Association, **kw) -> Association:
    d = dict(account=a.account, user=a.user, parent=a.parent, shares=a.shares, usage=a.usage,
             partition=a.partition, order=a.order)
    d.update(kw)
    return Association(**d)


@st.composite
def broken_trees(draw) -> list:
    """GOOD_TREE with at least one corruption that makes it no valid tree."""
    tree = list(GOOD_TREE)
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["shares", "usage", "duplicate", "orphan", "no_root", "two_roots", "cycle",
                                   "self_parent", "not_an_association", "mixed_order", "user_usage_none",
                                   "user_of_missing_account"]))
        i = draw(st.integers(0, len(tree) - 1))
        a = tree[i] if isinstance(tree[i], Association) else GOOD_TREE[2]
        if op == "shares":
            tree[i] = _assoc(a, shares=draw(st.sampled_from([-1, 2**31, 1.5, "x", None, True, math.nan, [], "-2"])))
        elif op == "usage":
            tree[i] = _assoc(a, usage=draw(st.sampled_from([-1.0, math.nan, math.inf, -math.inf, "x", [], True,
                                                            10**400, -5])))
        elif op == "duplicate":
            tree.insert(draw(st.integers(0, len(tree))), tree[i])
        elif op == "orphan":
            tree.append(Association(draw(st.sampled_from(["ghost", "x y", "-z"])), None,
                                    draw(st.sampled_from(["nowhere", "gone"])), 1, 0.0))
        elif op == "no_root":
            tree = [t for t in tree if not (isinstance(t, Association) and t.parent is None and t.user is None)]
        elif op == "two_roots":
            tree.append(Association(draw(st.sampled_from(["root2", "other"])), None, None, 1, 0.0))
        elif op == "cycle":
            tree += [Association("c1", None, "c2", 1, 0.0), Association("c2", None, "c1", 1, 0.0)]
        elif op == "self_parent":
            tree.append(Association("selfish", None, "selfish", 1, 0.0))
        elif op == "not_an_association":
            tree.insert(draw(st.integers(0, len(tree))), draw(NOT_ASSOCIATION))
        elif op == "mixed_order":
            tree = [_assoc(t, order="x") if isinstance(t, Association) and t.account == "a" and t.user == "idle"
                    else t for t in tree]
        elif op == "user_usage_none":
            tree.append(Association("a", "nousage", "a", 1, None))
        elif op == "user_of_missing_account":
            tree.append(Association("missing", "u", "missing", 1, 1.0))
    return tree


def _cluster_settings(config):
    """The settings a source would build from ``config``; what it cannot build stays as the garbage it is."""
    try:
        return ClusterSettings.from_dict(config)
    except (AttributeError, TypeError, ValueError):
        return config


@st.composite
def garbage_snapshots(draw):
    """What a broken Source might hand the Runner: exceptions, non-snapshots, or broken snapshots."""
    kind = draw(st.integers(0, 9))
    if kind == 0:
        exc = draw(EXCEPTIONS)

        def make():
            raise exc
        return make
    if kind == 1:
        value = draw(st.one_of(st.none(), st.integers(), TEXT, st.lists(st.integers(), max_size=2),
                               st.dictionaries(TEXT, st.integers(), max_size=2),
                               st.just({"associations": GOOD_TREE, "jobs": GOOD_JOBS})))
        return lambda: value
    jobs = draw(st.sampled_from([GOOD_JOBS, GOOD_JOBS[:1], []]))
    config = draw(st.sampled_from([GOOD_CONFIG, {}, None, {"priority_flags": ["NO_FAIR_TREE"]}]))
    if kind == 2:  # a complete tree, but the containers around it are garbage
        field_ = draw(st.sampled_from(["associations", "jobs", "config_flags"]))
        if field_ == "associations":
            assocs = draw(st.one_of(st.none(), st.just([]), st.integers(), st.just(tuple())))
            return lambda: Snapshot(associations=assocs, settings=GOOD_SETTINGS, jobs=list(GOOD_JOBS))
        if field_ == "jobs":
            garbage_jobs = draw(st.one_of(st.lists(NOT_ASSOCIATION, min_size=1, max_size=3), st.none(),
                                          st.integers(), st.text(max_size=5)))
            return lambda: Snapshot(associations=list(GOOD_TREE), settings=GOOD_SETTINGS, jobs=garbage_jobs)
        flags = draw(st.sampled_from([5, [1, 2], [None], 1.5]))
        garbage = _cluster_settings({"priority_flags": flags})
        return lambda: Snapshot(associations=list(GOOD_TREE), settings=garbage,
                                jobs=list(GOOD_JOBS))
    tree = draw(broken_trees())
    return lambda: Snapshot(associations=list(tree), settings=_cluster_settings(config),
                            jobs=list(jobs))


def _runner(mode: str, dry_run: bool = False):
    cfg = config_from_dict({"push": {"mode": mode, "weight": 1000, "dry_run": dry_run},
                            "logging": {"level": "error"}})
    updater = NeverUpdater()
    return Runner(cfg, GarbageSource(lambda: None), updater), updater


def test_runner_control_a_good_snapshot_is_pushed():
    """The double does push when the snapshot is sound (so 'never called' below means something)."""
    for mode in ("site_factor", "nice"):
        r, up = _runner(mode)
        r.source = GarbageSource(lambda: Snapshot(list(GOOD_TREE), settings=GOOD_SETTINGS,
                                                  jobs=list(GOOD_JOBS)))
        assert r.cycle().outcome == "success" and up.calls


def test_runner_garbage_snapshot_fuzz():
    @FUZZ
    @given(garbage_snapshots(), st.sampled_from(["site_factor", "nice"]), st.integers(0, 5))
    def case(make, mode, earlier_failures):
        COUNTS["e"] += 1
        r, up = _runner(mode)
        r.failures = earlier_failures  # a daemon already failing for a while (the backoff runs)
        r.source = GarbageSource(make)
        before = r.failures
        res = r.cycle()  # never raises
        assert res.outcome in ("pull_failed", "compute_failed"), (res.outcome, res.error)
        COUNTS["e", res.outcome] += 1
        assert res.error and res.actions == [] and res.pushed == 0
        assert up.calls == []  # never a push
        assert r.failures == before + 1 and r.status()["stale"]

    before = COUNTS["e"]
    case()
    assert COUNTS["e"] - before >= CASES


@pytest.mark.parametrize("config, jobs", [
    ("garbage", GOOD_JOBS),
    ({"calc_period_seconds": "x", "priority_flags": 5}, GOOD_JOBS),
    (GOOD_CONFIG, None),
    (GOOD_CONFIG, 5),
], ids=["config-not-a-dict", "calc-period-not-a-number", "jobs-None", "jobs-int"])
def test_runner_garbage_around_a_valid_tree(config, jobs):
    r, up = _runner("site_factor")
    r.source = GarbageSource(lambda: Snapshot(list(GOOD_TREE), settings=_cluster_settings(config), jobs=jobs))
    res = r.cycle()  # a failed cycle, never an exception out of cycle() (the shape is checked at the pull)
    assert res.outcome in ("pull_failed", "compute_failed") and up.calls == [], (res.outcome, res.error)
    assert r.status()["stale"] and r.retry_delay() > 0


def test_runner_backoff_after_many_failures():
    # a week of a dead slurmctld at the 600 s cap: the back-off must not overflow
    r, up = _runner("site_factor")
    r.source = GarbageSource(lambda: None)
    r.failures = 1024
    res = r.cycle()
    assert res.outcome == "pull_failed" and r.retry_delay() == r.config.schedule.max_backoff


# --- the summary ---------------------------------------------------------------------------------------

def test_zz_case_counts(capsys):
    """Print how many cases each kind ran (and fail if a kind that ran had fewer than CASES)."""
    with capsys.disabled():
        print("\nfuzz cases per kind:")
        for k in KINDS:
            detail = ", ".join(f"{sub} {n}" for (kk, sub), n in sorted(
                (key, n) for key, n in COUNTS.items() if isinstance(key, tuple)) if kk == k)
            print(f"  ({k}) {KINDS[k]}: {COUNTS[k]}" + (f"  [{detail}]" if detail else ""))
    ran = {k: COUNTS[k] for k in KINDS if COUNTS[k]}
    if not ran:
        pytest.skip("no fuzz test ran in this session (deselected)")
    assert all(n >= CASES for n in ran.values()), ran
