"""Explicit plugins: a scenario naming a module path imports and runs nothing unless the user allows it,
and even then only a factory that declares a Delegate is called; installed plugins load by entry point."""

from __future__ import annotations

import sys
import textwrap

import pytest

from delegates.external import PLUGIN_GROUP, load_external, load_plugin, plugin_names
from runtime.cli.main import main
from runtime.ir.errors import DelegateError, ScenarioError
from runtime.sweep.runner import run_file
from runtime.scenario.load import load_scenario

HEAD = "device: pixel4\nmodel: {zoo: tiny_cnn, args: {resolution: 16}}\nruns: {warmup: 0, count: 1}\n"


def scenario(tmp_path, delegates: str, name: str = "s.yaml"):
    path = tmp_path / name
    path.write_text(HEAD + "delegates:\n" + textwrap.indent(delegates, "  "))
    return path


def system_scenario(tmp_path):
    marker = tmp_path / "MARKER"
    return scenario(tmp_path, f"- external: {{path: 'os:system', options: {{command: 'touch {marker}'}}}}\n"), marker


def fails(capsys, *argv) -> str:
    assert main(list(argv)) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    return err


# -- module paths in scenarios ---------------------------------------------------------------------


def test_os_system_is_refused_at_load_and_runs_nothing(tmp_path, capsys):
    path, marker = system_scenario(tmp_path)
    with pytest.raises(ScenarioError, match=r"s\.yaml:5: delegates\[0\]\.external\.path: 'os:system' would import"):
        load_scenario(path)
    with pytest.raises(ScenarioError, match="--allow-external-delegates"):
        run_file(path, tmp_path / "out")
    err = fails(capsys, "run", str(path), "-o", str(tmp_path / "out"))
    assert "allow-external-delegates" in err
    assert not marker.exists() and not (tmp_path / "out").exists()


def test_os_system_is_not_called_even_when_external_delegates_are_allowed(tmp_path, capsys):
    path, marker = system_scenario(tmp_path)
    load_scenario(path, allow_external_delegates=True)   # loading imports nothing
    with pytest.raises(ScenarioError, match="does not declare that it makes a Delegate"):
        run_file(path, tmp_path / "out", allow_external_delegates=True)
    err = fails(capsys, "run", str(path), "-o", str(tmp_path / "out"), "--allow-external-delegates")
    assert "'os:system' does not declare that it makes a Delegate, so it is not called" in err
    assert not marker.exists() and not (tmp_path / "out").exists()


def test_a_refused_module_path_is_never_imported(tmp_path, monkeypatch):
    marker = tmp_path / "IMPORTED"
    (tmp_path / "nosy_plugin.py").write_text(f"open({str(marker)!r}, 'w').close()\ndef make():\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    path = scenario(tmp_path, "- external: {path: 'nosy_plugin:make'}\n")
    with pytest.raises(ScenarioError, match="nosy_plugin:make"):
        run_file(path, tmp_path / "out")
    assert "nosy_plugin" not in sys.modules and not marker.exists()


def test_a_declared_factory_returning_no_delegate_is_refused_before_its_result_is_used(tmp_path, monkeypatch):
    marker = tmp_path / "USED"
    (tmp_path / "liar_plugin.py").write_text(textwrap.dedent(f"""
        from delegates.api import Delegate

        class NotADelegate:
            name = "liar"
            def __getattr__(self, attr):
                open({str(marker)!r}, "w").close()
                raise AttributeError(attr)
            def is_node_supported(self, op, graph):
                open({str(marker)!r}, "w").close()

        def make() -> Delegate:
            return NotADelegate()
        """))
    monkeypatch.syspath_prepend(str(tmp_path))
    path = scenario(tmp_path, "- external: {path: 'liar_plugin:make'}\n")
    with pytest.raises(ScenarioError, match="returned NotADelegate, not a Delegate"):
        run_file(path, tmp_path / "out", allow_external_delegates=True)
    assert not marker.exists()


def test_an_allowed_declared_factory_runs(tmp_path):
    path = scenario(tmp_path, "- external: {path: 'tests.external_delegates:make', options: {threshold: 0}}\n")
    results = run_file(path, tmp_path / "out", allow_external_delegates=True)
    assert results["records"][0]["delegates"][0]["name"] == "CountingDelegate"


def test_command_line_factories_need_no_declaration():
    # the user typed the path: a factory without annotations is called, and its result checked after
    assert load_external("tests.external_delegates:untyped").name == "CountingDelegate"
    with pytest.raises(DelegateError, match="returned int, not a Delegate"):
        load_external("tests.external_delegates:not_a_delegate")


# -- installed plugins -----------------------------------------------------------------------------


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """A distribution on sys.path declaring one delegate plugin, as `pip install` would leave it."""
    info = tmp_path / "site" / "fake_delegate_plugin-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-delegate-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{PLUGIN_GROUP}]\ncounting = tests.external_delegates:make\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    return "counting"


def test_installed_plugins_are_listed_and_loaded_by_name(installed):
    assert installed in plugin_names()
    delegate = load_plugin(installed, {"threshold": "2"})
    assert (delegate.name, delegate.threshold) == ("CountingDelegate", 2)
    assert load_external(installed).name == "CountingDelegate"   # --external_delegate_path=counting
    with pytest.raises(DelegateError, match="no delegate plugin 'countin'"):
        load_plugin("countin")


def test_a_scenario_may_name_an_installed_plugin_without_any_flag(installed, tmp_path):
    path = scenario(tmp_path, f"- external: {{entry_point: {installed}, options: {{threshold: 0}}}}\n")
    (cell,) = load_scenario(path)
    assert cell.delegates[0].entry_point == installed
    results = run_file(path, tmp_path / "out")
    assert results["records"][0]["delegates"][0]["name"] == "CountingDelegate"


def test_an_unknown_plugin_name_is_a_scenario_error(installed, tmp_path):
    path = scenario(tmp_path, "- external: {entry_point: countng}\n")
    with pytest.raises(ScenarioError, match=r"s\.yaml:5: delegates\[0\]\.external\.entry_point: no installed "
                                            r"delegate plugin 'countng'; did you mean 'counting'\?"):
        load_scenario(path)


def test_benchmark_takes_a_plugin_name(installed, capsys):
    assert main(["benchmark", "--zoo", "tiny_cnn", "--zoo_args", "resolution=16", "--num_runs", "1",
                 f"--external_delegate_path={installed}", "--external_delegate_options", "threshold:0"]) == 0
    assert "EXTERNAL delegate" in capsys.readouterr().out
