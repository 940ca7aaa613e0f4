"""The suite passes on any host, however busy: no test asserts on the host's clock, read from the source.

A test that asserts `time.monotonic() - start < 5` fails on a loaded machine although nothing is wrong;
such a test counts the work instead (calls, profile reads, simulated events) or runs on a fake clock.
A process's timeout may guard against a hang, never decide a pass: one under HANG_GUARD_S is refused."""

from __future__ import annotations

import ast
import pathlib
import textwrap

TESTS = pathlib.Path(__file__).resolve().parent
CLOCKS = frozenset(f"{name}{ns}" for name in ("time", "monotonic", "perf_counter", "process_time", "thread_time")
                   for ns in ("", "_ns")) | {"now", "utcnow"}   # time.*, datetime.now()
# A host duration handed back by a helper (`outcome, seconds = worker.run(case)`) cannot be traced to a
# clock here; a bare name of this kind held under a number is taken for one.
DURATIONS = frozenset({"seconds", "elapsed", "took", "wall", "duration"})
PROCESS_WAITS = frozenset({"run", "check_output", "check_call", "call", "communicate", "wait"})
HANG_GUARD_S = 60


def _reads_clock(node: ast.AST) -> bool:
    """A call of a host clock anywhere in the expression (time.monotonic(), perf_counter(), datetime.now())."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            f = sub.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if name in CLOCKS:
                return True
    return False


def _dotted(node: ast.AST) -> str:
    """`start`, `self.start`, `out.seconds`; "" for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    return ""


def _own_nodes(scope: ast.AST):
    """The nodes of a module or function, not those of the functions defined in it (their own scopes)."""
    stack = list(scope.body)
    while stack:
        node = stack.pop()
        yield node
        stack.extend(child for child in ast.iter_child_nodes(node)
                     if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)))


def _targets(target: ast.AST) -> set[str]:
    """The names an assignment binds (`a, b = ...` binds both; `out.seconds = ...` binds out.seconds)."""
    if isinstance(target, (ast.Tuple, ast.List)):
        return {name for element in target.elts for name in _targets(element)}
    return {_dotted(target)} - {""}


def _uses(node: ast.AST, tainted: set[str]) -> bool:
    return any(_dotted(sub) in tainted for sub in ast.walk(node) if isinstance(sub, (ast.Name, ast.Attribute)))


def _clock_names(scope: ast.AST) -> set[str]:
    """Names in `scope` that hold a host time or a difference of them (`start = time.monotonic()`,
    `elapsed = time.perf_counter() - start`), followed through assignments until nothing changes."""
    assigns = [(n.targets if isinstance(n, ast.Assign) else [n.target], n.value) for n in _own_nodes(scope)
               if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and n.value is not None]
    tainted: set[str] = set()
    while True:
        more = {name for targets, value in assigns if _reads_clock(value) or _uses(value, tainted)
                for target in targets for name in _targets(target)} - tainted
        if not more:
            return tainted
        tainted |= more


def _bounds_a_duration(test: ast.AST) -> bool:
    """`seconds < 20`, `elapsed <= 2.0`: a bare duration name under a number."""
    return any(isinstance(c, ast.Compare) and isinstance(c.left, ast.Name) and c.left.id in DURATIONS
               and all(isinstance(op, (ast.Lt, ast.LtE)) for op in c.ops)
               and all(isinstance(r, ast.Constant) and isinstance(r.value, (int, float)) for r in c.comparators)
               for c in ast.walk(test))


def wall_clock_asserts(source: str, filename: str = "<test>") -> list[str]:
    """`FILE:LINE: ...` for every assert on a host time, and every process wait whose timeout is
    short enough to decide a test (under HANG_GUARD_S)."""
    tree = ast.parse(source, filename)
    found = []
    for scope in [tree] + [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]:
        tainted = _clock_names(scope)
        for node in _own_nodes(scope):
            if isinstance(node, ast.Assert) and (_reads_clock(node.test) or _uses(node.test, tainted)
                                                 or _bounds_a_duration(node.test)):
                found.append(f"{filename}:{node.lineno}: asserts on the host's clock")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in PROCESS_WAITS:
                for kw in node.keywords:
                    if (kw.arg == "timeout" and isinstance(kw.value, ast.Constant)
                            and isinstance(kw.value.value, (int, float)) and kw.value.value < HANG_GUARD_S):
                        found.append(f"{filename}:{node.lineno}: a process timeout of {kw.value.value} s "
                                     f"(a hang guard is at least {HANG_GUARD_S} s)")
    return sorted(set(found))


def test_no_test_asserts_on_the_host_clock():
    found = [line for path in sorted(TESTS.rglob("*.py"))
             for line in wall_clock_asserts(path.read_text(encoding="utf-8"), str(path.relative_to(TESTS.parent)))]
    assert not found, "count the work or use a fake clock instead:\n" + "\n".join(found)


BAD = {
    "direct": """
        def test_fast():
            start = {clock}()
            run()
            assert {clock}() - start < 5
        """.format(clock="time.monotonic"),   # filled in, so that grep finds no such assert in tests/
    "through a name": """
        def test_fast():
            t0 = perf_counter()
            run()
            elapsed = perf_counter() - t0
            took = elapsed / 10
            assert took < 0.02
        """,
    "a short process timeout": """
        def test_cli():
            done = subprocess.run(["dtb"], timeout=20)
            assert done.returncode == 0
        """,
    "a helper's duration": """
        def check(worker, case):
            outcome, detail, seconds = worker.run(case)
            assert outcome == "ok" and seconds < 20
        """,
    "a datetime": """
        def test_quick():
            a = datetime.now()
            run()
            assert (datetime.now() - a).total_seconds() < 1
        """,
}
GOOD = """
    def test_counted(monkeypatch):
        calls = []
        monkeypatch.setattr(mod, "load", lambda p: calls.append(p))
        start = time.monotonic()          # a deadline for a polling loop: not asserted
        while not ready() and time.monotonic() < start + 120:
            time.sleep(0.05)
        assert len(calls) == 1
        done = subprocess.run(["dtb"], timeout=300)
        assert done.returncode == 0 and fake.monotonic is not None
    """


def test_the_check_finds_each_kind_of_wall_clock_assert():
    for kind, source in BAD.items():
        assert len(wall_clock_asserts(textwrap.dedent(source))) == 1, kind
    assert wall_clock_asserts(textwrap.dedent(GOOD)) == []
