"""Delegate providers: TFLite flags, scenario names and external delegates."""

from __future__ import annotations

import re
import sys

import pytest

from delegates.api import DelegateError
from delegates.coreml import CoreMlDelegate, CoreMlDevices
from delegates.external import load_external, parse_external_options
from delegates.gpu import GpuBackend, GpuDelegate, InferencePreference, Priority
from delegates.hexagon import HexagonDelegate
from delegates.nnapi import ExecutionPreference, NnapiDelegate
from delegates.registry import make_delegate, parse_flags
from tests.delegate_kit import android, iphone

EXTERNAL = "tests.external_delegates"


def test_delegates_come_in_flag_order_with_both_syntaxes():
    argv = ["--graph=model.tflite", "--use_nnapi", "--nnapi_accelerator_name", "test-npu",
            "--use_gpu=true", "--gpu_backend", "gl", "--num_runs", "5", "--use_hexagon", "1"]
    delegates, rest = parse_flags(argv, android())
    assert [type(d) for d in delegates] == [NnapiDelegate, GpuDelegate, HexagonDelegate]
    assert rest == ["--graph=model.tflite", "--num_runs", "5"]
    assert delegates[0].device.name == "test-npu"
    assert delegates[1].config.backend is GpuBackend.OPENGL


def test_false_switches_create_nothing_and_a_bare_switch_is_true():
    assert parse_flags(["--use_gpu=false", "--use_nnapi=0"], android()) == ([], [])
    delegates, rest = parse_flags(["--use_gpu", "--enable_op_profiling=true"], android())
    assert [type(d) for d in delegates] == [GpuDelegate] and rest == ["--enable_op_profiling=true"]


def test_gpu_flags_as_the_benchmark_sets_them():
    default = parse_flags(["--use_gpu"], None)[0][0].config
    assert default.uses_fp16 and default.enable_quant and default.backend is GpuBackend.OPENCL
    assert default.priorities[0] is Priority.MIN_LATENCY
    strict = parse_flags(["--use_gpu", "--gpu_precision_loss_allowed=false",
                          "--gpu_experimental_enable_quant=false",
                          "--gpu_inference_for_sustained_speed=true"], None)[0][0].config
    assert not strict.uses_fp16 and not strict.enable_quant
    assert strict.inference_preference is InferencePreference.SUSTAINED_SPEED


def test_partition_flags_reach_each_delegate_through_its_defaults():
    argv = ["--use_gpu", "--use_nnapi", "--use_hexagon", "--use_coreml"]
    gpu, nnapi, hexagon, coreml = parse_flags(argv, android())[0]
    assert gpu.options.max_delegated_partitions == 1
    assert nnapi.options.max_delegated_partitions == 0  # the flag's 0 means "no limit" for NNAPI
    assert (hexagon.options.max_delegated_partitions, hexagon.options.min_nodes_per_partition) == (4, 2)
    assert coreml.config.enabled_devices is CoreMlDevices.ALL
    tuned = parse_flags(argv + ["--max_delegated_partitions=2", "--min_nodes_per_partition", "3"],
                        android())[0]
    assert [d.options.max_delegated_partitions for d in tuned] == [2, 2, 2, 2]
    assert [d.options.min_nodes_per_partition for d in tuned[2:]] == [3, 3]


def test_nnapi_flags():
    argv = ["--use_nnapi", "--nnapi_execution_preference=low_power", "--nnapi_allow_fp16",
            "--disable_nnapi_cpu=false", "--delegate_serialize_dir=/c", "--delegate_serialize_token=t"]
    config = parse_flags(argv, android())[0][0].config
    assert config.execution_preference is ExecutionPreference.LOW_POWER
    assert config.allow_fp16 and not config.disallow_nnapi_cpu
    assert (config.cache_dir, config.model_token) == ("/c", "t")


@pytest.mark.parametrize("argv, flag", [
    (["--use_gpu", "--gpu_backend=vulkan"], "--gpu_backend"),
    (["--use_nnapi", "--nnapi_execution_preference=turbo"], "--nnapi_execution_preference"),
    (["--use_gpu=maybe"], "--use_gpu"),
    (["--use_coreml", "--coreml_version=5"], "--coreml_version"),
    (["--max_delegated_partitions=many"], "--max_delegated_partitions"),
    (["--use_nnapi", "--nnapi_accelerator_name"], "--nnapi_accelerator_name"),
])
def test_bad_flag_values_name_the_flag(argv, flag):
    with pytest.raises(DelegateError, match=flag):
        parse_flags(argv, android())


def test_coreml_from_flags_on_an_iphone():
    coreml = parse_flags(["--use_coreml", "--coreml_version=2"], iphone())[0][0]
    assert isinstance(coreml, CoreMlDelegate) and coreml.config.coreml_version == 2


# -- external delegates -----------------------------------------------------------------------


def test_external_delegate_is_loaded_only_when_named_and_options_are_converted():
    sys.modules.pop(EXTERNAL, None)
    parse_flags(["--use_gpu"], None)
    assert EXTERNAL not in sys.modules
    argv = ["--use_gpu", f"--external_delegate_path={EXTERNAL}:make",
            "--external_delegate_options", "threshold:3;label:abc;strict:true;scale:0.5"]
    delegates, rest = parse_flags(argv, None)
    external = delegates[1]
    assert rest == [] and type(delegates[0]) is GpuDelegate
    assert (external.threshold, external.label, external.strict, external.scale) == (3, "abc", True, 0.5)


def test_external_delegate_without_annotations_gets_strings():
    delegate = load_external(f"{EXTERNAL}:untyped", {"threshold": "3"})
    assert delegate.raw == {"threshold": "3"}


@pytest.mark.parametrize("path, options", [
    ("tests.no_such_module:make", {}), (f"{EXTERNAL}:missing", {}), (f"{EXTERNAL}", {}),
    (f"{EXTERNAL}:not_a_delegate", {}), (f"{EXTERNAL}:failing", {}),
    (f"{EXTERNAL}:make", {"colour": "red"}), (f"{EXTERNAL}:make", {"threshold": "lots"}),
])
def test_bad_external_delegates_name_the_path(path, options):
    with pytest.raises(DelegateError, match=path):
        load_external(path, options)


def test_external_options_format():
    assert parse_external_options("a:1; b:two;") == {"a": "1", "b": "two"}
    with pytest.raises(DelegateError, match="nocolon"):
        parse_external_options("a:1;nocolon")


def test_an_external_option_given_twice_is_refused_naming_it():
    with pytest.raises(DelegateError, match=r"'backend_type' is given twice \('htp' and 'gpu'\)"):
        parse_external_options("backend_type:htp;backend_type:gpu")
    with pytest.raises(DelegateError, match="'a' is given twice"):
        parse_external_options(" a :1; a:1")


@pytest.mark.parametrize("value", ["1_0", "\u0663", " +4_2 "])
def test_external_integer_options_take_ascii_digits_only(value):
    with pytest.raises(DelegateError, match=re.escape(f"option 'threshold' must be int, not {value!r}")):
        load_external(f"{EXTERNAL}:make", {"threshold": value})


@pytest.mark.parametrize("value", ["nan", "1e309", "-inf", "1_0.5"])
def test_external_float_options_are_finite_numbers(value):
    with pytest.raises(DelegateError, match="option 'scale' must be"):
        load_external(f"{EXTERNAL}:make", {"scale": value})


# -- scenario names ---------------------------------------------------------------------------


def test_make_delegate_converts_option_values():
    gpu = make_delegate("gpu", None, backend="gl", is_precision_loss_allowed="false",
                        priorities="min_latency,max_precision")
    assert gpu.config.backend is GpuBackend.OPENGL and gpu.config.priorities[0] is Priority.MIN_LATENCY
    nnapi = make_delegate("nnapi", android(), accelerator_name="test-npu", max_delegated_partitions=5,
                          execution_preference="SUSTAINED_SPEED")
    assert nnapi.options.max_delegated_partitions == 5
    assert nnapi.config.execution_preference is ExecutionPreference.SUSTAINED_SPEED
    assert make_delegate("hexagon", android(), min_nodes_per_partition=3).options.min_nodes_per_partition == 3
    assert make_delegate("coreml", iphone(), enabled_devices="all").config.enabled_devices is CoreMlDevices.ALL


def test_make_delegate_rejects_unknown_names_keys_and_values():
    with pytest.raises(DelegateError, match="tpu"):
        make_delegate("tpu", None)
    with pytest.raises(DelegateError, match="colour"):
        make_delegate("gpu", None, colour="red")
    with pytest.raises(DelegateError, match="backend"):
        make_delegate("gpu", None, backend="vulkan")


@pytest.mark.parametrize("kind, key, value", [
    ("gpu", "max_delegated_partitions", float("inf")),
    ("gpu", "max_delegated_partitions", 2.7), ("hexagon", "max_delegated_partitions", True),
    ("nnapi", "max_number_delegated_partitions", 2.9), ("hexagon", "min_nodes_per_partition", "1_0"),
])
def test_an_integer_option_is_never_truncated_or_a_boolean(kind, key, value):
    """A scenario's `.inf` raised OverflowError (a traceback); 2.7 became 2 and `true` 1."""
    with pytest.raises(DelegateError, match=re.escape(f"{kind} option '{key}' must be int, not {value!r}")):
        make_delegate(kind, android(), **{key: value})


@pytest.mark.parametrize("value, shown", [(None, "None"), (["a"], "['a']"), ({"a": 1}, "{'a': 1}"), (True, "True")])
def test_a_text_option_is_not_a_python_spelling(value, shown):
    with pytest.raises(DelegateError, match=re.escape(f"must be text, not {shown}")):
        make_delegate("qnn", None, library_path=value)


def test_a_list_option_that_is_no_list_is_refused():
    with pytest.raises(DelegateError, match="'priorities' must be a list"):
        make_delegate("gpu", None, priorities=5)


# -- factories from the current folder ----------------------------------------------------------------

_CWD_DELEGATE = '''
from delegates.api import Delegate, DelegateKernel, Support
from runtime.ir.optypes import OpType


class AddKernel(DelegateKernel):
    def prepare(self):
        g = self.partition.graph
        self.steps = [g.ops[i] for i in self.partition.nodes]
        self.consts = {t: g.tensors[t].data for op in self.steps for t in op.inputs if g.tensors[t].is_constant}

    def invoke(self, inputs):
        v = {**self.consts, **inputs}
        for op in self.steps:
            a, b = (v[t] for t in op.inputs)
            v[op.outputs[0]] = a + b
        return {t: v[t] for t in self.partition.outputs}


class AddDelegate(Delegate):
    name = "CwdAddDelegate"
    unit = "gpu"

    def is_node_supported(self, op, graph):
        if op.type is not OpType.ADD or op.options.fused_activation_function:
            return Support(False, "plain ADD only")
        if graph.tensors[op.inputs[0]].dtype.name != "FLOAT32":
            return Support(False, "float32 only")
        return Support(True)

    def create_kernel(self, partition):
        return AddKernel(partition)


def make():
    return AddDelegate()
'''


@pytest.fixture
def cwd_package(tmp_path, monkeypatch):
    """A package `cwdpkg` in a fresh current folder that is not on sys.path (as for the console script)."""
    import os

    pkg = tmp_path / "cwdpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "mydelegate.py").write_text(_CWD_DELEGATE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", os.getcwd())])
    yield tmp_path
    for name in [m for m in sys.modules if m == "cwdpkg" or m.startswith("cwdpkg.")]:
        del sys.modules[name]


def test_external_factory_imports_a_package_in_the_current_folder(cwd_package):
    assert load_external("cwdpkg.mydelegate:make").name == "CwdAddDelegate"
    delegates, rest = parse_flags(["--external_delegate_path=cwdpkg.mydelegate:make"], None)
    assert rest == [] and delegates[0].name == "CwdAddDelegate"


def test_console_script_finds_the_readme_delegate_in_the_current_folder(cwd_package):
    import subprocess
    from pathlib import Path

    dtb = Path(sys.executable).parent / "dtb"
    if not dtb.exists():
        pytest.skip("the dtb console script is not installed beside this Python")
    proc = subprocess.run([str(dtb), "conformance", "cwdpkg.mydelegate:make", "--device", "pixel4", "--ops", "ADD",
                           "--examples", "2"], capture_output=True, text=True, cwd=cwd_package, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "PASS: CwdAddDelegate on pixel4" in proc.stdout
