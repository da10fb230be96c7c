"""The layer contract of docs/design.md, enforced: every import in slatelib/ (its jobs in
slatelib/jobs/), the entry scripts jobs/ and airflow_dags/ (lazy ones inside functions included) goes in the documented direction, and
no two slatelib modules import each other at module level.

A new module joins the layer of its package (``slatelib/<package>/...``) or, at the top of
``slatelib/``, the layer listed in :data:`LAYER_OF`. To change the contract, change
docs/design.md and :data:`ALLOWED` together.

Inside ``ops/`` (:func:`ops_problem`): the range engine (``ops/engine/``) imports no feature;
a feature (``ops/compaction/``, ``ops/rescale/``, ``ops/export/``, ``ops/gc/``, or a module
at the top of ``ops/`` such as ``ops/clone.py``) imports the engine's package only, and
another feature only through that feature's package (its ``__init__``) or top-level module;
nothing outside the engine imports the engine's private (``_``) modules.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

BASE = "base"
LAYER_OF = {  # top-level modules of slatelib/
    "slatelib.errors": BASE, "slatelib.ids": BASE, "slatelib.paths": BASE,
    "slatelib.clock": BASE, "slatelib.config": BASE, "slatelib.exit_codes": BASE,
    "slatelib.flags": BASE, "slatelib._version": BASE, "slatelib.txn": "txn", "slatelib.db_manifest": "txn",
    "slatelib.reader": "reader",
    "slatelib": "api",
}

ALLOWED: dict[str, set[str]] = {
    BASE: {BASE},
    "core": {BASE, "core"},
    "format": {BASE, "core", "format"},
    "objstore": {BASE, "objstore"},
    "store": {BASE, "core", "format", "objstore", "store"},
    "txn": {BASE, "core", "store", "txn"},
    "reader": {BASE, "core", "format", "objstore", "store", "txn"},
    "writer": {BASE, "core", "format", "objstore", "store", "txn", "writer"},
    "ops": {BASE, "core", "format", "objstore", "store", "txn", "reader", "writer", "ops"},
    "testing": {BASE, "core", "format", "objstore", "store", "testing"},
    "metrics": {BASE, "objstore", "ops", "metrics"},
    "cli": {BASE, "core", "format", "objstore", "store", "txn", "reader", "writer", "ops",
            "metrics", "cli"},
    "api": {BASE, "core", "format", "objstore", "store", "txn", "reader", "writer", "ops",
            "testing"},
    "spark": {BASE, "core", "format", "objstore", "store", "txn", "reader", "ops", "spark"},
    "jobs": {BASE, "core", "objstore", "ops", "api", "jobs", "spark", "metrics"},
    "airflow_dags": set(),
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer(module: str) -> str | None:
    """The layer of a module of this repository (None: a third-party module)."""
    top = module.split(".")[0]
    if top in ("jobs", "airflow_dags"):
        return top
    if top != "slatelib":
        return None
    for prefix in sorted(LAYER_OF, key=len, reverse=True):
        if module == prefix or module.startswith(prefix + "."):
            if prefix != "slatelib" or module == "slatelib":
                return LAYER_OF[prefix]
    return module.split(".")[1] if "." in module else "api"


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports(path: Path) -> Iterator[tuple[int, str, bool]]:
    """``(line, imported module, at module level)`` of every import in ``path``;
    ``from pkg import name`` yields ``pkg.name`` when that is a module of the repository."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top_level: set[int] = set()
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            top_level.add(id(node))
        if isinstance(node, ast.Try):
            top_level.update(id(n) for n in node.body if isinstance(n, ast.Import | ast.ImportFrom))
    checking = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                and _type_checking(node) for n in ast.walk(node)}
    for node in ast.walk(tree):
        if id(node) in checking:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, id(node) in top_level
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                is_module = any((REPO / Path(*sub.split("."))).with_suffix(".py").exists()
                                or (REPO / Path(*sub.split(".")) / "__init__.py").exists()
                                for _ in [0])
                yield node.lineno, sub if is_module else node.module, id(node) in top_level


def sources() -> list[Path]:
    out: list[Path] = []
    for root in ("slatelib", "jobs", "airflow_dags"):
        out += sorted((REPO / root).rglob("*.py"))
    return out


def test_every_import_goes_in_the_documented_direction() -> None:
    bad = []
    for path in sources():
        src = layer(module_name(path))
        assert src in ALLOWED, f"{path}: layer {src!r} is not in the contract"
        for line, target, _ in imports(path):
            dst = layer(target)
            if dst is not None and dst not in ALLOWED[src]:
                bad.append(f"{path.relative_to(REPO)}:{line}: {src} -> {dst} ({target})")
    assert bad == [], "imports against the layer contract (docs/design.md):\n" + "\n".join(bad)


def test_no_two_slatelib_modules_import_each_other_at_module_level() -> None:
    graph: dict[str, set[str]] = {}
    for path in sources():
        mod = module_name(path)
        if not mod.startswith("slatelib"):
            continue
        graph[mod] = {t for _, t, top in imports(path) if top and t.startswith("slatelib")
                      and t != mod and not mod.startswith(t + ".")}
    cycles = _cycles(graph)
    assert cycles == [], f"module-level import cycles: {cycles}"


def test_jobs_parse_arguments_and_leave_spark_to_slatelib() -> None:
    """``slatelib/jobs/`` is argument parsing and the entry-point shell: none of its modules
    (nor the entry scripts ``jobs/``) imports ``pyspark`` or ``py4j`` (type hints aside); the
    Spark adapters live in ``slatelib/spark/``, so executors need only the installed slatelib
    (docs/design.md)."""
    paths = sorted((REPO / "slatelib" / "jobs").rglob("*.py")) + sorted((REPO / "jobs").rglob("*.py"))
    assert len(paths) > 4
    bad = [f"{path.relative_to(REPO)}:{line}: {target}"
           for path in paths
           for line, target, _ in imports(path)
           if target.split(".")[0] in ("pyspark", "py4j")]
    assert bad == [], "Spark code in jobs/ (move it to slatelib/spark/):\n" + "\n".join(bad)


def entry_script_problems(path: Path, text: str | None = None) -> list[str]:
    """Why the entry script ``jobs/<job>.py`` is not thin: it must import ``main`` from
    ``slatelib.jobs.<job>`` and nothing else of this repository, define nothing, and stay
    short (the code is installed with slatelib; docs/design.md)."""
    source = path.read_text(encoding="utf-8") if text is None else text
    tree = ast.parse(source)
    job = path.stem
    out = []
    targets = [t for _, t in all_imports(path, source) if layer(t) is not None]
    if targets != [f"slatelib.jobs.{job}.main"] and targets != [f"slatelib.jobs.{job}"]:
        out.append(f"imports {targets}, not only main from slatelib.jobs.{job}")
    defs = [n.name for n in ast.walk(tree)
            if isinstance(n, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef)]
    if defs:
        out.append(f"defines {defs}")
    body = tree.body[1:] if ast.get_docstring(tree) is not None else tree.body
    code = [n for n in body if not (isinstance(n, ast.ImportFrom) and n.module == "__future__")]
    if len(code) > 3 or sum(n.end_lineno - n.lineno + 1 for n in code if n.end_lineno) > 6:
        out.append("more than a few lines of code")
    return out


def test_the_entry_scripts_are_thin_and_there_is_no_jobs_package() -> None:
    scripts = sorted((REPO / "jobs").glob("*.py"))
    assert {p.stem for p in scripts} == {"compact", "gc", "rescale", "export"}
    assert not (REPO / "jobs" / "__init__.py").exists(), "jobs/ is scripts, not a package"
    bad = [f"{p.relative_to(REPO)}: {why}" for p in scripts for why in entry_script_problems(p)]
    assert bad == [], "entry scripts that are not thin:\n" + "\n".join(bad)
    # the checker itself: a script with its own code, or importing another job, is caught
    fat = ("from slatelib.jobs.gc import main\nfrom slatelib.jobs._common import run_main\n"
           "def main2():\n    return 0\n")
    assert len(entry_script_problems(REPO / "jobs" / "compact.py", fat)) == 2


def test_no_object_store_module_imports_back_even_lazily() -> None:
    """Inside ``objstore/``, imports inside functions count too: the store registry
    (``registry.py``) imports the stores and their backends, and none of them imports it,
    or anything that leads back to it (docs/design.md). An import of the package itself
    (``from slatelib.objstore import ...``), which re-exports the registry, counts as one."""
    package = "slatelib.objstore"
    graph: dict[str, set[str]] = {}
    for path in sorted((REPO / "slatelib" / "objstore").rglob("*.py")):
        mod = module_name(path)
        if mod == package:
            continue
        graph[mod] = {t if t != package else f"{package}.registry"
                      for _, t, _ in imports(path) if t == package or t.startswith(package + ".")}
        graph[mod].discard(mod)
    assert f"{package}.registry" in graph
    assert _cycles(graph) == [], "import cycles inside objstore/, lazy imports included"
    importers = sorted(m for m, targets in graph.items() if f"{package}.registry" in targets)
    assert importers == [], f"modules of objstore/ that import the registry: {importers}"


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
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

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_contract_catches_a_forbidden_import(tmp_path: Path) -> None:
    """The checker itself: a core module importing the object store is reported."""
    assert layer("slatelib.core.manifest") == "core"
    assert layer("slatelib.objstore.url") == "objstore"
    assert layer("slatelib.errors") == BASE and layer("jobs.gc") == "jobs"
    assert layer("slatelib.jobs.gc") == "jobs" and layer("slatelib.jobs") == "jobs"
    assert "objstore" not in ALLOWED["core"] and "cli" not in ALLOWED["jobs"]
    assert "reader" not in ALLOWED["writer"] and "writer" not in ALLOWED["reader"]
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
    # a lazy import is one too: the check of objstore/ reads imports inside functions
    probe = tmp_path / "lazy.py"
    probe.write_text("def f():\n    from slatelib.objstore.registry import open_store\n")
    assert ("slatelib.objstore.registry", False) in {(t, top) for _, t, top in imports(probe)}


# ------------------------------------------------------------------ rooms inside ops/
OPS = "slatelib.ops"
ENGINE = "slatelib.ops.engine"


def ops_room(module: str) -> str | None:
    """The room of a module inside ``ops/``: ``engine``, or a feature (a package such as
    ``compaction``, or a top-level module such as ``clone``); None outside ``ops/`` (and
    for ``slatelib.ops`` itself)."""
    parts = module.split(".")
    return parts[2] if module.startswith(OPS + ".") and len(parts) > 2 else None


def ops_problem(src: str, target: str) -> str | None:
    """Why ``src`` importing ``target`` breaks the rules inside ``ops/`` (None: it does not).

    The engine imports no feature; only the engine imports its private modules; a feature
    imports another feature only through that feature's package or top-level module."""
    dst, own = ops_room(target), ops_room(src)
    if dst is None or dst == own:
        return None
    public = f"{OPS}.{dst}"
    if own == "engine":
        return f"the engine imports no feature ({target})"
    if dst == "engine":
        return None if target == ENGINE else f"a private module of the engine ({target})"
    if own is not None and target != public:
        return f"a private module of feature {dst!r} ({target}; import {public})"
    return None


def all_imports(path: Path, text: str | None = None) -> Iterator[tuple[int, str]]:
    """``(line, imported module)`` of every import in ``path`` (or in ``text``, as if it were
    that file), those under ``TYPE_CHECKING`` and relative ones included (``from pkg import
    name`` yields ``pkg.name`` when that is a module of the repository)."""
    mod = module_name(path)
    package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    source = path.read_text(encoding="utf-8") if text is None else text
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                is_module = ((REPO / Path(*sub.split("."))).with_suffix(".py").exists()
                             or (REPO / Path(*sub.split(".")) / "__init__.py").exists())
                yield node.lineno, sub if is_module else base


def ops_problems(edges: list[tuple[str, str]]) -> list[str]:
    """``src -> target: why`` for every edge that breaks the rules inside ``ops/``."""
    out = []
    for src, target in edges:
        why = ops_problem(src, target)
        if why is not None:
            out.append(f"{src} -> {target}: {why}")
    return out


def test_features_use_the_engine_and_each_others_packages_only() -> None:
    bad = []
    for path in sources():
        for line, target in all_imports(path):
            why = ops_problem(module_name(path), target)
            if why is not None:
                bad.append(f"{path.relative_to(REPO)}:{line}: {why}")
    assert bad == [], "imports against the rules inside ops/ (docs/design.md):\n" + "\n".join(bad)


def test_the_ops_rules_catch_a_feature_reaching_into_another() -> None:
    """The checker itself, on synthetic imports and on a module written to disk."""
    assert ops_room("slatelib.ops.engine._task") == "engine"
    assert ops_room("slatelib.ops.clone") == "clone" and ops_room("slatelib.ops") is None
    assert ops_problems([("slatelib.ops.rescale.x", "slatelib.ops.compaction.run")]) == [
        "slatelib.ops.rescale.x -> slatelib.ops.compaction.run: a private module of feature "
        "'compaction' (slatelib.ops.compaction.run; import slatelib.ops.compaction)"]
    bad = [("slatelib.ops.export.scan", "slatelib.ops.engine._input"),
           ("slatelib.ops.engine._runner", "slatelib.ops.compaction"),
           ("slatelib.spark.export", "slatelib.ops.engine._split"),
           ("slatelib.jobs.compact", "slatelib.ops.engine._task"),
           ("slatelib.ops.rescale.targets", "slatelib.ops.gc.clone")]
    assert len(ops_problems(bad)) == len(bad)
    good = [("slatelib.ops.rescale.targets", "slatelib.ops.compaction"),
            ("slatelib.ops.rescale.targets", "slatelib.ops.clone"),
            ("slatelib.ops.export.scan", "slatelib.ops.engine"),
            ("slatelib.ops.compaction.run", "slatelib.ops.compaction.commit"),
            ("slatelib.ops.engine._execute", "slatelib.ops.engine._input"),
            ("slatelib.spark.datasource", "slatelib.ops.export.scan"),
            ("slatelib.ops.rescale.job", "slatelib.core.manifest")]
    assert ops_problems(good) == []
    fake = REPO / "slatelib" / "ops" / "rescale" / "x.py"
    fake_src = ("from typing import TYPE_CHECKING\nfrom ..compaction import run\n"
                "if TYPE_CHECKING:\n    from slatelib.ops.engine._task import TaskView\n")
    found = [t for _, t in all_imports(fake, fake_src)]
    assert "slatelib.ops.compaction.run" in found and "slatelib.ops.engine._task" in found
    assert len(ops_problems([("slatelib.ops.rescale.x", t) for t in found])) == 2

