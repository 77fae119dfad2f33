"""The layers of docs/architecture.md, checked: no import in src/fairshared runs upward.

Every module under src/fairshared is parsed with ``ast`` (nothing is imported): module-level and
function-level imports, absolute and relative, and the string forms ``__import__("fairshared...")``
and ``importlib.import_module(...)``.  Each module belongs to the layer of its top-level entry (the
folder or module directly under ``fairshared``); an import may go to a lower layer, and sideways
(another entry of the same layer) only where :func:`sideways_ok` says.  A failure names the
importing file and line and the module imported.

``FAIRSHARED_ARCH_SRC=/other/checkout/src pytest tests/test_architecture.py`` checks another tree.
"""

from __future__ import annotations

import ast
import os
from collections import defaultdict
from pathlib import Path
from typing import NamedTuple

SRC = Path(os.environ.get("FAIRSHARED_ARCH_SRC") or Path(__file__).resolve().parents[1] / "src")
PKG = "fairshared"

# top-level entry under src/fairshared -> layer (docs/architecture.md says what each holds)
LAYER = {
    # 0 foundation: records and formats every layer shares; no fairshared import but those below
    "__init__": 0, "model": 0, "settings": 0, "records": 0, "slurm": 0, "logs": 0, "pyslurm_loader": 0,
    # 1 core: the computations; no I/O
    "engine": 1, "priority": 1, "priority_sprio": 1, "usage": 1, "usage_clock": 1, "usage_models": 1, "usage_charge": 1, "plan": 1, "push_modes": 1, "push_assoc": 1, "takeback": 1, "whatif": 1, "explain_vs": 1, "explain_common": 1, "explain_json": 1,
    "output": 1, "cycle": 1,
    # 2 adapters: where inputs come from and where results go
    "inputs": 2, "sources": 2, "sinks": 2, "history": 2, "api": 2, "web": 2,
    # 3 applications: the daemon and the commands
    "daemon": 3, "commands": 3,
    # 4 entry points
    "cli": 4, "__main__": 4,
}
NAMES = {0: "foundation", 1: "core", 2: "adapters", 3: "applications", 4: "entry points"}

# same-layer imports between two entries that are allowed (all others of that layer are not)
SIDEWAYS = {
    ("slurm", "model"),  # Slurm's formats build model records
    ("slurm", "settings"),  # scontrol show config's FairShareDampeningFactor by settings.dampening_factor's rule
    ("model", "settings"),  # a Snapshot carries the cluster's ClusterSettings
    ("pyslurm_loader", "records"),  # raises records.SourceError
    ("commands", "daemon"),  # run starts the daemon, recompute reads its config and pid file
    ("__main__", "cli"),
}

def sideways_ok(a: str, b: str) -> bool:
    """May entry ``a`` import entry ``b`` of the same layer?"""
    if LAYER[a] == 1:  # core modules build on each other (the cycle test keeps that a tree);
        return a != "engine"  # the engine builds on the foundation alone
    return (a, b) in SIDEWAYS


class Import(NamedTuple):
    path: Path
    line: int
    importer: str
    imported: str

    def where(self) -> str:
        return f"{self.path.relative_to(SRC.parent)}:{self.line}"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def exists(module: str) -> bool:
    base = SRC.joinpath(*module.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def entry(module: str) -> str:
    """The top-level entry a module belongs to: ``fairshared.sinks.metrics`` → ``sinks``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def resolve(path: Path, level: int, module: str | None) -> str:
    """The absolute name of ``from <level dots><module> import ...`` written in ``path``."""
    if level == 0:
        return module or ""
    package = module_name(path).split(".")
    if not is_package(path):
        package.pop()
    package = package[:len(package) - (level - 1)]
    return ".".join(package + ([module] if module else []))


def _literal(call: ast.Call) -> str | None | bool:
    """The module a ``__import__``/``import_module`` call names.

    None: not such a call; False: its module is computed, not a literal."""
    f = call.func
    name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
    if name not in ("__import__", "import_module") or not call.args:
        return None
    arg = call.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    return False


def imports_of(path: Path) -> tuple[list[Import], list[Import]]:
    """(imports of fairshared modules, dynamic imports whose module is not a literal)."""
    me = module_name(path)
    found: list[Import] = []
    dynamic: list[Import] = []
    seen: set[tuple[int, str]] = set()

    def add(line: int, target: str) -> None:
        if (target == PKG or target.startswith(PKG + ".")) and (line, target) not in seen:
            seen.add((line, target))
            found.append(Import(path, line, me, target))

    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(node.lineno, alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = resolve(path, node.level, node.module)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                add(node.lineno, sub if exists(sub) else base)  # a submodule, or a name in base
        elif isinstance(node, ast.Call):
            target = _literal(node)
            if target is False:
                dynamic.append(Import(path, node.lineno, me, ast.unparse(node.args[0])))
            elif target:
                name = target.lstrip(".")
                add(node.lineno, resolve(path, len(target) - len(name), name or None))
    return found, dynamic


def modules() -> list[Path]:
    return sorted((SRC / PKG).rglob("*.py"))


def all_imports() -> list[Import]:
    return [imp for path in modules() for imp in imports_of(path)[0]]


def wrong_way(imp: Import) -> str | None:
    """Why this import breaks the layering, or None."""
    a, b = entry(imp.importer), entry(imp.imported)
    if a == b:
        return None
    la, lb = LAYER[a], LAYER[b]
    if lb > la:
        return f"{a} (layer {la}, {NAMES[la]}) imports upward into {b} (layer {lb}, {NAMES[lb]})"
    if lb == la and not sideways_ok(a, b):
        return f"{a} imports sideways into {b} (both layer {la}, {NAMES[la]})"
    return None


def test_the_tree_is_there():
    assert (SRC / PKG / "model.py").is_file(), SRC
    assert len(modules()) > 40


def test_every_module_has_a_layer():
    entries = {entry(module_name(p)) for p in modules()}
    missing = sorted(entries - LAYER.keys())
    assert not missing, f"place these in LAYER (and in docs/architecture.md): {missing}"


def test_no_import_runs_upward_or_sideways():
    bad = []
    for imp in all_imports():
        why = wrong_way(imp)
        if why:
            bad.append(f"{imp.where()}: {imp.importer} imports {imp.imported}: {why}")
    assert not bad, "imports against the layers (docs/architecture.md):\n" + "\n".join(bad)


def test_imports_are_plain_enough_to_check():
    dynamic = [imp for path in modules() for imp in imports_of(path)[1]]
    assert not dynamic, "imports of a computed module name (write them as import statements):\n" + "\n".join(
        f"{imp.where()}: {imp.importer} imports {imp.imported}" for imp in dynamic)


def _cycles(edges: dict[str, dict[str, Import]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def _describe(cycles: list[list[str]], edges: dict[str, dict[str, Import]]) -> str:
    lines = []
    for comp in cycles:
        lines.append(" <-> ".join(comp))
        for a in comp:
            for b, imp in sorted(edges[a].items()):
                if b in comp:
                    lines.append(f"  {imp.where()}: {imp.importer} imports {imp.imported}")
    return "\n".join(lines)


def test_no_cycle_between_top_level_folders():
    edges: dict[str, dict[str, Import]] = defaultdict(dict)
    for imp in all_imports():
        a, b = entry(imp.importer), entry(imp.imported)
        if a != b:
            edges[a].setdefault(b, imp)
    cycles = _cycles(edges)
    assert not cycles, "top-level entries that import each other:\n" + _describe(cycles, edges)


def test_no_cycle_between_modules():
    edges: dict[str, dict[str, Import]] = defaultdict(dict)
    for imp in all_imports():
        if imp.importer != imp.imported:
            edges[imp.importer].setdefault(imp.imported, imp)
    cycles = _cycles(edges)
    assert not cycles, "modules that import each other:\n" + _describe(cycles, edges)


def test_the_checker_sees_every_form_of_import(tmp_path, monkeypatch):
    """A module with each form the checker must catch, run through imports_of."""
    pkg = tmp_path / PKG / "sinks"
    pkg.mkdir(parents=True)
    (tmp_path / PKG / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (tmp_path / PKG / "daemon").mkdir()
    (tmp_path / PKG / "daemon" / "__init__.py").write_text("")
    (tmp_path / PKG / "daemon" / "runner.py").write_text("")
    mod = pkg / "probe.py"
    mod.write_text(
        "import importlib\n"
        "from ..daemon.runner import X\n"  # 2
        "def f():\n"
        "    import fairshared.daemon\n"  # 4
        "    from fairshared import daemon\n"  # 5
        "    __import__('fairshared.daemon.runner', fromlist=['x'])\n"  # 6
        "    importlib.import_module('fairshared.daemon')\n"  # 7
        "    __import__(f'fairshared.{name}')\n"  # 8
    )
    monkeypatch.setitem(globals(), "SRC", tmp_path)
    found, dynamic = imports_of(mod)
    assert sorted((i.line, i.imported) for i in found) == [
        (2, "fairshared.daemon.runner"), (4, "fairshared.daemon"), (5, "fairshared.daemon"),
        (6, "fairshared.daemon.runner"), (7, "fairshared.daemon")]
    assert [i.line for i in dynamic] == [8]
    assert all(wrong_way(i) for i in found)
