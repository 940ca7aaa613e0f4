"""Hostile and absurd scenario and profile files: every one stops at load with FILE:LINE: key: what is
wrong (ScenarioError / ProfileError, exit 1 on the command line), never a traceback, a hang or gigabytes."""

from __future__ import annotations

import copy
import zipfile
from pathlib import Path

import numpy as np
import pytest

from runtime.limits import counts as limits
from runtime.cli.main import main
from runtime.ir.errors import ProfileError, ScenarioError
from runtime.scenario.load import load_scenario
from runtime.ir.yamlcheck import MAX_DEPTH, MAX_VALUES
from sim.profile import PROFILE_DIR, load_profile

HEAD = "device: pixel3\nmodel:\n  zoo: tiny_cnn\n"     # lines 1-3; cases append from line 4


def write(tmp_path: Path, text: str, name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def error_of(path: Path) -> str:
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    message = str(info.value)
    assert "\n" not in message
    return message


def one_line_exit_1(capsys, *argv: str) -> str:
    assert main(list(argv)) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


# -- YAML itself -------------------------------------------------------------------------------------


def deep(levels: int) -> str:
    return "".join("  " * i + f"k{i}:\n" for i in range(levels)) + "  " * levels + "x: 1\n"


@pytest.mark.parametrize("text", [HEAD + "delegates:\n" + deep(250), HEAD + "streams: " + "[" * 5000 + "]" * 5000])
def test_deep_nesting_is_a_scenario_error_not_a_recursion_error(tmp_path, text):
    message = error_of(write(tmp_path, text))
    assert f"nested more than {MAX_DEPTH} levels deep" in message and message.startswith(f"{tmp_path}/s.yaml:")


@pytest.mark.parametrize("tagged, shown", [
    ("!!float abc", "'abc' is not a valid !!float value"),
    ("!!int x", "'x' is not a valid !!int value"),
    ("!!timestamp 2020-13-45", "is not a valid !!timestamp value"),
    ("!!timestamp zz", "'zz' is not a valid !!timestamp value"),
    ("!!int " + "9" * 5000, "is not a valid !!int value"),
    ("!!python/object:os.system {}", "could not determine a constructor"),
    ("!!set [1]", "expected a mapping node"),
])
def test_a_bad_tagged_value_is_one_message_at_its_line(tmp_path, tagged, shown):
    path = write(tmp_path, HEAD + f"streams: {tagged}\n")
    message = error_of(path)
    assert message.startswith(f"{path}:4: ") and shown in message, message


def test_control_characters_name_the_line(tmp_path):
    path = write(tmp_path, HEAD + "name: a\x00b\n")
    assert error_of(path).startswith(f"{path}:4: invalid YAML: character #x0000")


def alias_bomb(levels: int = 9) -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def counted(monkeypatch, owner: type, name: str) -> list[int]:
    """Count the calls of owner.name (a method), still calling it."""
    calls, real = [0], getattr(owner, name)

    def counting(*args, **kwargs):
        calls[0] += 1
        return real(*args, **kwargs)
    monkeypatch.setattr(owner, name, counting)
    return calls


def test_an_alias_bomb_is_refused_without_being_expanded(tmp_path, monkeypatch):
    import yaml

    path = write(tmp_path, HEAD + "description: &d x\n" + alias_bomb())   # 10**9 values once expanded
    composed = counted(monkeypatch, yaml.composer.Composer, "compose_node")
    built = counted(monkeypatch, yaml.constructor.BaseConstructor, "construct_object")
    message = error_of(path)
    assert composed[0] < 1000 and built[0] == 0   # the file's ~110 nodes (read twice at most), nothing built
    assert f"holds more than {MAX_VALUES} values, counting each alias" in message
    assert message.startswith(f"{path}:8: "), message   # the first anchor whose expansion passes the limit


def test_modest_aliases_still_work(tmp_path):
    text = ("device: pixel3\nmodel: &m {zoo: tiny_cnn, args: {resolution: 16}}\n"
            "matrix:\n  model: [*m, *m]\n  delegates: [[], [gpu: &g {backend: cl}], [gpu: *g]]\n")
    assert len(load_scenario(write(tmp_path, text))) == 6


def test_a_huge_file_is_refused_before_it_is_parsed(tmp_path):
    path = write(tmp_path, HEAD + "description: " + "x" * 1_100_000 + "\n")
    assert "characters long; the limit is 1,000,000" in error_of(path)


def _sparse(tmp_path: Path) -> Path:
    path = tmp_path / "big.yaml"
    with open(path, "wb") as f:
        f.truncate(3 << 30)   # sparse: 3 GB of zeros on no disk space; reading it whole took 3 GB of memory
    return path


def _peak_bytes(run) -> tuple[object, int]:
    import tracemalloc
    tracemalloc.start()
    try:
        return run(), tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_file_of_gigabytes_is_refused_without_being_read(tmp_path):
    path = _sparse(tmp_path)
    message, peak = _peak_bytes(lambda: error_of(path))
    assert message == f"{path}: cannot read the scenario: the file is over 4,000,000 bytes", message
    assert peak < 64 << 20


def test_dtb_run_refuses_a_file_of_gigabytes_without_reading_it(tmp_path, capsys):
    # the matrix guard reads the file before the loader does: both stop at the byte limit
    path = _sparse(tmp_path)
    err, peak = _peak_bytes(lambda: one_line_exit_1(capsys, "run", str(path), "-o", str(tmp_path / "out")))
    assert "the file is over 4,000,000 bytes" in err and peak < 64 << 20, err
    assert not (tmp_path / "out").exists()


# the same parser reads profiles: the same failures are ProfileErrors naming the profile file
@pytest.mark.parametrize("tail, words", [
    ("extra:\n" + deep(250), "nested more than"),
    ("extra: !!float abc\n", "'abc' is not a valid !!float value"),
    (alias_bomb(), "counting each alias"),
])
def test_profiles_share_the_hardened_parser(tmp_path, tail, words):
    path = write(tmp_path, (PROFILE_DIR / "pixel4.yaml").read_text() + tail, "phone.yaml")
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    assert str(info.value).startswith(f"{path}:") and words in str(info.value), str(info.value)


# -- values --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("args, key, words", [
    ("{resolution: -1}", "resolution", "must be in [8, 512]"),
    ("{resolution: 100000}", "resolution", "must be in [8, 512]"),
    ("{resolution: 99999999999999999999999}", "resolution", "must be in [8, 512] for tiny_cnn, got a huge number"),
    ("{classes: 0}", "classes", "must be in [1, 10000]"),
    ("{classes: 1000000000}", "classes", "must be in [1, 10000]"),
    ("{seed: -5}", "seed", "must be in [0, 4294967295]"),
    ("{resolution: .nan}", "resolution", "expected an integer, got a number"),
])
def test_zoo_arguments_are_checked_for_range(tmp_path, args, key, words):
    path = write(tmp_path, f"device: pixel3\nmodel:\n  zoo: tiny_cnn\n  args: {args}\n")
    message = error_of(path)
    assert message.startswith(f"{path}:4: model.args.{key}: ") and words in message, message


@pytest.mark.parametrize("alpha, words", [(".nan", "must be a finite number, got nan"),
                                          (".inf", "must be a finite number, got inf"),
                                          ("-0.5", "must be in [0.05, 2.0]"), ("1.0e+300", "must be in [0.05, 2.0]"),
                                          ("0.001", "must be in [0.05, 2.0]")])
def test_alpha_must_be_a_finite_number_in_range(tmp_path, alpha, words):
    path = write(tmp_path, f"device: pixel3\nmodel:\n  zoo: mobilenet_v1\n  args: {{alpha: {alpha}}}\n")
    message = error_of(path)
    assert message.startswith(f"{path}:4: model.args.alpha: ") and words in message, message


def test_squeezenet_has_its_own_smallest_resolution(tmp_path):
    path = write(tmp_path, "device: pixel3\nmodel:\n  zoo: squeezenet\n  args: {resolution: 16}\n")
    assert "must be in [35, 512] for squeezenet" in error_of(path)


def test_zoo_ranges_hold_on_the_command_line_too(capsys):
    err = one_line_exit_1(capsys, "benchmark", "--zoo", "tiny_cnn", "--zoo_args", "resolution=-3")
    assert "zoo model 'tiny_cnn': resolution must be in [8, 512]" in err


@pytest.mark.parametrize("inputs, key, words", [
    ("{distribution: uniform, low: .nan}", "low", "must be a finite number, got nan"),
    ("{distribution: uniform, high: .inf}", "high", "must be a finite number, got inf"),
    ("{distribution: uniform, low: -1.0e+39}", "low", "must be in [-3.40282e+38, 3.40282e+38]"),
    ("{seed: 99999999999999999999999}", "seed", "must be at most"),
])
def test_input_numbers_must_be_finite_and_in_range(tmp_path, inputs, key, words):
    message = error_of(write(tmp_path, HEAD + f"inputs: {inputs}\n"))
    assert f":4: inputs.{key}: " in message and words in message, message


@pytest.mark.parametrize("text, key, bound", [
    (HEAD + f"runs: {{count: {limits.MAX_RUNS + 1}}}\n", "runs.count", limits.MAX_RUNS),
    (HEAD + "runs: {count: 1000000000}\n", "runs.count", limits.MAX_RUNS),
    (HEAD + f"runs: {{warmup: {limits.MAX_WARMUP + 1}}}\n", "runs.warmup", limits.MAX_WARMUP),
    (HEAD + "streams: 1000000\n", "streams", limits.MAX_STREAMS),
    (HEAD + "cpu: {threads: 100000}\n", "cpu.threads", limits.MAX_THREADS),
])
def test_counts_have_upper_bounds_named_in_the_message(tmp_path, text, key, bound):
    message = error_of(write(tmp_path, text))
    assert f":4: {key}: must be at most {bound:,}" in message, message


def test_a_matrix_too_large_stops_before_it_is_expanded(tmp_path, monkeypatch):
    values = "[" + ", ".join(str(i) for i in range(800)) + "]"
    path = write(tmp_path, HEAD + f"matrix:\n  inputs.seed: {values}\n  runs.count: {values}\n")
    copies = counted(monkeypatch, copy, "deepcopy")   # each cell starts as a copy of the document
    message = error_of(path)
    assert copies[0] == 0
    assert message.startswith(f"{path}:4: matrix: expands to 640,000 cells; the limit is 500,000"), message


def test_the_inferences_of_the_whole_file_are_bounded(tmp_path):
    path = write(tmp_path, HEAD + "runs: {count: 10000}\nstreams: 16\nmatrix:\n  inputs.seed: [1, 2, 3, 4, 5, 6, 7]\n")
    assert "the scenario asks for 1,120,112 inferences in all" in error_of(path)


def test_run_counts_on_the_command_line_are_bounded(capsys):
    for flag, bound in (("--num_runs", limits.MAX_RUNS), ("--warmup_runs", limits.MAX_WARMUP)):
        with pytest.raises(SystemExit):
            main(["benchmark", "--zoo", "tiny_cnn", flag, "1000000000"])
        assert f"argument {flag}: must be at most {bound}" in capsys.readouterr().err


def test_a_10000_cell_matrix_reads_its_phone_profile_once(tmp_path, monkeypatch):
    import sim.profile
    from runtime.sweep import runner

    reads = []
    real = sim.profile.load_profile
    monkeypatch.setattr(sim.profile, "load_profile", lambda name: reads.append(name) or real(name))
    runner.PROFILES.clear()
    seeds = "[" + ", ".join(str(i) for i in range(1, 101)) + "]"
    path = write(tmp_path, "device: pixel4\nmodel: {zoo: tiny_cnn, args: {resolution: 16}}\n"
                           f"runs: {{warmup: 0, count: 1}}\nmatrix:\n  inputs.seed: {seeds}\n  runs.warmup: {seeds}\n")
    cells = runner.check_file(path)
    assert len(cells) == 10_000 and len(reads) == 1


# -- input files ---------------------------------------------------------------------------------------


def input_scenario(tmp_path, file_name: str) -> Path:
    return write(tmp_path, "device: pixel4\nmodel: {zoo: tiny_cnn, args: {resolution: 16}}\n"
                           f"runs: {{warmup: 0, count: 1}}\ninputs: {{file: {file_name}}}\n")


@pytest.mark.parametrize("make, words", [
    (lambda p: p.write_bytes(b"not an array at all"), "cannot be read as a .npy file"),
    (lambda p: np.save(p, np.array([{"a": 1}], dtype=object)), "holds object values, not numbers"),
    (lambda p: np.save(p, np.array(["abc"])), "holds <U3 values, not numbers"),
    (lambda p: np.save(p, np.zeros(3, np.complex64)), "holds complex64 values, not numbers"),
    (lambda p: p.write_bytes(b"\x93NUMPY\x01\x00\x10\x00{'descr': '<f4'"), "cannot be read as a .npy file"),
])
def test_input_files_are_checked_at_load(tmp_path, make, words):
    make(tmp_path / "x.npy")
    message = error_of(input_scenario(tmp_path, "x.npy"))
    assert f":4: inputs.file: input file {tmp_path / 'x.npy'}: " in message and words in message, message


def test_a_compressed_input_bomb_is_refused_from_its_header(tmp_path):
    path = tmp_path / "big.npz"
    header = np.lib.format.header_data_from_array_1_0(np.zeros(1, np.float32))
    header["shape"] = (1 << 30,)
    with zipfile.ZipFile(path, "w") as z, z.open("input.npy", "w") as f:
        np.lib.format.write_array_header_1_0(f, header)   # claims 4 GiB of floats, holds none
    message = error_of(input_scenario(tmp_path, "big.npz"))
    assert "array 'input' has 1,073,741,824 elements; the limit is 16,777,216" in message


@pytest.mark.parametrize("array, words", [
    (np.zeros((1, 8, 8, 3), np.float32), "has shape [1, 8, 8, 3]; input 'input' is [1, 16, 16, 3]"),
    (np.full((1, 16, 16, 3), True), None),
    (np.zeros((1, 16, 16, 3), np.float64), None),
])
def test_input_arrays_must_fit_the_model_before_anything_runs(tmp_path, array, words):
    from runtime.sweep.runner import check_file

    np.savez(tmp_path / "x.npz", input=array)
    path = input_scenario(tmp_path, "x.npz")
    if words is None:
        check_file(path)
        return
    with pytest.raises(ScenarioError) as info:
        check_file(path)
    assert str(info.value).startswith(f"{path}:4: inputs.file: ") and words in str(info.value), str(info.value)


def test_integer_inputs_refuse_values_their_type_cannot_hold(tmp_path):
    from runtime.sweep.cell import conform_input
    from runtime.zoo import build
    from runtime.zoo.quantize import quantize

    graph = build("tiny_cnn", resolution=16)
    q = quantize(graph, "int8", representative_data=[np.zeros((1, 16, 16, 3), np.float32)])
    t = q.inputs[0]
    if q.tensors[t].dtype.name != "INT8":
        pytest.skip("the quantized model keeps a float input")
    with pytest.raises(ScenarioError, match=r"not int8 \(integers in \[-128, 127\]\)"):
        conform_input(np.full((1, 16, 16, 3), 300), q, t, "x")
    with pytest.raises(ScenarioError, match="not int8"):
        conform_input(np.full((1, 16, 16, 3), 0.5), q, t, "x")
    assert conform_input(np.full((1, 16, 16, 3), 3.0), q, t, "x").dtype == np.int8


# -- libyaml reads, PyYAML names the faults ------------------------------------------------------------

_SHIPPED_YAML = sorted(PROFILE_DIR.glob("*.yaml")) + sorted((Path(__file__).resolve().parent.parent / "scenarios").glob("*.yaml"))


@pytest.mark.parametrize("path", _SHIPPED_YAML, ids=lambda p: p.name)
def test_the_fast_loader_reads_every_shipped_file_as_the_python_loader_does(path):
    from runtime.ir import yamlcheck

    if len(yamlcheck._LOADERS) == 1:
        pytest.skip("PyYAML without libyaml: only the Python loader exists")
    text = path.read_text(encoding="utf-8")
    fast = yamlcheck._read(yamlcheck._LOADERS[0], text, str(path), ScenarioError)
    plain = yamlcheck._read(yamlcheck._Loader, text, str(path), ScenarioError)
    assert fast == plain and yamlcheck._LOADERS[-1] is yamlcheck._Loader


@pytest.mark.parametrize("text,words", [
    ("a: [1, 2\n", "invalid YAML"),                       # libyaml refuses it too: PyYAML's message
    ("a: 1\na: 2\n", "a: duplicate key"),                  # composed by both: the same check
    ("a: !!int x\n", "is not a valid !!int value"),
])
def test_faults_read_by_the_fast_loader_keep_their_messages(monkeypatch, text, words):
    from runtime.ir import yamlcheck

    with pytest.raises(ScenarioError, match=words) as fast:
        yamlcheck.parse(text, "f.yaml", ScenarioError)
    monkeypatch.setattr(yamlcheck, "_LOADERS", (yamlcheck._Loader,))
    with pytest.raises(ScenarioError) as plain:
        yamlcheck.parse(text, "f.yaml", ScenarioError)
    assert str(fast.value) == str(plain.value)
