"""The house's floors, read from the source: no import cycle between packages or between modules (a package's
__init__ counting as one), and no floor imports one above it.

Every import counts, a late one inside a function as much as one at the top: a late import still
ties the lower package to the higher one."""

from __future__ import annotations

import ast
import pathlib
import sys

import pytest

from tests.source_trees import nodes, tree

ROOT = pathlib.Path(__file__).resolve().parent.parent
TOP = ("runtime", "sim", "delegates")

# The floors, lowest first (docs/architecture.md): a package may import only packages on lower
# floors. The IR imports nothing; sim and the kernels build on it; delegates on those; the zoo's
# builders and quantizers on the kernels; the test kit on the zoo. Then runtime's stages in the
# order the data goes: limits; the model file, the scenario file and the report renderers; the
# interpreter; what a run measured; calibration, evaluation, conformance and sweeps; the CLI.
FLOORS = {
    "runtime.ir": 0,
    "sim": 1, "sim.profiles": 1, "runtime.ops": 1,
    "delegates": 2, "runtime.zoo": 2,
    "runtime.testing": 3,
    "runtime.limits": 4,
    "runtime.model": 5, "runtime.scenario": 5, "runtime.report": 5,
    "runtime.interpreter": 6,
    "runtime.measure": 7,
    "runtime.calibration": 8, "runtime.evaluation": 8, "runtime.conformance": 8, "runtime.sweep": 8,
    "runtime.cli": 9,
    "runtime": 10,
}


def _modules() -> dict[str, pathlib.Path]:
    mods = {}
    for top in TOP:
        for path in (ROOT / top).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            mods[".".join(parts)] = path
    return mods


def _imported(module: str, path: pathlib.Path) -> set[str]:
    """Dotted names of the project's modules and packages that `module` imports anywhere."""
    names: set[str] = set()
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    for node in nodes(path):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[:len(package) - node.level + 1] + ([base] if base else []))
            names.add(base)
            names.update(f"{base}.{a.name}" for a in node.names)
    return {n for n in names if n.split(".")[0] in TOP}


def package_of(name: str, packages: set[str]) -> str:
    """The deepest package holding a module (or the package itself)."""
    while name not in packages:
        name = name.rpartition(".")[0]
    return name


def package_edges() -> dict[tuple[str, str], str]:
    """(importer's package, imported package) -> one import that makes the edge, for the message."""
    mods = _modules()
    packages = {m for m, p in mods.items() if p.name == "__init__.py"}
    edges: dict[tuple[str, str], str] = {}
    for module, path in mods.items():
        here = package_of(module, packages)
        for name in _imported(module, path):
            there = package_of(name, packages)
            if there != here:
                edges.setdefault((here, there), f"{module} imports {name}")
    return edges


def find_cycle(edges) -> list[str] | None:
    """One cycle of the directed graph, as a closed path of nodes, or None."""
    graph: dict[str, list[str]] = {}
    for a, b in edges:
        graph.setdefault(a, []).append(b)
    state: dict[str, int] = {}  # 1: on the current path, 2: finished
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_cycle_finder_finds_a_cycle_and_passes_a_dag():
    assert find_cycle({("a", "b"): "", ("b", "c"): "", ("c", "a"): ""}) == ["a", "b", "c", "a"]
    assert find_cycle({("a", "b"): "", ("b", "c"): "", ("a", "c"): ""}) is None


def test_no_import_cycle_between_packages():
    edges = package_edges()
    cycle = find_cycle(edges)
    assert cycle is None, "import cycle: " + "; ".join(edges[a, b] for a, b in zip(cycle, cycle[1:]))


def _module_targets(module: str, path: pathlib.Path, mods: dict[str, pathlib.Path]) -> dict[str, int]:
    """The project's modules `module` imports anywhere, each with a line that imports it. A package's
    __init__ is a module of its own (named as the package); `from pkg import name` points at the
    submodule pkg.name when there is one, else at pkg's __init__."""
    targets: dict[str, int] = {}
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    for node in nodes(path):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[:len(package) - node.level + 1] + ([base] if base else []))
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
        else:
            continue
        for name in names:
            while name and name not in mods:  # `import pkg.mod.attr`-like spellings: the deepest module named
                name = name.rpartition(".")[0]
            if name and name != module:
                targets.setdefault(name, node.lineno)
    return targets


def module_edges() -> dict[tuple[str, str], str]:
    """(importer, imported module) -> where the import is, for the message."""
    mods = _modules()
    edges: dict[tuple[str, str], str] = {}
    for module, path in mods.items():
        for name, line in _module_targets(module, path, mods).items():
            edges[module, name] = f"{path.relative_to(ROOT)}:{line} imports {name}"
    return edges


def test_module_edges_count_a_package_init_as_a_module(tmp_path, monkeypatch):
    # A package whose __init__ imports a module that imports the package back: the cycle custom ops
    # registered on import of runtime.ops once made (runtime/ops/__init__.py <-> opcheck_nn.py).
    pkg = tmp_path / "runtime" / "kit"
    pkg.mkdir(parents=True)
    (tmp_path / "runtime" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("from runtime.kit import part\nTABLE = {}\n")
    (pkg / "part.py").write_text("def f():\n    from runtime.kit import TABLE\n    return TABLE\n")
    (pkg / "other.py").write_text("from runtime.kit import part\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    edges = module_edges()
    assert set(edges) == {("runtime.kit", "runtime.kit.part"), ("runtime.kit.part", "runtime.kit"),
                          ("runtime.kit.other", "runtime.kit.part")}
    assert find_cycle(edges) in (["runtime.kit", "runtime.kit.part", "runtime.kit"],
                                 ["runtime.kit.part", "runtime.kit", "runtime.kit.part"])


def test_no_import_cycle_between_modules():
    edges = module_edges()
    cycle = find_cycle(edges)
    assert cycle is None, "import cycle: " + "; ".join(edges[a, b] for a, b in zip(cycle, cycle[1:]))


def test_every_package_has_a_floor():
    packages = {p for edge in package_edges() for p in edge}
    assert packages <= set(FLOORS), f"give these packages a floor: {sorted(packages - set(FLOORS))}"


@pytest.mark.parametrize("edge", sorted(package_edges()), ids=lambda e: f"{e[0]}->{e[1]}")
def test_no_floor_imports_a_higher_one(edge):
    low, high = edge
    assert FLOORS[high] < FLOORS[low], f"{package_edges()[edge]}: {low} is on floor {FLOORS[low]}, {high} on {FLOORS[high]}"


def test_the_ground_floor_imports_nothing_else():
    # `runtime/__init__.py` runs on every import of the IR, so it must import nothing either.
    mods = _modules()
    for module in [m for m in mods if m.startswith("runtime.ir")] + ["runtime"]:
        outside = {n for n in _imported(module, mods[module]) if not n.startswith("runtime.ir")}
        assert not outside, f"{module} imports {sorted(outside)}"


def private_imports() -> list[str]:
    """`from M import _name` anywhere in the project's packages, tests and benchmarks: what one module
    shares with another is a public name of the module that owns it."""
    found = []
    for top in TOP + ("tests", "benchmarks"):
        for path in sorted((ROOT / top).rglob("*.py")):
            for node in nodes(path):
                if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in TOP + ("tests",):
                    found += [f"{path.relative_to(ROOT)}:{node.lineno} imports {a.name} from {node.module}"
                              for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
    return found


def test_no_module_imports_another_modules_private_name():
    assert private_imports() == []


# Where a module may still ask an object what it has: none today. A record that crosses modules is
# a named type told apart by isinstance (or an Enum field); an entry here needs a reason next to it
# (say, feature-testing a third-party object the project does not own).
HASATTR_ALLOWED: dict[str, str] = {}


def hasattr_calls() -> list[str]:
    """`hasattr(...)` calls in the project's packages, outside HASATTR_ALLOWED (path:line)."""
    found = []
    for top in TOP:
        for path in sorted((ROOT / top).rglob("*.py")):
            for node in nodes(path):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "hasattr"):
                    where = f"{path.relative_to(ROOT)}:{node.lineno}"
                    if where not in HASATTR_ALLOWED:
                        found.append(where)
    return found


def test_records_are_told_apart_by_type_not_by_hasattr():
    assert hasattr_calls() == [], "tell records apart with isinstance (named types), not hasattr"


def top_level_classes() -> dict[str, list[str]]:
    """Class name -> the modules of the project's packages that define a class of that name at top level."""
    found: dict[str, list[str]] = {}
    for top in TOP:
        for path in sorted((ROOT / top).rglob("*.py")):
            for node in tree(path).body:
                if isinstance(node, ast.ClassDef):
                    found.setdefault(node.name, []).append(str(path.relative_to(ROOT)))
    return found


def test_one_class_name_means_one_thing():
    twice = {name: paths for name, paths in top_level_classes().items() if len(paths) > 1}
    assert twice == {}, f"classes of the same name in different modules: {twice}"


def sim_shadows() -> list[str]:
    """Local names and parameters called `sim`, which hide the `sim` package (path:line)."""
    found = []
    for top in TOP + ("tests", "benchmarks"):
        for path in sorted((ROOT / top).rglob("*.py")):
            for node in nodes(path):
                bound = ((isinstance(node, ast.Name) and node.id == "sim" and isinstance(node.ctx, ast.Store))
                         or (isinstance(node, ast.arg) and node.arg == "sim"))
                if bound:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_no_local_name_hides_the_sim_package():
    assert sim_shadows() == []
