"""Nothing outside the output folder: a scenario's delegate cache folders (GPU serialization_dir, NNAPI and
QNN cache_dir) are relative to -o and may not leave it (absolute, `..`, `~`, a symlink) and its model_token
is a plain file name, unless --allow-paths-outside-output; on the command line and in the API the token
may hold no path separator. Generated folders and tokens are refused at their line or stay inside -o."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from delegates.api import DelegateError
from delegates.compile_cache import MAX_TOKEN, is_warm, store
from runtime.cli.main import main
from runtime.ir.errors import ScenarioError
from runtime.scenario.load import scenario_from_text
from runtime.sweep.runner import run_file
from runtime.zoo import build

# (delegate, its folder key) as a scenario names them; QNN on the Pixel 4's Snapdragon 855
DELEGATES = [("gpu", "serialization_dir"), ("nnapi", "cache_dir"), ("qnn", "cache_dir")]


def scenario(delegate: str, options: str, count: int = 1) -> str:
    return (f"device: pixel4\nmodel: {{zoo: tiny_cnn}}\ndelegates:\n  - {delegate}: {{{options}}}\n"
            f"runs: {{count: {count}, warmup: 0}}\ntiming_only: true\n")


def quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def files_under(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


# ---- at load: the key's line, or the flag

@pytest.mark.parametrize("delegate, key", DELEGATES)
@pytest.mark.parametrize("folder, why", [("/tmp/cache", "is absolute"), ("../cache", "climbs out with '..'"),
                                         ("a/../../b", "climbs out"), ("~/cache", "home folder"),
                                         ("C:\\cache", "is absolute"), ("\\\\server\\share", "is absolute")])
def test_a_cache_folder_that_leaves_the_output_folder_is_refused_at_its_line(tmp_path, delegate, key, folder, why):
    source = tmp_path / "s.yaml"
    with pytest.raises(ScenarioError) as info:
        scenario_from_text(scenario(delegate, f"{key}: {quoted(folder)}, model_token: m"), source)
    message = str(info.value)
    assert message.startswith(f"{source}:4: delegates[0].{delegate}.{key}: must be a folder inside the output "
                              f"folder (-o)") and why in message and "--allow-paths-outside-output" in message
    assert "\n" not in message
    (cell,) = scenario_from_text(scenario(delegate, f"{key}: {quoted(folder)}"), source, allow_paths_outside_output=True)
    assert dict(cell.delegates[0].options)[key] == folder


@pytest.mark.parametrize("token", ["a/b", "../m", "a\\b", "..", ".", "x\ty", "t" * (MAX_TOKEN + 1)])
def test_a_model_token_that_is_not_a_plain_file_name_is_refused(tmp_path, token):
    source = tmp_path / "s.yaml"
    with pytest.raises(ScenarioError, match=rf"^{re.escape(str(source))}:4: delegates\[0\]\.gpu\.model_token: must be "
                                            r"a plain file name: "):
        scenario_from_text(scenario("gpu", f"serialization_dir: c, model_token: {quoted(token)}"), source)


def test_external_delegate_options_are_held_to_the_same_rule(tmp_path):
    text = ("device: pixel4\nmodel: {zoo: tiny_cnn}\ndelegates:\n  - external:\n      path: 'x.y:z'\n"
            "      options: {cache_dir: /etc}\n")
    with pytest.raises(ScenarioError, match=r":6: delegates\[0\]\.external\.options\.cache_dir: must be a folder"):
        scenario_from_text(text, tmp_path / "s.yaml", allow_external_delegates=True)


SEGMENTS = st.sampled_from(["a", "b.c", "..", ".", "", "~", "~x", "/", "\\", "C:", "c:", "\0", " ", "x..y", "..."])


@settings(max_examples=300, deadline=None, database=None)
@given(parts=st.lists(SEGMENTS, min_size=1, max_size=5), sep=st.sampled_from(["/", "\\"]),
       which=st.sampled_from(DELEGATES))
def test_generated_folders_are_refused_in_one_line_or_stay_inside_the_output_folder(parts, sep, which):
    delegate, key = which
    folder = sep.join(parts)
    source = Path("/nonexistent/s.yaml")
    try:
        (cell,) = scenario_from_text(scenario(delegate, f"{key}: {quoted(folder)}"), source)
    except ScenarioError as exc:
        assert str(exc).startswith(f"{source}:") and "\n" not in str(exc)
        return
    # what loads, joined to any output folder, stays inside it (no symlinks here: the run checks those)
    out = Path("/o/out")
    inside = Path(os.path.normpath(out / dict(cell.delegates[0].options)[key]))
    assert inside == out or out in inside.parents, folder


# ---- a run writes its caches inside -o

def test_a_run_puts_relative_cache_folders_inside_the_output_folder(tmp_path, monkeypatch):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)        # a relative folder once meant the current directory
    path = tmp_path / "s.yaml"
    path.write_text(scenario("gpu", "serialization_dir: cache, model_token: net"))
    out = tmp_path / "out"
    run_file(path, out)
    cached = files_under(out / "cache")
    assert len(cached) == 1 and next(iter(cached)).name.startswith("net.gpu.")
    assert not files_under(cwd)
    run_file(path, out, overwrite=True, resume=False)   # a second run finds it warm, still inside -o
    assert files_under(out / "cache") == cached


def test_a_symlink_inside_the_output_folder_does_not_lead_the_cache_out(tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / "cache").symlink_to(outside, target_is_directory=True)
    path = tmp_path / "s.yaml"
    path.write_text(scenario("nnapi", "cache_dir: cache/deeper, model_token: m"))
    with pytest.raises(ScenarioError, match=r"nnapi\.cache_dir: .* leads outside the output folder .*through a symlink"):
        run_file(path, out)
    assert not files_under(outside)
    run_file(path, out, allow_paths_outside_output=True)    # the user's call
    assert len(files_under(outside)) == 1


def test_the_command_line_refuses_in_one_line_and_the_flag_allows(tmp_path, capsys):
    elsewhere = tmp_path / "elsewhere"
    path = tmp_path / "s.yaml"
    path.write_text(scenario("gpu", f"serialization_dir: {quoted(str(elsewhere))}, model_token: net"))
    out = tmp_path / "out"
    for argv in (["run", str(path), "-o", str(out)], ["run", str(path), "--check"]):
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err and f"{path}:4:" in err, err
    assert not elsewhere.exists() and not out.exists()
    assert main(["run", str(path), "-o", str(out), "--allow-paths-outside-output"]) == 0
    assert len(files_under(elsewhere)) == 1
    capsys.readouterr()


@pytest.mark.parametrize("flag, use", [("--delegate_serialize_token", "--use_gpu"),
                                       ("--delegate_serialize_token", "--use_nnapi"),
                                       ("--qnn_model_token", "--use_qnn")])
@pytest.mark.parametrize("token", ["../../x", "a/b", "a\\b", ".."])
def test_benchmarks_token_may_hold_no_path_separator(tmp_path, capsys, flag, use, token):
    argv = ["benchmark", "--zoo", "tiny_cnn", "--num_runs", "1", "--warmup_runs", "0", use,
            "--delegate_serialize_dir", str(tmp_path / "c"), "--qnn_cache_dir", str(tmp_path / "c"),
            f"{flag}={token}"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and f"{flag} must be a plain file name" in err, err
    assert not (tmp_path / "c").exists() and not files_under(tmp_path)


def test_the_api_cache_refuses_a_token_with_a_separator(tmp_path):
    graph = build("tiny_cnn")
    with pytest.raises(DelegateError, match=r"the gpu delegate's model_token must be a plain file name"):
        store(str(tmp_path / "c"), "../escape", "gpu", graph)
    with pytest.raises(DelegateError):
        is_warm(str(tmp_path / "c"), "/abs", "nnapi", graph)
    assert not files_under(tmp_path)
    store(str(tmp_path / "c"), "fine", "gpu", graph)
    assert is_warm(str(tmp_path / "c"), "fine", "gpu", graph)


def test_benchmark_refuses_one_file_for_both_outputs_and_threads_past_a_scenarios_bound(tmp_path, capsys):
    """--output_json and --trace naming one file: one overwrote the other, silently. --num_threads 10**9
    was taken, where a scenario's cpu.threads stops at 64."""
    out = tmp_path / "b.json"
    same = str(tmp_path / "x" / ".." / "b.json")
    (tmp_path / "x").mkdir()
    assert main(["benchmark", "--zoo", "tiny_cnn", "--timing_only", "--num_runs", "1",
                 "--output_json", str(out), "--trace", same]) == 1
    assert "--output_json and --trace both name" in capsys.readouterr().err and not out.exists()
    with pytest.raises(SystemExit) as exc:
        main(["benchmark", "--zoo", "tiny_cnn", "--num_threads", str(10**9)])
    assert exc.value.code == 2 and "must be at most 64" in capsys.readouterr().err
