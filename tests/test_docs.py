"""The documentation is true: README is a short door to docs/, every link and named path exists, every
Python block in docs/ runs, and every `dtb` example in docs/ runs (the long ones listed here parse)."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import pathlib
import re
import shlex
import subprocess
import sys

import pytest

from delegates.registry import parse_flags
from runtime.cli.main import main as dtb_main
from runtime.cli.main import parse as dtb_parse
from sim.profile import load_profile

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))
README = ROOT / "README.md"
README_MAX_BYTES = 15_000

# Examples that take minutes or need files only the reader has: each is checked to parse (argparse,
# then TFLite's delegate flags), so a renamed flag still fails, but is not run. Keys are the example
# as written; a key with a trailing "*" covers every example starting with it.
LONG = {
    "dtb benchmark --zoo mobilenet_v1 --device pixel4 --use_gpu --num_runs 5 --report_peak_memory_footprint=true":
        "full-size MobileNet v1 1.0/224 emulated in float16: half a minute or more on a shared 2-core host",
    "dtb inference-diff --zoo mobilenet_v1 --device pixel4 --delegate gpu":
        "50 runs of full-size MobileNet v1 emulated in float16 and on the reference: minutes",
    "dtb calibrate sim/profiles/measurements/pixel3.csv --base pixel3 --cv":
        "43 rows refitted once per held-out model (leave-one-model-out): minutes",
    "dtb calibrate sim/profiles/measurements/galaxy_s24.csv --base galaxy_s24 --cv *":
        "42 rows of AI Hub's models refitted once per held-out family, and the shipped profile rewritten: minutes",
    "dtb calibrate sim/profiles/measurements/galaxy_s24.csv --base galaxy_s24 --op_split":
        "42 rebuilt AI Hub models decompressed and partitioned: a minute on a shared 2-core host",
    "dtb calibrate phone.log *": "reads a benchmark_model log from the reader's own phone",
    "dtb benchmark --graph m.tflite *": "the reader's model on the profile `dtb calibrate` wrote",
    "dtb eval classification *": "629 images through the CPU reference and the float16 GPU",
    "dtb run sweep.yaml *": "sweep.yaml stands for the reader's own sweep (and a Dask scheduler)",
    "dtb run huge.yaml *": "huge.yaml stands for a sweep of over 100,000 cells",
}

# Examples whose text gives another exit status than 0.
EXIT = {
    "dtb conformance mypkg.mydelegate:make --device pixel4 --ops ADD,MUL --examples 4": 1,  # "FAIL: ..."
}

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.DOTALL | re.MULTILINE)
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_PATH = re.compile(r"^(?:runtime|sim|delegates|tests|benchmarks|scenarios|docs)/[\w./*<>-]*$")
_FILE_HEADER = re.compile(r"^# ([\w/]+\.(?:py|yaml)):?")


def _blocks(path: pathlib.Path) -> list[tuple[str, str]]:
    """(language, body) of every fenced block, in order."""
    return [(m.group(1), m.group(2)) for m in _FENCE.finditer(path.read_text(encoding="utf-8"))]


def _prose(path: pathlib.Path) -> str:
    return _FENCE.sub("", path.read_text(encoding="utf-8"))


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def _anchors(path: pathlib.Path) -> set[str]:
    return {_slug(line.lstrip("#")) for line in _prose(path).splitlines() if line.startswith("#")}


def _examples(path: pathlib.Path) -> list[tuple[str, str | None]]:
    """Every `dtb ...` line of a shell block, and every `$ dtb ...` line of an output block with the
    last line of the output shown after it (None where the block shows none)."""
    found = []
    for lang, body in _blocks(path):
        lines = body.replace("\\\n", " ").splitlines()
        for i, line in enumerate(lines):
            line = line.strip()
            if line.startswith("$ dtb "):
                shown = [s.strip() for s in lines[i + 1:] if s.strip()]
                shown = shown[:next((k for k, s in enumerate(shown) if s.startswith("$ ")), len(shown))]
                found.append((line[2:], shown[-1] if shown and shown[-1] != "..." else None))
            elif lang == "sh" and line.startswith("dtb "):
                found.append((line, None))
    return [(" ".join(shlex.split(c, comments=True)), last) for c, last in found]


def _commands(path: pathlib.Path) -> list[str]:
    return [command for command, _ in _examples(path)]


def _long_reason(command: str) -> str | None:
    for key, reason in LONG.items():
        if command == key or (key.endswith("*") and command.startswith(key[:-1])):
            return reason
    return None


# -- README is the door ------------------------------------------------------------------------------


def test_readme_is_short():
    size = len(README.read_bytes())
    assert size <= README_MAX_BYTES, f"README.md is {size} bytes; move detail into docs/ (at most {README_MAX_BYTES})"


def test_readme_links_every_page():
    linked = {(README.parent / m.split("#")[0]).resolve() for m in _LINK.findall(_prose(README))}
    missing = [p.name for p in PAGES if p.resolve() not in linked]
    assert PAGES and not missing, f"README.md links no docs page named {missing}"


@pytest.mark.parametrize("path", [README, *PAGES], ids=lambda p: p.name)
def test_relative_links_resolve(path):
    for target in _LINK.findall(_prose(path)):
        if re.match(r"^[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        assert dest.exists(), f"{path.name}: link {target!r}: no {dest}"
        if anchor and dest.suffix == ".md":
            assert anchor in _anchors(dest), f"{path.name}: link {target!r}: {dest.name} has no heading #{anchor}"


# -- named paths and modules exist -------------------------------------------------------------------


def _spans(path: pathlib.Path) -> list[str]:
    """Backticked spans of the prose and of tables, split at spaces."""
    return [word.strip(",;:()") for span in re.findall(r"`([^`\n]+)`", _prose(path)) for word in span.split()]


def _exists(name: str) -> bool:
    pattern = re.sub(r"<[^>]+>", "*", name)
    return any(ROOT.glob(pattern.rstrip("/"))) if "*" in pattern else (ROOT / pattern).exists()


@pytest.mark.parametrize("path", [README, *PAGES], ids=lambda p: p.name)
def test_named_paths_exist(path):
    missing = [w for w in _spans(path) if _PATH.match(w) and not _exists(w)]
    assert not missing, f"{path.name} names paths that do not exist: {missing}"


def test_architecture_file_names_exist():
    """The architecture page's short names (`soc.py`, `cell.py`) are files of the tree too."""
    names = {p.name for top in ("runtime", "sim", "delegates", "tests", "benchmarks") for p in (ROOT / top).rglob("*.py")}
    bare = [w for w in _spans(DOCS / "architecture.md") if re.fullmatch(r"[\w*]+\.py", w)]
    missing = [w for w in bare if not any(pathlib.PurePath(n).match(w) for n in names)]
    assert bare and not missing, f"docs/architecture.md names files that do not exist: {missing}"


@pytest.mark.parametrize("path", [README, *PAGES], ids=lambda p: p.name)
def test_named_modules_and_scripts_exist(path):
    text = path.read_text(encoding="utf-8")
    for module in re.findall(r"python3? -m ([\w.]+)", text):
        assert importlib.util.find_spec(module) is not None, f"{path.name}: no module {module} (python -m)"
    for script in re.findall(r"python3? ((?:benchmarks|tests)/[\w/]+\.py)", text):
        assert (ROOT / script).is_file(), f"{path.name}: no script {script}"


# -- examples run ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A folder that looks like a checkout (scenarios/, sim/, tests/ linked) holding every file a
    page writes out in a block headed `# path.py:` or `# path.yaml:`."""
    work = tmp_path_factory.mktemp("docs")
    for top in ("scenarios", "sim", "tests", "benchmarks"):
        (work / top).symlink_to(ROOT / top)
    for page in PAGES:
        for _, body in _blocks(page):
            header = _FILE_HEADER.match(body)
            if header:
                (work / header.group(1)).parent.mkdir(parents=True, exist_ok=True)
                (work / header.group(1)).write_text(body)
    return work


_RUNNER = """
import json, sys, traceback
scope = {"__name__": "__main__"}
for number, code in enumerate(json.load(open(sys.argv[1])), 1):
    try:
        exec(compile(code, f"block {number}", "exec"), scope)
    except BaseException:
        traceback.print_exc()
        sys.exit(f"python block {number} failed")
"""


@pytest.mark.parametrize("page", [p for p in PAGES if any(lang == "python" for lang, _ in _blocks(p))],
                         ids=lambda p: p.name)
def test_python_blocks_run(page, workdir):
    """A page's Python blocks run in order in one fresh interpreter, each seeing what the earlier defined."""
    blocks = [body for lang, body in _blocks(page) if lang == "python"]
    script = workdir / f"{page.stem}_blocks.json"
    script.write_text(json.dumps(blocks))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(workdir)])}
    done = subprocess.run([sys.executable, "-c", _RUNNER, str(script)], cwd=workdir, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, f"docs/{page.name}: {done.stderr[-3000:]}"


def _parses(command: str) -> None:
    args, extra = dtb_parse(shlex.split(command)[1:])
    if extra:
        device = getattr(args, "device", None)
        profile = load_profile(device if device in {"pixel3", "pixel4", "iphone_xs"} else "generic")
        _, rest = parse_flags(extra, profile)
        assert not rest, f"{command}: unknown flags {rest}"


@pytest.mark.parametrize("page", [p for p in PAGES if _commands(p)], ids=lambda p: p.name)
def test_dtb_examples_run(page, workdir, monkeypatch, capsys):
    """Each example in order (a report reads what a run wrote), through `dtb`'s own main(argv)."""
    monkeypatch.chdir(workdir)
    monkeypatch.syspath_prepend(str(workdir))
    for command, last_line in _examples(page):
        if _long_reason(command):
            _parses(command)
            continue
        status = dtb_main(shlex.split(command)[1:])
        out = capsys.readouterr()
        assert status == EXIT.get(command, 0), f"docs/{page.name}: `{command}` exited {status}: {out.err[-2000:]}"
        if last_line is not None:  # the output the page shows ends as the command's does
            printed = [" ".join(line.split()) for line in out.out.splitlines()]
            assert any(_same_line(last_line, line) for line in printed), \
                f"docs/{page.name}: `{command}` no longer prints {last_line!r}"


# A number in exponent form: the small differences a numerical comparison prints (inference_diff's
# avg_error), whose last digits follow the BLAS kernel's summation order, not the testbed.
_EXPONENT = re.compile(r"[+-]?\d+(?:\.\d*)?[eE][+-]?\d+")
_EXPONENT_RTOL = 1e-2


def _same_line(shown: str, printed: str) -> bool:
    """The page's line and the printed one are the same text; numbers in exponent form may differ in
    their last digits (relative 1%): every other figure (simulated ones: bit-exact) must match."""
    shown, printed = " ".join(shown.split()), " ".join(printed.split())
    if shown == printed:
        return True
    if _EXPONENT.sub("#", shown) != _EXPONENT.sub("#", printed):
        return False
    pairs = zip(_EXPONENT.findall(shown), _EXPONENT.findall(printed))
    return all(math.isclose(float(a), float(b), rel_tol=_EXPONENT_RTOL) for a, b in pairs)


def test_a_docs_line_matches_despite_the_last_digits_of_a_numerical_error_only():
    line = "OutputDiff[0]: avg_error=8.18825e-05, std_dev=1.03112e-05"
    assert _same_line(line, "OutputDiff[0]: avg_error=8.18903e-05, std_dev=1.03097e-05")
    assert not _same_line(line, "OutputDiff[0]: avg_error=9.1e-05, std_dev=1.03112e-05")       # 11% off
    assert not _same_line("latency 24.90 ms err=1e-05", "latency 24.91 ms err=1e-05")          # plain figures: exact
    assert not _same_line(line, "OutputDiff[1]: avg_error=8.18825e-05, std_dev=1.03112e-05")   # the text itself


def test_readme_examples_parse():
    """README's first commands use the full-size models (minutes here): they parse."""
    commands = _commands(README)
    assert len(commands) >= 5
    for command in commands:
        _parses(command)


def test_every_long_example_is_in_the_docs():
    """The list above names no example the docs dropped."""
    written = [c for p in [README, *PAGES] for c in _commands(p)]
    for key in LONG:
        assert any(c == key or (key.endswith("*") and c.startswith(key[:-1])) for c in written), key


def _resolves(dotted: str) -> bool:
    """A dotted name is a module, or an attribute (chain) of the longest module that imports."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for name in parts[cut:]:
                obj = getattr(obj, name)
        except AttributeError:
            return False
        return True
    return False


@pytest.mark.parametrize("path", [README, *PAGES], ids=lambda p: p.name)
def test_named_python_names_exist(path):
    """`runtime.zoo.LIMITS`, `delegates.guard.time_budget(seconds)`: the module and the name in it exist."""
    names = {m.group(1) for span in re.findall(r"`([^`\n]+)`", _prose(path))
             for m in [re.match(r"(?:from |import )?((?:runtime|sim|delegates)(?:\.\w+)+)", span)] if m}
    missing = sorted(n for n in names if not _resolves(n))
    assert not missing, f"{path.name} names Python objects that do not exist: {missing}"
