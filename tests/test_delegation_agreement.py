"""A delegate claims only what it will run, and every way in cuts a model the same way.

Over the repository's published, task and fixture models plus one mixed-precision graph (int8 with a
few float ops and an INT64 ARG_MAX), on every phone with every delegate flag the phone allows:
`dtb partition` (apply_delegates on the flags' delegates) and `dtb benchmark` (the interpreter on the
same delegates, timing only) delegate the same ops, and no delegate fails prepare after claiming ops.
`dtb run` (run_scenario on the cells of a generated scenario with the same options) cuts as they do
on every phone and flag for a subset of the models that between them show every verdict of the full
set (each op type delegated or not, the count of partitions, dynamic tensors, a failure; checked
below). Only the delegation step is done: timing-only cells, one run, no warm-up; models, phone
profiles and cuts are made once for the whole module.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from delegates.registry import parse_flags
from runtime.cli.main import main
from runtime.interpreter.api import Interpreter
from runtime.interpreter.delegation import apply_delegates
from runtime.ir.errors import ModelError
from runtime.ir.graph import DType, Graph, Op, QuantParams, Tensor
from runtime.ir.optypes import OpType as T
from runtime.ir.options import AddOptions, ArgMaxOptions, Conv2DOptions, DivOptions, Padding
from runtime.model.tflite_read import load
from runtime.model.tflite_write import save
from runtime.ops.dynamic import dynamic_tensors
from runtime.sweep.runner import check_file, run_scenario

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
MODELS = sorted((*FIXTURES.glob("published/*.tflite"), *FIXTURES.glob("tasks/*.tflite"),
                 *FIXTURES.glob("models/*.tflite")))
# A full-integer LSTM: the testbed has no kernel for it and refuses the file on load (checked below).
UNREADABLE = {"text_bilstm_int8.tflite"}
MIXED = "mixed_int8_float"
# The delegate flags each phone offers (Core ML on iOS, NNAPI and Hexagon on Android; generic has all).
PHONES = {"pixel3": ("gpu", "hexagon", "nnapi"), "pixel4": ("gpu", "hexagon", "nnapi"),
          "iphone_xs": ("gpu", "coreml"), "generic": ("gpu", "nnapi", "hexagon", "coreml")}
# The scenario options that equal a bare --use_<kind> of benchmark_model: its providers pass
# --max_delegated_partitions=0 (no limit) to NNAPI and ask Core ML for all devices.
SAME_AS_FLAGS = {"gpu": {}, "hexagon": {}, "nnapi": {"max_delegated_partitions": 0}, "coreml": {"enabled_devices": "all"}}
STATIC_ONLY = "Attempting to use a delegate that only supports static-sized tensors"


def mixed_graph() -> Graph:
    """Mostly int8, with the float ops a converter leaves behind: DEQUANTIZE -> LOGISTIC -> DIV ->
    SQRT -> QUANTIZE between int8 ops, and an ARG_MAX writing INT64 (MoveNet's and DeepLab's shapes)."""
    q = lambda scale, zero=0: QuantParams((scale,), (zero,))  # noqa: E731
    rng = np.random.default_rng(0)
    tensors = (
        Tensor("input", (1, 8, 8, 4), DType.INT8, q(0.05)),
        Tensor("conv/w", (4, 1, 1, 4), DType.INT8, QuantParams((0.02,) * 4, (0,) * 4, 0),
               rng.integers(-100, 100, (4, 1, 1, 4)).astype(np.int8)),
        Tensor("conv/b", (4,), DType.INT32, QuantParams((0.001,) * 4, (0,) * 4, 0), np.zeros(4, np.int32)),
        Tensor("conv", (1, 8, 8, 4), DType.INT8, q(0.1)),
        Tensor("conv/float", (1, 8, 8, 4), DType.FLOAT32),
        Tensor("Sigmoid", (1, 8, 8, 4), DType.FLOAT32),
        Tensor("two", (), DType.FLOAT32, None, np.array(2.0, np.float32)),
        Tensor("Sigmoid2", (1, 8, 8, 4), DType.FLOAT32),
        Tensor("Sqrt", (1, 8, 8, 4), DType.FLOAT32),
        Tensor("Sqrt/q", (1, 8, 8, 4), DType.INT8, q(1 / 256, -128)),
        Tensor("add", (1, 8, 8, 4), DType.INT8, q(0.1)),
        Tensor("axis", (1,), DType.INT32, None, np.array([3], np.int32)),
        Tensor("argmax", (1, 8, 8), DType.INT64),
    )
    ops = (
        Op(T.CONV_2D, (0, 1, 2), (3,), Conv2DOptions(Padding.SAME), version=3),
        Op(T.DEQUANTIZE, (3,), (4,), version=2),
        Op(T.LOGISTIC, (4,), (5,)),
        Op(T.DIV, (5, 6), (7,), DivOptions()),
        Op(T.SQRT, (7,), (8,)),
        Op(T.QUANTIZE, (8,), (9,), version=2),
        Op(T.ADD, (9, 3), (10,), AddOptions(), version=2),
        Op(T.ARG_MAX, (10, 11), (12,), ArgMaxOptions(4), version=2),
    )
    return Graph(tensors, ops, (0,), (10, 12), MIXED)


# -- shared work: each model and profile read once -------------------------------------------------


@pytest.fixture(scope="module")
def mixed_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("mixed") / f"{MIXED}.tflite"
    save(mixed_graph(), path)
    return path


def _path(model: str, mixed_file: Path) -> Path:
    return mixed_file if model == MIXED else next(p for p in MODELS if p.name == model)


_GRAPHS: dict[str, Graph] = {}
_PROFILES: dict[str, object] = {}
_RUNS: dict[str, dict[tuple[str, str], dict]] = {}


@pytest.fixture(scope="module", autouse=True)
def read_once():
    """The loaders dtb run goes through, memoised for this module: a model file and a phone profile
    are parsed once however many cells and commands use them."""
    import runtime.model.loader as loader
    import sim.profile as profiles

    real_load, real_profile = loader.load_model, profiles.load_profile

    def load_model(source, names=loader.KEYS):
        if source.path is None or source.quantization not in ("none", None):
            return real_load(source, names)
        key = str(Path(source.path).resolve())
        if key not in _GRAPHS:
            _GRAPHS[key] = real_load(source, names)
        return _GRAPHS[key]

    def load_profile(name):
        key = str(name)
        if key not in _PROFILES:
            _PROFILES[key] = real_profile(name)
        return _PROFILES[key]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(loader, "load_model", load_model)
        mp.setattr(profiles, "load_profile", load_profile)
        yield


def _graph(path: Path) -> Graph:
    key = str(path.resolve())
    if key not in _GRAPHS:
        _GRAPHS[key] = load(path)
    return _GRAPHS[key]


def _profile(phone: str):
    import sim.profile as profiles

    return profiles.load_profile(phone)


def _run_cells(path: Path, tmp_dir: Path) -> dict[tuple[str, str], dict]:
    """dtb run's cells of one generated scenario (every phone x every delegate, the options of the
    flags, timing only, one run), by (phone, kind): their records."""
    key = str(path)
    if key not in _RUNS:
        scenario = tmp_dir / f"{path.stem}.yaml"
        delegates = [[{kind: SAME_AS_FLAGS[kind]} if SAME_AS_FLAGS[kind] else kind]
                     for kind in ("gpu", "nnapi", "hexagon", "coreml")]
        scenario.write_text(json.dumps({   # JSON is YAML
            "model": {"path": str(path)}, "device": "pixel4", "timing_only": True,
            "runs": {"warmup": 0, "count": 1},
            "matrix": {"device": list(PHONES), "delegates": delegates}}))
        records = {}
        for sc in check_file(scenario):
            kind = sc.delegates[0].kind
            if kind in PHONES[sc.device]:
                records[(sc.device, kind)] = run_scenario(sc)[0]
        _RUNS[key] = records
    return _RUNS[key]


# -- the matrix -------------------------------------------------------------------------------------


READABLE = (*(p.name for p in MODELS if p.name not in UNREADABLE), MIXED)
CASES = [(m, phone, kind) for m in READABLE for phone, kinds in PHONES.items() for kind in kinds]
RUN_CASES = [(phone, kind) for phone, kinds in PHONES.items() for kind in kinds]
_PARTITIONS: dict[tuple[str, str, str], object] = {}


def _partition(model: str, phone: str, kind: str, mixed_file: Path):
    """dtb partition's cut (apply_delegates on the flag's delegate), once per model, phone and flag."""
    key = (model, phone, kind)
    if key not in _PARTITIONS:
        graph = _graph(_path(model, mixed_file))
        _PARTITIONS[key] = apply_delegates(graph, parse_flags([f"--use_{kind}"], _profile(phone))[0],
                                           dynamic_tensors(graph))
    return _PARTITIONS[key]


def verdicts(model: str, mixed_file: Path) -> frozenset[tuple]:
    """What a model shows of the delegates' support rules, on every phone and flag: each op type placed
    on the delegate or left on the CPU, the count of partitions (0 to 3, or more than NNAPI's default
    limit of 3), whether the model has dynamic tensors, and whether applying failed."""
    graph, out = _graph(_path(model, mixed_file)), set()
    dynamic = bool(dynamic_tensors(graph))
    for phone, kind in RUN_CASES:
        cut = _partition(model, phone, kind, mixed_file)
        on, report = set(cut.delegated_ops()), cut.per_delegate[-1]
        out |= {(phone, kind, op.type.name, i in on) for i, op in enumerate(graph.ops)}
        out |= {(phone, kind, "partitions", min(report.partitions, 4)), (phone, kind, "dynamic", dynamic),
                (phone, kind, "failed", bool(report.error), cut.restored)}
    return frozenset(out)


def cover(sets: dict[str, frozenset], first: tuple[str, ...] = ()) -> list[str]:
    """`first`, then a few more keys whose sets together hold everything all of them hold (greedy set
    cover: the key adding the most not yet held first, ties to the first key)."""
    chosen = list(first)
    left = set().union(*sets.values()).difference(*(sets[k] for k in chosen))
    while left:
        best = max(sets, key=lambda k: len(sets[k] & left))
        chosen.append(best)
        left -= sets[best]
    return chosen


_RUN_MODELS: list[str] = []


def run_models(mixed_file: Path) -> list[str]:
    """The models dtb run's way in is checked on: the mixed graph (the user's failure) and a subset that
    shows every verdict the full set shows (about half of them; each cell of a generated scenario is a
    whole run_scenario, the costly way in)."""
    if not _RUN_MODELS:
        _RUN_MODELS.extend(cover({m: verdicts(m, mixed_file) for m in READABLE}, first=(MIXED,)))
    return _RUN_MODELS


@pytest.mark.parametrize("model,phone,kind", CASES, ids=[f"{m}-{p}-{k}" for m, p, k in CASES])
def test_partition_and_benchmark_cut_alike_and_prepare_refuses_nothing_claimed(model, phone, kind, mixed_file):
    graph, profile = _graph(_path(model, mixed_file)), _profile(phone)

    partition = _partition(model, phone, kind, mixed_file)                                     # dtb partition
    assert not partition.restored, f"{kind} claimed ops it then refused: {partition.per_delegate[-1].error}"

    benchmark = Interpreter(graph=graph, experimental_delegates=parse_flags([f"--use_{kind}"], profile)[0],
                            device=profile, num_threads=-1, timing_only=True).simulation.delegation  # dtb benchmark
    assert not benchmark.restored, f"{kind} claimed ops it then refused: {benchmark.per_delegate[-1].error}"
    assert partition.placement() == benchmark.placement()


@pytest.mark.parametrize("phone,kind", RUN_CASES, ids=[f"{p}-{k}" for p, k in RUN_CASES])
def test_run_cuts_as_partition_does(phone, kind, mixed_file, tmp_path_factory):
    for model in run_models(mixed_file):
        partition = _partition(model, phone, kind, mixed_file)
        record = _run_cells(_path(model, mixed_file), tmp_path_factory.getbasetemp())[(phone, kind)]   # dtb run
        (ran,) = record["delegates"]
        assert ran.get("error", "").startswith(STATIC_ONLY) or "error" not in ran, (model, ran["error"])
        assert len(partition.delegated_ops()) == ran["nodes_delegated"], model
        assert partition.per_delegate[-1].partitions == ran["partitions"], model


def test_the_run_subset_is_a_cover_of_the_verdicts_and_smaller():
    sets = {"a": frozenset({1, 2}), "b": frozenset({2, 3, 4}), "c": frozenset({1}), "d": frozenset({4})}
    assert cover(sets) == ["b", "a"]
    assert cover({"x": frozenset({1}), "y": frozenset({1})}) == ["x"]
    assert cover(sets, first=("c",)) == ["c", "b"]


def test_the_run_subset_shows_every_verdict_of_the_full_set(mixed_file):
    chosen = run_models(mixed_file)
    every = set().union(*(verdicts(m, mixed_file) for m in READABLE))
    assert every == set().union(*(verdicts(m, mixed_file) for m in chosen))
    assert chosen[0] == MIXED and len(chosen) < len(READABLE)


def test_the_left_out_fixture_really_cannot_be_read():
    for name in UNREADABLE:
        with pytest.raises(ModelError):
            load(FIXTURES / "tasks" / name)


def test_the_mixed_graph_has_float_and_int64_inside_an_int8_model():
    graph = mixed_graph()
    kinds = {graph.tensors[t].dtype for op in graph.ops for t in op.outputs}
    assert {DType.INT8, DType.FLOAT32, DType.INT64} <= kinds


# -- the user's failure, end to end through the CLI -------------------------------------------------


@pytest.mark.parametrize("phone", ["pixel3", "pixel4", "generic"])
def test_nnapi_on_a_mixed_model_runs_what_dtb_partition_shows(phone, mixed_file, tmp_path, capsys):
    """NNAPI used to take the float DIV/SQRT and the INT64 ARG_MAX, then fail prepare ("the dsp runs
    8-bit integer models only", "Failed to apply NNAPI delegate.") while dtb partition exited 0."""
    common = ["--graph", str(mixed_file), "--device", phone, "--use_nnapi"]
    assert main(["partition", *common]) == 0
    shown = capsys.readouterr().out
    assert "Restored original execution plan" not in shown
    delegated = int(re.search(r"^(\d+) of \d+ ops delegated", shown, re.M).group(1))
    report = tmp_path / "bench.json"
    code = main(["benchmark", *common, "--num_runs", "1", "--warmup_runs", "0", "--output_json", str(report)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert json.loads(report.read_text())["delegates"][0]["nodes_delegated"] == delegated > 0


# -- where the defaults differ, the output says so ---------------------------------------------------


def _bench(capsys, tmp_path, common, *extra) -> tuple[int, str]:
    out = tmp_path / "bench.json"
    assert main(["benchmark", *common, "--num_runs", "1", "--warmup_runs", "0", "--timing_only",
                 "--output_json", str(out), *extra]) == 0
    return json.loads(out.read_text())["delegates"][0]["nodes_delegated"], capsys.readouterr().err


def _run(capsys, tmp_path, model: Path, nnapi) -> tuple[int, str]:
    scenario = tmp_path / "cell.yaml"
    scenario.write_text(json.dumps({"model": {"path": str(model)}, "device": "pixel3", "timing_only": True,
                                    "runs": {"warmup": 0, "count": 1}, "delegates": [nnapi]}))
    assert main(["run", str(scenario), "-o", str(tmp_path / "out"), "--overwrite"]) == 0
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    return results["records"][0]["delegates"][0]["nodes_delegated"], capsys.readouterr().err


def test_run_and_benchmark_say_where_their_nnapi_defaults_cut_differently(tmp_path, capsys):
    """benchmark_model's NNAPI provider passes --max_delegated_partitions=0 (no limit); the NNAPI
    delegate's own default (dtb run, the Python API) keeps the 3 largest partitions. An unrolled LSTM
    on the Pixel 3 has 11, so the two cut differently: each says so, and its advice gives the other's cut."""
    model = FIXTURES / "models" / "lstm_unrolled.tflite"
    common = ["--graph", str(model), "--device", "pixel3", "--use_nnapi"]

    unlimited, said = _bench(capsys, tmp_path, common)
    assert "--max_delegated_partitions=3 for that cut" in said
    three, said = _bench(capsys, tmp_path, common, "--max_delegated_partitions=3")
    assert "note:" not in said and three < unlimited

    by_default, said = _run(capsys, tmp_path, model, "nnapi")
    assert by_default == three and "`nnapi: {max_delegated_partitions: 0}` in the scenario" in said
    as_flags, said = _run(capsys, tmp_path, model, {"nnapi": {"max_delegated_partitions": 0}})
    assert as_flags == unlimited and "note:" not in said

    assert main(["partition", *common]) == 0
    shown = capsys.readouterr().out
    assert f"{unlimited} of 111 ops delegated" in shown and "--max_delegated_partitions=3 for that cut" in shown


def test_no_note_where_the_defaults_cut_alike(tmp_path, capsys):
    _, said = _bench(capsys, tmp_path, ["--graph", str(FIXTURES / "models" / "mobilenet_v1.tflite"),
                                        "--device", "pixel4", "--use_nnapi"])
    assert "note:" not in said


def test_partition_fails_as_benchmark_does_when_a_delegate_fails_while_applied(capsys):
    """An external delegate failing in prepare: TFLite restores the CPU plan and benchmark_model stops.
    dtb partition shows that plan, says for every op why it is on the CPU (the failure, not a reason
    of the op's own), and exits non-zero with the failure, as dtb benchmark does."""
    argv = ["--zoo", "tiny_cnn", "--zoo_args", "resolution=16", "--device", "pixel4",
            "--external_delegate_path", "tests.faulty_delegates:make_prepare_raises"]
    assert main(["partition", *argv]) == 1
    out, err = capsys.readouterr()
    assert out.count("the delegate failed while applied and TFLite restored the CPU plan") == 7
    assert "0 of 7 ops delegated" in out and "Traceback" not in err
    assert err.strip() == ("dtb partition: error: Failed to apply FaultyDelegate: FaultyDelegate prepare: "
                           "RuntimeError: prepare broke (TFLite restored the CPU plan shown above; dtb benchmark "
                           "stops here unless --cpu_fallback)")
    assert main(["benchmark", *argv, "--num_runs", "1"]) == 1
    assert "Failed to apply EXTERNAL delegate." in capsys.readouterr().err
