"""pytest plugin: `pytest --delegate-conformance=pkg.mod:factory` runs the conformance kit, one item per case.

Registered as the pytest11 entry point `delegate_conformance`; it adds its options and does
nothing else unless --delegate-conformance is given.
"""

from __future__ import annotations

import pytest

from runtime.conformance.report import CaseResult, Verdict

_RUN = pytest.StashKey()
_RESULTS = pytest.StashKey()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("delegate-conformance", "delegate conformance kit")
    group.addoption("--delegate-conformance", metavar="MODULE:FACTORY", default=None,
                    help="run the conformance kit on the delegate this factory makes")
    group.addoption("--conformance-device", default="generic", help="phone profile (default: generic)")
    group.addoption("--conformance-examples", type=int, default=10,
                    help="generated instances per op and dtype (default: 10)")
    group.addoption("--conformance-seed", type=int, default=0, help="generation seed (default: 0)")
    group.addoption("--conformance-ops", default=None, help="comma-separated op types (default: all)")


def pytest_configure(config: pytest.Config) -> None:
    path = config.getoption("delegate_conformance")
    if not path:
        return
    from runtime.conformance.kit import ConformanceRun

    ops = config.getoption("conformance_ops")
    try:
        config.stash[_RUN] = ConformanceRun(path, config.getoption("conformance_device"),
                                            config.getoption("conformance_examples"),
                                            config.getoption("conformance_seed"),
                                            ops.split(",") if ops else None)
    except Exception as exc:  # a bad factory path, device or op: a usage error, not a crash
        raise pytest.UsageError(f"--delegate-conformance: {exc}") from None
    config.stash[_RESULTS] = []


class ConformanceFailure(Exception):
    """A failing case; its CaseResult is shown as the failure."""

    def __init__(self, result: CaseResult):
        super().__init__(result.message)
        self.result = result


class ConformanceItem(pytest.Item):
    """One conformance case: a planned instance, a lifecycle case (`planned` is then a FailAt) or a
    broken hook of the contract (`planned` is then its failed CaseResult)."""

    def __init__(self, *, planned, **kwargs):
        super().__init__(**kwargs)
        self.planned = planned

    def runtest(self) -> None:
        from runtime.conformance.lifecycle import FailAt

        run = self.config.stash[_RUN]
        if isinstance(self.planned, CaseResult):  # a contract case, judged when collected
            result = self.planned
        elif isinstance(self.planned, FailAt):
            result = run.lifecycle(self.planned)
        else:
            result = run.execute(self.planned)
        self.config.stash[_RESULTS].append(result)
        if result.verdict is Verdict.FAIL:
            raise ConformanceFailure(result)
        if result.verdict is Verdict.REJECTED:
            pytest.skip(f"rejected by the delegate: {result.message}")

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, ConformanceFailure):
            r = excinfo.value.result
            error = (f"error {r.max_error:.3g} {r.unit}, tolerance {r.tolerance:.3g}"
                     if r.max_error is not None else "")
            return "\n".join(line for line in (r.message, f"{r.op} {r.dtype} {r.shapes} {r.options}".rstrip(),
                                               f"mode {r.mode} {error}".rstrip() if r.mode or error else "")
                             if line)
        return super().repr_failure(excinfo, style)

    def reportinfo(self):
        return self.path, None, f"delegate conformance: {self.name}"


class ConformanceCollector(pytest.Collector):
    """The parent of the conformance items, so their ids read 'delegate_conformance::ADD[int8-0]'."""

    def collect(self):
        return []


def _item_name(name: str) -> str:
    """'CONV_2D/int8/2' -> 'CONV_2D[int8-2]', 'lifecycle/prepare' -> 'lifecycle[prepare]'."""
    head, _, rest = name.partition("/")
    return f"{head}[{rest.replace('/', '-')}]"


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list) -> None:
    if _RUN not in config.stash:
        return
    from runtime.conformance.lifecycle import FailAt

    run = config.stash[_RUN]
    try:
        planned = run.plan()
        broken = run.contract()
    except Exception as exc:
        raise pytest.UsageError(f"--delegate-conformance: {exc}") from None
    parent = ConformanceCollector.from_parent(session, name="delegate_conformance", nodeid="delegate_conformance")
    added = [ConformanceItem.from_parent(parent, name=_item_name(p.name), planned=p) for p in planned]
    if any(p.supported for p in planned):
        added.extend(ConformanceItem.from_parent(parent, name=f"lifecycle[{at.value}]", planned=at)
                     for at in FailAt)
    added.extend(ConformanceItem.from_parent(parent, name=_item_name(r.name), planned=r) for r in broken)
    # Reported like any collected items, so "collected N items" and other plugins count them.
    config.hook.pytest_collectreport(report=pytest.CollectReport(parent.nodeid, "passed", None, added))
    items.extend(added)


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    if _RUN not in config.stash:
        return
    run = config.stash[_RUN]
    results = config.stash[_RESULTS]
    counts = {v: sum(r.verdict is v for r in results) for v in Verdict}
    terminalreporter.section("delegate conformance")
    terminalreporter.write_line(
        f"{run.fresh().name} on {run.device} (seed {run.seed}, {run.examples} examples per op): "
        f"{counts[Verdict.PASS]} passed, {counts[Verdict.FAIL]} failed, {counts[Verdict.REJECTED]} rejected; "
        f"{len(run.unclaimed)} op/dtype pairs not claimed")
    for note in run.notes:
        terminalreporter.write_line(f"Note: {note}")
