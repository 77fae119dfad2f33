"""The pull's faster parsers and layouts give what the slower ones they replaced gave (issue 19 item 4).

Each replaced implementation is kept here, in its plain form, as the oracle; hypothesis feeds both
the same generated input (odd words, repeated keys, bad values, unusual whitespace) and the
results, or the error messages, must be equal.  Deterministic like tests/test_fuzz.py.
"""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fairshared.model import PARENT, InputError, check_shares, check_usage
from fairshared.sources.slurm_text import AssocRecord, parse_assoc_mgr

EXAMPLES = settings(max_examples=400, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))


def outcome(fn, *args, **kwargs):
    """A result, or the error it raised as (type name, message): equal outcomes, equal behaviour."""
    try:
        return fn(*args, **kwargs)
    except (InputError, ValueError) as exc:
        return (type(exc).__name__, str(exc))


# --- scontrol show assoc_mgr flags=assoc -----------------------------------------------------------

_NAME_UID = re.compile(r"^(.*)\((\d+)\)$")


def regex_parse_assoc_mgr(text: str, where: str = "scontrol show assoc_mgr") -> list[AssocRecord]:
    """The parser as it was: ``re.finditer(r"(\\S+?)=(\\S*)")`` on every line of a block."""
    records: list[AssocRecord] = []
    block: dict[str, str] = {}
    start = 0

    def strip_uid(value: str) -> str:
        m = _NAME_UID.match(value)
        return m.group(1) if m else value

    def flush():
        if not block:
            return
        w = f"{where}: record at line {start}"
        try:
            ident = int(block["ID"])
        except (KeyError, ValueError):
            raise InputError("has no numeric ID=", w) from None
        account = block.get("Account", "")
        if not account:
            raise InputError("has no Account=", w)
        user = strip_uid(block.get("UserName", "")) or None
        part = block.get("Partition", "") or None
        shares_field = block.get("SharesRaw/Norm/Level/Factor")
        usage_field = block.get("UsageRaw/Norm/Efctv")
        if shares_field is None or usage_field is None:
            raise InputError("lacks SharesRaw/... or UsageRaw/...", w)
        raw_shares = shares_field.split("/")[0]
        label = f"{w} ({account}{'/' + user if user else ''})"
        if raw_shares.lower() == "parent" or raw_shares == "2147483647":
            shares: int | str = PARENT
        else:
            shares = check_shares(raw_shares, label)
        usage = check_usage(usage_field.split("/")[0], label)
        parent_id = None
        m = _NAME_UID.match(block.get("ParentAccount", ""))
        if m:
            parent_id = int(m.group(2))
        order: int | str | None = None
        if block.get("Lineage"):
            order = block["Lineage"]
        elif block.get("Lft", "").isdigit():
            order = int(block["Lft"])
        records.append(AssocRecord(ident, account, user, part, parent_id, shares, usage, order))

    in_block = False
    for lineno, line in enumerate(text.split("\n"), start=1):
        if line.startswith("ClusterName="):
            flush()
            block = {}
            start = lineno
            in_block = True
        elif not line.startswith((" ", "\t")):
            flush()
            block = {}
            in_block = False
            continue
        if in_block:
            for m in re.finditer(r"(\S+?)=(\S*)", line):
                block.setdefault(m.group(1), m.group(2))
    flush()
    return records


KEYS = ["ID", "Account", "UserName", "Partition", "SharesRaw/Norm/Level/Factor", "UsageRaw/Norm/Efctv",
        "ParentAccount", "Lft", "Lineage", "Priority", "DefAssoc", "GrpTRES", "ClusterName", "I", "=", "=ID"]
# whitespace str.split() and the regex's \s both know, beyond the space
ODD_SPACE = ["\t", "\r", "\x0b", "\x0c", "\x1c", "\x1f", "\x85", "\xa0", "\u2028", "\u3000"]
VALUES = st.one_of(
    st.sampled_from(["", "1", "42", "007", "root(1)", "alice(1001)", "a(b)(12)", "x()", "(5)", "a(1))",
                     "12/0.5/3", "parent/1.00/1/0.67", "2147483647/0.33/4/0.00", "11915.22/1.00/1.00",
                     "-1/0/0", "nan", "1e400", "0x10", "1_000", "٣٤", "²", "/0-a/1-b/", "=", "==", "a=b",
                     "cpu=N(0),mem=N(1)"]),
    st.text(alphabet="ab(0)19=/.-_é٣", max_size=8),
)
WORD = st.one_of(
    st.tuples(st.sampled_from(KEYS), VALUES).map(lambda kv: f"{kv[0]}={kv[1]}"),
    st.sampled_from(["a==b", "=x", "k=", "==", "=", "=x=y", "noequals", "ID==7", "Lft=3=4"]),
    st.text(alphabet="Ab=(1)/", min_size=1, max_size=6),
)
SPACE = st.one_of(st.just(" "), st.sampled_from(ODD_SPACE), st.text(alphabet=" \t", min_size=1, max_size=3))


@st.composite
def line(draw, indent: bool):
    words = draw(st.lists(WORD, max_size=5))
    text = "".join(draw(SPACE) + w for w in words)
    if indent:
        return draw(st.sampled_from(["    ", "\t", " "])) + text.lstrip(" \t")
    return text


def good_record(i: int, user: str | None, lft: int) -> list[str]:
    return [f"ClusterName=c Account=a{i % 3} UserName={user or ''} Partition= Priority=0 ID={i}",
            f"    SharesRaw/Norm/Level/Factor={i % 5}/0.00/1/0.00",
            f"    UsageRaw/Norm/Efctv={i * 1.5:.2f}/0.00/0.00",
            f"    ParentAccount={'root(1)' if user is None else ''} Lft={lft} DefAssoc=No",
            "    GrpJobs=N(0) GrpJobsAccrue=N(0)",
            "    GrpTRES=cpu=N(0),mem=N(0),energy=N(0),node=N(0),billing=N(0)",
            "    MaxTRESPJ=",
            "    MinPrioThresh="]


@st.composite
def assoc_mgr_texts(draw):
    out = ["Current Association Manager state", "", "Association Records", ""]
    for i in range(1, draw(st.integers(0, 6)) + 1):
        rec = good_record(i, draw(st.sampled_from([None, "bob(1002)", "o(d)d(3)"])), draw(st.integers(1, 99)))
        for _ in range(draw(st.integers(0, 3))):  # odd words and lines: inserted, replaced or appended
            at = draw(st.integers(0, len(rec)))
            new = draw(line(indent=at > 0)) if at > 0 else "ClusterName=" + draw(line(indent=False))
            if draw(st.booleans()) and at < len(rec):
                rec[at] = new
            else:
                rec.insert(at, new)
        out += rec
        if draw(st.integers(0, 9)) == 0:  # a heading, a blank line or a stray indented line
            out.append(draw(st.sampled_from(["", "QOS Records", "  Stray=1 ID=9", "UserName=x(1)"])))
    out += ["", "QOS Records", "", "QOS=normal(1)", "    UsageRaw=0.000000"]
    return draw(st.sampled_from(["\n", "\r\n"])).join(out) + draw(st.sampled_from(["", "\n"]))


@EXAMPLES
@given(assoc_mgr_texts())
def test_assoc_mgr_words_are_read_as_the_regex_read_them(text):
    assert outcome(parse_assoc_mgr, text) == outcome(regex_parse_assoc_mgr, text)


@EXAMPLES
@given(st.lists(st.one_of(line(indent=True), line(indent=False)), max_size=12))
def test_assoc_mgr_odd_lines(lines):
    text = "\n".join(["ClusterName=c Account=a ID=1"] + lines)
    assert outcome(parse_assoc_mgr, text) == outcome(regex_parse_assoc_mgr, text)


def test_assoc_mgr_odd_words_by_hand():
    head = "ClusterName=c Account=a UserName=u(5) ID=1\n    SharesRaw/Norm/Level/Factor=1/0/0/0\n"
    cases = [
        "    UsageRaw/Norm/Efctv=3.5/0/0 =x Lft==7 Lft=8",  # "=x" is no word; Lft is "=7" (not a number)
        "    UsageRaw/Norm/Efctv=3.5/0/0 =Lft=9 k=",  # "=Lft" is a key of its own
        # Lft or Lineage past the words slurmctld prints before them
        "    UsageRaw/Norm/Efctv=3.5/0/0\n    GrpJobs=N(0) A=1 B=2 C=3 D=4 E=5 F=6\n    X=1\n    Lft=12",
        "    UsageRaw/Norm/Efctv=3.5/0/0\n    GrpJobs=N(0) A=1 B=2 C=3 D=4 E=5 F=6\n    GrpLft=12 Lineage=/a/",
        "    UsageRaw/Norm/Efctv=3.5/0/0\x1cLft=4\u2028Lineage=/x/",  # separators only str.isspace knows
        "    UsageRaw/Norm/Efctv=3.5/0/0 ID=2 UsageRaw/Norm/Efctv=9/0/0",  # first occurrence wins
    ]
    got = [(r.id, r.user, r.usage, r.order) for c in cases for r in parse_assoc_mgr(head + c)]
    assert got == [(1, "u", 3.5, None), (1, "u", 3.5, None), (1, "u", 3.5, 12), (1, "u", 3.5, "/a/"),
                   (1, "u", 3.5, "/x/"), (1, "u", 3.5, None)]
    for c in cases:
        assert parse_assoc_mgr(head + c) == regex_parse_assoc_mgr(head + c)
