"""docs/configuration.md is every key of the daemon's configuration, made from the code.

Each key's type, bounds and default come from the pydantic model (:class:`fairshared.daemon.config.Config`),
its meaning from the comments beside it in ``deploy/fairshared.toml``, the example file an admin
copies.  A key the model has and the example does not document fails here, and so does a page
that is not what the two give today.  ``FAIRSHARED_WRITE_README=1`` rewrites the page.
"""

from __future__ import annotations

import os
import re
import typing
from pathlib import Path

from annotated_types import Ge, Gt, Le, MinLen

from fairshared.daemon.config import Config

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "deploy" / "fairshared.toml"
PAGE = ROOT / "docs" / "configuration.md"
KEY = re.compile(r"^#?\s?(?P<key>[a-z_]+)\s*=\s*(?P<value>[^#]*?)\s*(?:#\s?(?P<comment>.*))?$")


def example_docs() -> tuple[dict[str, str], dict[str, str]]:
    """From deploy/fairshared.toml: each section's opening comment, and each key's comment (its own
    line's and the indented comment lines under it), by ``section`` and ``section.key``."""
    sections: dict[str, str] = {}
    keys: dict[str, str] = {}
    section, last, intro = None, None, []
    for line in EXAMPLE.read_text().splitlines():
        if m := re.match(r"^\[(\w+)\]$", line):
            section, last, intro = m.group(1), None, []
            continue
        if section is None:
            continue
        m = KEY.match(line)
        if m and (line[0] != "#" or "=" in line.split("#")[1]):
            last = f"{section}.{m['key']}"
            keys[last] = (m["comment"] or "").strip()
            if intro:
                sections[section] = " ".join(intro)
            continue
        stripped = line.strip()
        if line.startswith(" ") and stripped.startswith("#") and last:  # a key's comment goes on
            keys[last] += " " + stripped.lstrip("#").strip()
        elif line.startswith("#") and last is None:  # the section's own words, before its first key
            intro.append(stripped.lstrip("#").strip())
        elif line.startswith("#") and last:
            keys[last] += " " + stripped.lstrip("#").strip()
    return sections, keys


def _n(x) -> str:
    return f"{x:,}" if isinstance(x, int) else f"{x:g}"


def _type(field) -> str:
    """The values a key takes, as a reader would write them."""
    ann = field.annotation
    args = typing.get_args(ann)
    if typing.get_origin(ann) is list:  # a TOML array (http.proxies)
        inner = {str: "strings"}.get(args[0], args[0].__name__)
        bounds = [f"at most {m.max_length}" for m in field.metadata if getattr(m, "max_length", None)]
        return f"list of {inner}" + (f" ({', '.join(bounds)})" if bounds else "")
    if typing.get_origin(ann) is typing.Literal:
        return " \\| ".join(f"`{a!r}`".replace("'", '"') for a in args)
    names = []
    for a in args or (ann,):
        if typing.get_origin(a) is typing.Literal:
            names += [f"`{x!r}`".replace("'", '"') for x in typing.get_args(a)]
        elif a is type(None):
            continue
        else:
            names.append({int: "integer", float: "number", str: "string", bool: "true/false"}.get(a, a.__name__))
    bounds = []
    for m in field.metadata:
        if isinstance(m, Gt):
            bounds.append(f"> {_n(m.gt)}")
        elif isinstance(m, Ge):
            bounds.append(f"≥ {_n(m.ge)}")
        elif isinstance(m, Le):
            bounds.append(f"≤ {_n(m.le)}")
        elif isinstance(m, MinLen):
            bounds.append("not empty")
    return " or ".join(names) + (f" ({', '.join(bounds)})" if bounds else "")


def _default(field) -> str:
    d = field.default_factory() if field.default_factory is not None else field.default
    if d is None:
        return "unset"
    if isinstance(d, bool):
        return f"`{str(d).lower()}`"
    if isinstance(d, str):
        return f'`"{d}"`'
    if isinstance(d, list):
        return "`[]`" if not d else f"`{d}`"
    return f"`{d:g}`" if isinstance(d, float) else f"`{d}`"


def render() -> str:
    sections, keys = example_docs()
    out = ["# Configuration: every key", "",
           "The daemon reads one TOML file (`fairshared run --config FILE`; the unit's is "
           "`/etc/fairshared/fairshared.toml`). Every key is optional: what is not set is read from the "
           "cluster's own configuration (`scontrol show config`) at every cycle, so an empty file gives a "
           "daemon that computes what Slurm itself would. A bad file is refused with one line naming the "
           "file and the key, at start-up and at a reload (`kill -HUP`, `systemctl reload fairshared`), and "
           "the running configuration is kept. Values are TOML's own types: a quoted `\"yes\"` or `\"30\"`, "
           "or a `1` for true, is refused, not guessed. Every number is finite (TOML's `inf` and `nan` are "
           "refused) and bounded as below. The annotated example to copy is "
           "[`deploy/fairshared.toml`](../deploy/fairshared.toml); this page is made from it and from the "
           "code by `tests/test_docs_config.py`, which fails when the two disagree.", ""]
    for name, sec in Config.model_fields.items():
        model = sec.annotation
        out += [f"## `[{name}]`", ""]
        if sections.get(name):
            out += [sections[name], ""]
        out += ["| key | values | default | what it does |", "|---|---|---|---|"]
        for key, field in model.model_fields.items():
            text = keys.get(f"{name}.{key}", "").replace("|", "\\|")
            out.append(f"| `{key}` | {_type(field)} | {_default(field)} | {text} |")
        out.append("")
    return "\n".join(out)


def test_every_key_of_the_model_is_documented_in_the_example_file():
    _, keys = example_docs()
    model = {f"{n}.{k}" for n, s in Config.model_fields.items() for k in s.annotation.model_fields}
    assert sorted(model - set(keys)) == [], "keys with no line in deploy/fairshared.toml"
    assert sorted(set(keys) - model) == [], "deploy/fairshared.toml documents keys the daemon does not have"
    assert all(keys[k] for k in model), [k for k in model if not keys[k]]  # each says what it does


def test_the_configuration_page_is_what_the_code_and_the_example_say():
    text = render()
    if os.environ.get("FAIRSHARED_WRITE_README") == "1":
        PAGE.write_text(text)
    assert PAGE.read_text() == text, "docs/configuration.md is stale (FAIRSHARED_WRITE_README=1)"
    assert "| `mode` | `\"site_factor\"` \\| `\"nice\"`" in text  # choices as a reader writes them
    assert "| `period` | number (> 0, ≤ 86400) | unset |" in text
