"""The delegate contract: every hook declared once in delegates/api.py with a default, the runtime
probing none, the delegate kinds defined once, and docs/delegates.md's list of hooks in step with the code."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import delegates
import runtime
from delegates import contract, registry
from delegates.api import Delegate, DelegateError, DelegateKernel, DelegateOptions, DelegationSummary, Support
from delegates.kinds import BUILTIN_KINDS, EXTERNAL, DelegateKind
from runtime.interpreter.delegation import RESTORED, CpuStep, DelegateStep, apply_delegates
from runtime.ir.graph import Graph
from runtime.interpreter.api import Interpreter
from runtime.ir.optypes import OpType
from runtime.zoo.builder import GraphBuilder
from sim.soc import SoC
from sim.unit import Scales
from tests.sim_kit import tiny_profile
from tests.source_trees import nodes, tree as parsed

ROOT = Path(runtime.__file__).parent.parent
RUNTIME = Path(runtime.__file__).parent
DELEGATES = Path(delegates.__file__).parent


# -- a delegate written as a user writes one: the two required hooks only ---------------------------


class AddKernel(DelegateKernel):
    def invoke(self, inputs):
        graph = self.partition.graph
        values = {**{t: x.data for t, x in enumerate(graph.tensors) if x.is_constant}, **inputs}
        for i in self.partition.nodes:
            a, b = (values[t] for t in graph.ops[i].inputs)
            values[graph.ops[i].outputs[0]] = a + b
        return {t: values[t] for t in self.partition.outputs}


class AddOnly(Delegate):
    unit = "gpu"

    def is_node_supported(self, op, graph):
        return Support(op.type is OpType.ADD, "ADD only")

    def create_kernel(self, partition):
        return AddKernel(partition)


def add_relu() -> Graph:
    """x + c -> relu: one ADD the delegate takes, one RELU it refuses."""
    b = GraphBuilder("add_relu", seed=3)
    x = b.input("x", (1, 4, 4, 3))
    c = b.const("c", b.rng.normal(0, 1, (1, 4, 4, 3)).astype(np.float32))
    return b.build([b.op(OpType.RELU, [b.op(OpType.ADD, [x, c])])])


@pytest.fixture(scope="module")
def applied():
    """The minimal delegate applied to add_relu, on a small phone: what the hooks are called with."""
    graph, phone = add_relu(), tiny_profile()
    delegation = apply_delegates(graph, [AddOnly()])
    step = next(s for s in delegation.plan if isinstance(s, DelegateStep))
    soc = SoC(phone)
    return SimpleNamespace(graph=graph, phone=phone, kernel=step.kernel, partition=step.partition,
                           gpu=soc.unit("gpu"), dsp=soc.unit("dsp"))


# -- every default, one check per declared hook -------------------------------------------------------


def _raised(fn, *args) -> type | None:
    try:
        fn(*args)
    except Exception as exc:
        return type(exc)
    return None


def _profile_used(a) -> str:
    delegate = AddOnly()
    before = dict(vars(delegate))
    result = delegate.use_profile(a.phone)
    return "nothing changed" if result is None and vars(delegate) == before else "changed"


# hook -> (what its default gives on the minimal delegate, what it must give)
DEFAULTS = {
    "Delegate.name": lambda a: (AddOnly().name, "PythonDelegate"),
    "Delegate.unit": lambda a: (Delegate().unit, "cpu"),
    "Delegate.options": lambda a: (AddOnly().options, DelegateOptions(0, 0)),
    "Delegate.allows_dynamic_tensors": lambda a: (AddOnly().allows_dynamic_tensors, False),
    "Delegate.fp16_dequant_rule": lambda a: (AddOnly().fp16_dequant_rule, False),
    "Delegate.platform_refusal": lambda a: (AddOnly().platform_refusal, None),
    "Delegate.warnings": lambda a: (AddOnly().warnings, ()),
    "Delegate.is_node_supported": lambda a: (Delegate().is_node_supported(a.graph.ops[0], a.graph),
                                             Support(False, "this delegate supports no op")),
    "Delegate.create_kernel": lambda a: (_raised(Delegate().create_kernel, a.partition), DelegateError),
    "Delegate.log_lines": lambda a: (
        AddOnly().log_lines(DelegationSummary(2, 5, 2, 1, ("RELU: no",))),
        ["PythonDelegate delegate: 2 nodes delegated out of 5 nodes with 2 partitions."]),
    "Delegate.fused_nodes": lambda a: (AddOnly().fused_nodes(a.partition), frozenset()),
    "Delegate.absorbed_nodes": lambda a: (AddOnly().absorbed_nodes(a.partition), frozenset()),
    "Delegate.node_units": lambda a: (AddOnly().node_units(a.partition), {}),
    "Delegate.unit_scales": lambda a: (AddOnly().unit_scales(a.gpu), Scales()),
    "Delegate.init_seconds": lambda a: (AddOnly().init_seconds(a.gpu.spec, a.graph), a.gpu.spec.init_s),
    "Delegate.invoke_seconds": lambda a: (AddOnly().invoke_seconds(a.dsp.spec), a.dsp.spec.invoke_s),
    "Delegate.step_seconds": lambda a: (AddOnly().step_seconds(a.dsp.spec), 0.0),
    "Delegate.devices_for": lambda a: (AddOnly().devices_for(a.partition), ()),
    "Delegate.use_profile": lambda a: (_profile_used(a), "nothing changed"),
    "DelegateKernel.mode": lambda a: (a.kernel.mode, None),
    "DelegateKernel.unit": lambda a: (a.kernel.unit, None),
    "DelegateKernel.prepare": lambda a: (DelegateKernel(a.partition).prepare(), None),
    "DelegateKernel.invoke": lambda a: (_raised(DelegateKernel(a.partition).invoke, {}), DelegateError),
}


def test_every_declared_hook_has_a_default_checked_here():
    assert set(DEFAULTS) == {f"{h.owner.__name__}.{h.name}" for h in contract.hooks()}


def test_the_phone_tells_the_unit_defaults_apart(applied):
    # the checks of init_seconds and invoke_seconds above mean something only if the figures are not 0
    assert applied.gpu.spec.init_s == 0.2 and applied.dsp.spec.invoke_s == 300e-6


@pytest.mark.parametrize("hook", sorted(DEFAULTS))
def test_default(hook, applied):
    got, want = DEFAULTS[hook](applied)
    assert got == want


def test_a_delegate_of_two_hooks_runs_on_the_defaults(applied):
    """Charged on the first unit of its kind, as the CPU reference computes, with the unit's own
    init cost, and SimpleDelegate's log line."""
    graph, phone = applied.graph, applied.phone
    it = Interpreter(graph=graph, experimental_delegates=[AddOnly()], device=phone)
    it.allocate_tensors()
    x = np.random.default_rng(0).standard_normal((1, 4, 4, 3)).astype(np.float32)
    it.set_tensor(graph.inputs[0], x)
    it.invoke()
    want = np.maximum(x + graph.tensors[graph.ops[0].inputs[1]].data, 0)
    np.testing.assert_array_equal(it.get_tensor(graph.outputs[0]), want)
    simulation = it.simulation
    assert simulation.delegation.log[0] == ("PythonDelegate delegate: 1 nodes delegated out of 2 nodes "
                                            "with 1 partitions.")
    job = next(j for j in simulation.executor.jobs if getattr(j, "step", None) is not None)
    assert job.unit.name == "gpu" and job.mode.name == "REFERENCE" and job.scales == Scales()
    spans = {iv.name: iv.end - iv.start for iv in simulation.soc.trace.intervals}
    assert spans["PythonDelegate init"] == pytest.approx(applied.gpu.spec.init_s)


def test_hook_docstrings_give_what_when_and_default():
    for hook in contract.hooks():
        assert hook.summary and hook.when and hook.default, hook.name
    # the parse covers every public method the API classes define
    for owner in (Delegate, DelegateKernel):
        methods = {n for n, v in vars(owner).items() if callable(v) and not n.startswith("_")}
        assert methods <= {h.name for h in contract.hooks(owner)}


# -- log lines are the delegate's own -----------------------------------------------------------------


class Logging(AddOnly):
    def __init__(self, lines):
        super().__init__()
        self.lines = lines

    def log_lines(self, summary):
        if isinstance(self.lines, Exception):
            raise self.lines
        return self.lines


def test_log_lines_hook_writes_the_delegate_lines():
    d = apply_delegates(add_relu(), [Logging(("first", "second"))])
    assert d.log == ("first", "second", "Replacing 1 out of 2 node(s) with delegate (PythonDelegate) node, "
                                        "yielding 2 partitions for the whole graph.")


@pytest.mark.parametrize("lines, message", [
    (None, "PythonDelegate log_lines returned None, not a list of str"),
    (["ok", 3], "PythonDelegate log_lines returned list ['ok', 3], not a list of str"),
    (RuntimeError("no log"), "PythonDelegate log_lines: RuntimeError: no log"),
])
def test_a_broken_log_lines_restores_the_cpu_plan(lines, message):
    d = apply_delegates(add_relu(), [Logging(lines)])
    assert d.restored and d.plan == (CpuStep(0), CpuStep(1))
    assert d.log == (message, RESTORED) and d.per_delegate[-1].error == message


# -- the runtime calls hooks, it never probes for them ------------------------------------------------

# Runtime modules that handle delegates and kernels throughout: no getattr/hasattr in them at all.
DELEGATE_MODULES = ("delegation.py", "executor.py", "delegate_invoke.py")
# Names that hold a delegate or a kernel: `delegate`, `step.kernel`, `job.step.delegate`.
HOLDERS = frozenset({"delegate", "kernel"})
# What a probe asks for: a hook by name (or an old undeclared one), or a step's delegate or kernel.
# Attribute names other objects have too (an op's options have a `mode`) are left to HOLDERS.
PROBED = frozenset({h.name for h in contract.hooks()} - {"name", "unit", "mode", "options"}
                   | {"log_style", "delegate", "kernel"})


def _last_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else None


def _particular_class(node: ast.AST) -> bool:
    """A delegate or kernel class other than the API's bases: isinstance against it probes a capability."""
    if isinstance(node, ast.Tuple):
        return any(_particular_class(e) for e in node.elts)
    name = _last_name(node) or ""
    return ((name.endswith("Delegate") and name != "Delegate")
            or (name.endswith("Kernel") and name != "DelegateKernel"))


def probes(source: str, strict: bool = False) -> list[str]:
    """getattr/hasattr calls on a delegate or kernel (any at all when `strict`), and isinstance
    checks against a particular delegate or kernel class, as 'line N: call'."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args):
            continue
        name, args = node.func.id, node.args
        if name in ("getattr", "hasattr"):
            asked = args[1].value if len(args) > 1 and isinstance(args[1], ast.Constant) else None
            hit = strict or _last_name(args[0]) in HOLDERS or asked in PROBED
        else:
            hit = name == "isinstance" and len(args) == 2 and _particular_class(args[1])
        if hit:
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


@pytest.mark.parametrize("code", [
    'getattr(step.delegate, "unit_scales", None)', 'hasattr(kernel, "mode")', 'getattr(step, "delegate", None)',
    'getattr(d, "log_style", "")', 'getattr(x, "init_seconds")', 'getattr(d, "platform_refusal", None)',
    'isinstance(job.step.delegate, NnapiDelegate)',
    'isinstance(k, (UnitKernel, int))',
])
def test_the_scan_finds_probes(code):
    assert probes(code)


def test_the_scan_leaves_other_objects_alone():
    assert not probes('getattr(args, "parser", None)\nhasattr(job, "step")\ngetattr(c.opts, "mode", None)\n'
                      'isinstance(d, Delegate)\nisinstance(kernel, DelegateKernel)')
    assert probes('getattr(args, "parser", None)', strict=True)


def test_the_runtime_never_probes_a_delegate_or_kernel():
    found = {}
    for path in sorted(RUNTIME.rglob("*.py")):
        strict = path.parent == RUNTIME and path.name in DELEGATE_MODULES
        hits = probes(path.read_text(encoding="utf-8"), strict)
        if hits:
            found[str(path.relative_to(ROOT))] = hits
    assert not found, f"probes of delegates or kernels in the runtime: {found}"


def test_the_runtime_uses_only_declared_hooks():
    """Every attribute the runtime reads on a delegate or a kernel (`delegate.X`, `step.kernel.X`)
    is one api.py declares."""
    declared = {"delegate": {h.name for h in contract.hooks(Delegate)},
                "kernel": {h.name for h in contract.hooks(DelegateKernel)}}
    undeclared = []
    for path in sorted(RUNTIME.glob("*.py")):
        for node in nodes(path):
            holder = _last_name(node.value) if isinstance(node, ast.Attribute) else None
            if holder in declared and not node.attr.startswith("__") and node.attr not in declared[holder]:
                undeclared.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    assert not undeclared


# -- delegate kinds are defined once --------------------------------------------------------------------

# benchmark_model's display strings per provider, kept by the command-line modules until their rework
# moves them beside the kinds.
PRESENTATION = {("runtime/cli/common.py", "PROVIDER_NAMES"), ("runtime/cli/common.py", "_PROVIDER_GROUPS"),
                ("runtime/cli/benchmark.py", "_USE_LINES")}


def test_every_list_of_kinds_comes_from_the_one_definition():
    from runtime.cli import listing as cli_listing
    from runtime.cli import tools as cli_tools
    from runtime.calibration import rows as measurements
    from runtime.scenario import load as scenario
    from delegates import table

    assert BUILTIN_KINDS == tuple(k.value for k in DelegateKind)
    assert list(registry.PROVIDERS) == list(DelegateKind)
    assert tuple(registry.BUILTIN) == tuple(registry.CLASSES) == BUILTIN_KINDS
    assert set(registry._SWITCHES.values()) == set(registry._FROM_FLAGS) == {*BUILTIN_KINDS, EXTERNAL}
    assert scenario.DELEGATE_KINDS == (*BUILTIN_KINDS, EXTERNAL)
    assert cli_tools._KINDS is cli_listing._KINDS is BUILTIN_KINDS
    assert set(measurements.DELEGATES) == {"cpu", *BUILTIN_KINDS}
    assert sorted(table.DEFAULT_COLUMNS) == sorted(BUILTIN_KINDS)


def _spelled_lists(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, variable or '') of each literal list, tuple, set or dict keys naming two or more kinds,
    and each comparison with a kind's name that is no unit's name ("gpu" is a unit kind too)."""
    kinds, named = set(BUILTIN_KINDS), {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            named[id(node.value)] = ",".join(_last_name(t) or "" for t in targets)
    found = []
    for node in ast.walk(tree):
        items = (node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set))
                 else [k for k in node.keys if k is not None] if isinstance(node, ast.Dict) else [])
        strings = {e.value for e in items if isinstance(e, ast.Constant) and isinstance(e.value, str)}
        if len(strings & kinds) >= 2:
            found.append((node.lineno, named.get(id(node), "")))
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(isinstance(o, ast.Constant) and o.value in kinds - {"gpu"} for o in operands):
                found.append((node.lineno, ""))
    return found


def test_no_other_module_spells_the_kinds():
    found = []
    for path in sorted([*RUNTIME.rglob("*.py"), *DELEGATES.rglob("*.py")]):
        where = str(path.relative_to(ROOT))
        if where == "delegates/kinds.py":
            continue
        tree = parsed(path)
        found += [f"{where}:{line} {name}" for line, name in _spelled_lists(tree)
                  if (where, name) not in PRESENTATION]
    assert not found, f"delegate kinds spelled outside delegates/kinds.py: {found}"


def test_the_kind_scan_finds_spelled_lists():
    assert _spelled_lists(ast.parse('KINDS = ("gpu", "nnapi")\nif style == "coreml": pass'))
    assert not _spelled_lists(ast.parse('UNITS = {"gpu": 1, "dsp": 2}\nif kind == "gpu": pass'))


# -- docs/delegates.md lists the hooks as api.py declares them ----------------------------------------------------

_BLOCK = re.compile(r"<!-- hooks: generated from delegates/api.py by `python -m delegates.contract` -->\n"
                    r"(.*?)\n<!-- /hooks -->", re.DOTALL)


def test_delegates_page_lists_every_hook_as_api_declares_it():
    page = (ROOT / "docs" / "delegates.md").read_text(encoding="utf-8")
    writing = page[page.index("## Writing a delegate"):page.index("## When a delegate fails")]
    block = _BLOCK.search(writing)
    assert block, "docs/delegates.md's 'Writing a delegate' has no generated list of hooks"
    assert block.group(1) == contract.markdown(), "regenerate it: python -m delegates.contract"
    for hook in contract.hooks():
        assert f"- `{hook.name}" in block.group(1)
