"""Fuzzing scenario and profile files: mutations of the shipped ones, through the API and the command line.

Every case takes a shipped scenario (scenarios/*.yaml) or phone profile (sim/profiles/*.yaml), read
when the case is made, and applies one to three mutations: structural ones on the parsed document
(delete, rename or duplicate a key, change a value's type, huge / negative / NaN / infinite numbers,
swap values, deep nesting) and textual ones (anchors and aliases up to alias bombs, bad tags,
truncation, stray characters, broken indentation). The mutated file then goes through one of:

- api:   load_scenario + every cell's check (runtime.sweep.runner.check_file), or load_profile;
- check: `dtb run FILE --check` (a profile: inside a small scenario that names it as its device);
- run:   `dtb run` for real, one cell, one timing-only run (the mutated document with its counts cut
         down; a profile: a tiny model on it, with a delegate).

Allowed outcomes: success, or ScenarioError / ProfileError (the command line: exit 1 and one line on
stderr naming the file). Anything else, a traceback or a case over 60 s, is a crash. Cases run in a
worker process that the harness kills and restarts when one takes too long, with a 4 GiB address-space
limit, so a hang or a runaway allocation is recorded instead of stopping the run.

    python -m tests.fuzz_scenarios --cases 5000            # the long run (docs/robustness.md gives its figures)
    python -m tests.fuzz_scenarios --cases 200 --seed 7 --save out/crashes

tests/test_fuzz_scenarios.py runs a bounded number of hypothesis-driven cases in the suite.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import functools
import io
import json
import math
import os
import random
import select
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "scenarios"
PROFILES = ROOT / "sim" / "profiles"
TIMEOUT_S = 60.0    # a case with no answer by then hangs: a bound no busy host reaches, the work being bounded
MEMORY_LIMIT = 4 << 30
MODES = ("api", "check", "run")


def seeds() -> dict[str, list[Path]]:
    """The shipped files, as they are now (others change them while this runs)."""
    return {"scenario": sorted(SCENARIOS.glob("*.yaml")), "profile": sorted(PROFILES.glob("*.yaml"))}


# -- mutations --------------------------------------------------------------------------------------

_ODD_VALUES: list[Any] = [None, True, False, "", "text", "pixel4", "gpu", "tiny_cnn", "int8", 0, -1, 1, 2.5, [], {},
                          [1, 2], {"a": 1}, [[[]]], "a/b.yaml", "../x.tflite", "os:system", "m:f", "\u00e9\u4e2d",
                          "a\0b", "x" * 5000, "~nobody/x.yaml", "\ud800", "/dev/zero", "/proc/self/mem", ".", "/",
                          "tests/fixtures/models/lstm_unrolled.tflite", "x.npy", "tests.external_delegates:make"]
_ODD_NUMBERS: list[Any] = [-1, 0, 1, -0.0, 1e-300, 1e308, -1e308, float("nan"), float("inf"), float("-inf"),
                           2**31, 2**63, 2**64 + 1, 10**30, -(10**30), 10**400, 0.5, 3, 1000000000]
_TAGS = ["!!float abc", "!!int x", "!!int 0x", "!!binary '@@@'", "!!timestamp zz", "!!timestamp 2020-13-45",
         "!!python/object:os.system {}", "!!python/name:os.system", "!custom 1", "!!str [1]", "!!set [1]",
         "!!omap 3", "!!map 3", "!!null x", "!!bool maybe", "!!float .nan", "!!int " + "9" * 5000]
_KEYS = ["device", "model", "zoo", "path", "args", "quantization", "delegates", "gpu", "external", "entry_point",
         "options", "inputs", "file", "low", "high", "seed", "runs", "count", "warmup", "streams", "matrix",
         "timing_only", "cpu", "threads", "units", "gmacs", "kind", "dram", "copy", "nnapi", "devices", "name"]


def _paths(doc: Any, path: tuple = ()) -> list[tuple]:
    """Every key path of the document (mapping keys and list positions)."""
    out = [path]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out.extend(_paths(v, path + (k,)))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out.extend(_paths(v, path + (i,)))
    return out


def _get(doc: Any, path: tuple) -> Any:
    for p in path:
        doc = doc[p]
    return doc


def _set(doc: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    _get(doc, path[:-1])[path[-1]] = value
    return doc


def _nest(value: Any, levels: int, rng: random.Random) -> Any:
    for _ in range(levels):
        value = [value] if rng.random() < 0.5 else {"k": value}
    return value


def _tree_mutation(doc: Any, rng: random.Random) -> Any:
    paths = _paths(doc)
    path = rng.choice(paths)
    scenario = isinstance(doc, dict) and ("model" in doc or "matrix" in doc)
    op = rng.choice(["delete", "type", "number", "number", "rename", "swap", "nest", "wrap", "add"]
                    + (["count"] if scenario else ["number", "number"]))
    if op == "delete" and path:
        parent = _get(doc, path[:-1])
        del parent[path[-1]]
    elif op == "type":
        doc = _set(doc, path, rng.choice(_ODD_VALUES))
    elif op == "number":
        numeric = [p for p in paths if p and isinstance(_get(doc, p), (int, float)) and not isinstance(_get(doc, p), bool)]
        doc = _set(doc, rng.choice(numeric) if numeric else path, rng.choice(_ODD_NUMBERS))
    elif op == "rename" and path and isinstance(path[-1], str):
        parent = _get(doc, path[:-1])
        new = rng.choice([rng.choice(_KEYS), path[-1][:-1], path[-1] + "s", path[-1].upper(), 1, ""])
        parent[new] = parent.pop(path[-1])
    elif op == "swap":
        other = rng.choice(paths)
        if path and other and path[:len(other)] != other and other[:len(path)] != path:
            a, b = _get(doc, path), _get(doc, other)
            doc = _set(doc, path, b)
            doc = _set(doc, other, a)
    elif op == "nest":
        doc = _set(doc, path, _nest(_get(doc, path), rng.choice([3, 50, 63, 64, 70, 150]), rng))
    elif op == "wrap":
        doc = _set(doc, path, [_get(doc, path)])
    elif op == "add" and isinstance(_get(doc, path), dict):
        _get(doc, path)[rng.choice(_KEYS)] = rng.choice(_ODD_VALUES + _ODD_NUMBERS)
    elif op == "count" and isinstance(doc, dict):
        key = rng.choice(["runs", "streams", "cpu", "matrix"])
        value = rng.choice([10**9, 10**5, 0, -1, 1, 17, 65])
        doc[key] = {"runs": {"count": value, "warmup": rng.choice([0, 1, 10**6])}, "streams": value,
                    "cpu": {"threads": value}, "matrix": {"inputs.seed": list(range(min(abs(value), 300)))}}[key]
    return doc


def _dump(doc: Any) -> str:
    try:
        return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=10**6)
    except (yaml.YAMLError, RecursionError, ValueError):
        return json.dumps(doc, default=str)  # JSON is YAML


def _bomb(levels: int) -> str:
    lines = ["b0: &b0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"b{i}: &b{i} [{', '.join([f'*b{i - 1}'] * 10)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def _text_mutation(text: str, rng: random.Random) -> str:
    lines = text.splitlines(keepends=True) or ["\n"]
    i = rng.randrange(len(lines))
    op = rng.choice(["tag", "truncate", "char", "delete_char", "dup_line", "swap_lines", "indent", "bomb",
                     "alias", "recursive", "empty", "tab", "bom", "deep"])
    if op == "tag":
        line = lines[i]
        if ":" in line and not line.lstrip().startswith("#"):
            key = line.split(":", 1)[0]
            lines[i] = f"{key}: {rng.choice(_TAGS)}\n"
        else:
            lines.insert(i, f"extra_{i}: {rng.choice(_TAGS)}\n")
    elif op == "truncate":
        return text[:rng.randrange(len(text) + 1)]
    elif op == "char":
        pos = rng.randrange(len(text) + 1)
        return text[:pos] + rng.choice(["\x00", "\x07", "{", "}", "[", "]", ":", "&", "*", "!", "%", "@", "`", "'",
                                        '"', "\t", "\ufeff", "\U0001f600", "\\", "|", ">", "-", "? ", "\r"]) + text[pos:]
    elif op == "delete_char" and text:
        pos = rng.randrange(len(text))
        return text[:pos] + text[pos + 1:]
    elif op == "dup_line":
        lines.insert(i, lines[i])
    elif op == "swap_lines":
        j = rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    elif op == "indent":
        lines[i] = " " * rng.choice([1, 2, 3, 8]) + lines[i]
    elif op == "bomb":
        lines.append(_bomb(rng.choice([2, 3, 5, 9, 12])))
    elif op == "alias":
        line = lines[i]
        if ":" in line and not line.lstrip().startswith("#") and line.split(":", 1)[1].strip():
            key, value = line.split(":", 1)
            lines[i] = f"{key}: &anchor{i} {value.strip()}\n"
            lines.append(f"alias_{i}: *anchor{i}\n" if rng.random() < 0.5 else f"device: *anchor{i}\n")
    elif op == "recursive":
        lines.append("loop: &loop [*loop]\n")
    elif op == "empty":
        return rng.choice(["", "# only a comment\n", "---\n", "...\n", "--- a\n--- b\n", "~\n", "[]\n"])
    elif op == "tab":
        lines[i] = "\t" + lines[i]
    elif op == "bom":
        return "\ufeff" + text
    elif op == "deep":  # deeper than any dumper would write: flow or block style, 200 to 20,000 levels
        levels = rng.choice([200, 250, 1000, 20000])
        key = lines[i].split(":", 1)[0] if ":" in lines[i] else "deep"
        if rng.random() < 0.5:
            lines[i] = f"{key}: " + "[" * levels + "]" * levels + "\n"
        else:
            lines[i] = f"{key}:\n" + "".join("  " * (n + 1) + f"k{n}:\n" for n in range(min(levels, 400)))
    return "".join(lines)


def _parse(text: str) -> Any:
    """The document, or None when it is broken, empty, too deep, recursive or an alias bomb. The
    harness decides this itself, without the code under test: plain PyYAML would build a bomb
    (sharing its parts), and walking what it built would expand every alias. A copy: the caller
    mutates it, and the shipped files are parsed once (parsing is most of a case's cost)."""
    try:
        return copy.deepcopy(_parsed(text))
    except RecursionError:   # nested deeper than copying goes: parsed afresh instead
        return _parsed.__wrapped__(text)


@functools.lru_cache(maxsize=64)
def _parsed(text: str) -> Any:
    try:
        loader = yaml.SafeLoader(text)   # composed once and built from the same node, as safe_load does
        try:
            node = loader.get_single_node()
            if node is None or _expanded_size(node) > 20_000:
                return None
            return loader.construct_document(node)
        finally:
            loader.dispose()
    except Exception:  # RecursionError for deep documents, YAMLError (the reader's too), constructor errors
        return None


def _expanded_size(root: yaml.Node) -> float:
    """Nodes of the document once aliases are expanded, counted without expanding (inf: recursive)."""
    sizes: dict[int, float] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    active: set[int] = set()
    while stack:
        node, done = stack.pop()
        if done:
            active.discard(id(node))
            children = node.value if isinstance(node, yaml.SequenceNode) else \
                [n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode) else []
            sizes[id(node)] = 1 + sum(sizes[id(c)] for c in children)
            continue
        if id(node) in sizes:
            continue
        if id(node) in active:
            return math.inf
        active.add(id(node))
        stack.append((node, True))
        if isinstance(node, yaml.SequenceNode):
            stack.extend((c, False) for c in node.value)
        elif isinstance(node, yaml.MappingNode):
            stack.extend((c, False) for pair in node.value for c in pair)
    return sizes[id(root)]


def mutate(text: str, rng: random.Random) -> str:
    """One to three mutations, structural or textual."""
    for _ in range(rng.choice([1, 1, 2, 3])):
        if rng.random() < 0.55:
            doc = _parse(text)
            if doc is not None:
                text = _dump(_tree_mutation(doc, rng))
                continue
        text = _text_mutation(text, rng)
    return text


@dataclass(frozen=True)
class Case:
    kind: str        # "scenario" | "profile"
    seed_file: str   # the shipped file it mutates
    mode: str        # "api" | "check" | "run"
    text: str        # the mutated file
    extra: str = ""  # a profile case's delegate, or the scenario cut down to one run


def make_case(rng: random.Random, kind: str | None = None, mode: str | None = None,
              modes: tuple[str, ...] = ("api", "api", "check", "run")) -> Case:
    files = seeds()
    kind = kind or rng.choice(["scenario", "scenario", "scenario", "profile", "profile"])
    mode = mode or rng.choice(modes)
    seed_file = rng.choice(files[kind])
    text = mutate(seed_file.read_text(encoding="utf-8"), rng)
    extra = rng.choice(["", "gpu", "nnapi", "hexagon", "coreml"]) if kind == "profile" else ""
    return Case(kind, seed_file.name, mode, text, extra)


# -- running one case (in the worker) ---------------------------------------------------------------

OK, REJECTED, CRASH, HANG = "ok", "rejected", "crash", "hang"


def _one_run_variant(text: str) -> str | None:
    """The (loadable) scenario with one cell and one timing-only run, or None when it cannot be made."""
    doc = _parse(text)
    if not isinstance(doc, dict):
        return None
    doc["runs"] = {"warmup": 0, "count": 1}
    doc["timing_only"] = True
    doc["streams"] = 1
    if isinstance(doc.get("matrix"), dict):
        doc["matrix"] = {k: v[:1] if isinstance(v, list) else v for k, v in doc["matrix"].items()}
    return _dump(doc)


def _cli(argv: list[str], names: list[str]) -> tuple[str, str]:
    from runtime.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    except SystemExit as exc:  # argparse: a usage error we did not mean to make
        return CRASH, f"SystemExit {exc.code}: {err.getvalue()[-500:]}"
    text = err.getvalue()
    if code == 0:
        return OK, ""
    if code != 1:
        return CRASH, f"exit {code}: {text[-500:]}"
    if text.count("\n") != 1 or "Traceback" in text:
        return CRASH, f"not one line: {text[-800:]}"
    if not any(n in text for n in names):
        return CRASH, f"does not name the file: {text.strip()}"
    return REJECTED, text.strip()


def _api(case: Case, path: Path) -> tuple[str, str]:
    from runtime.ir.errors import ProfileError, ScenarioError

    try:
        if case.kind == "scenario":
            from runtime.sweep import runner

            runner.check_file(path)
        else:
            from sim.profile import load_profile

            load_profile(path)
    except (ScenarioError, ProfileError) as exc:
        message = str(exc)
        if "\n" in message or not message.startswith(str(path)):
            return CRASH, f"message not one line naming the file: {message[:800]}"
        return REJECTED, message
    return OK, ""


def run_case(case: Case, folder: Path) -> tuple[str, str]:
    """Outcome and detail of one case; files go into `folder` (emptied by the caller)."""
    scenarios = folder / "scenarios"   # beside a link to tests/, so shipped relative model paths resolve
    scenarios.mkdir(parents=True, exist_ok=True)
    if not (folder / "tests").exists():
        (folder / "tests").symlink_to(ROOT / "tests")
    path = (scenarios if case.kind == "scenario" else folder) / f"fuzz_{case.seed_file}"
    path.write_text(case.text, encoding="utf-8", errors="surrogatepass")
    try:
        if case.mode == "sleep":  # the harness's own test: a case that hangs
            time.sleep(float(case.text))
            return OK, ""
        if case.mode == "api":
            return _api(case, path)
        if case.kind == "profile":
            wrapper = scenarios / "on_profile.yaml"
            delegates = f"delegates: [{case.extra}]\n" if case.extra else ""
            wrapper.write_text(f"device: {path}\nmodel: {{zoo: tiny_cnn, args: {{resolution: 16}}}}\n"
                               f"runs: {{warmup: 0, count: 1}}\ntiming_only: true\n{delegates}")
            argv = ["run", str(wrapper), "-o", str(folder / "out")] + (["--check"] if case.mode == "check" else [])
            return _cli(argv, [path.name, wrapper.name])
        if case.mode == "check":
            return _cli(["run", str(path), "--check"], [path.name])
        outcome, detail = _api(case, path)
        if outcome != OK:
            return outcome, detail
        variant = _one_run_variant(case.text)
        if variant is None:
            return OK, "loaded; no run variant"
        small = scenarios / f"one_run_{case.seed_file}"
        small.write_text(variant, encoding="utf-8")
        return _cli(["run", str(small), "-o", str(folder / "out")], [small.name])
    except BaseException as exc:  # noqa: BLE001 - the point of the harness: anything else is a crash
        if isinstance(exc, KeyboardInterrupt):
            raise
        return CRASH, "".join(traceback.format_exception(exc))[-3000:]


def serve(work: Path) -> None:
    """The worker: one JSON case per stdin line, one JSON outcome per stdout line; files in `work`."""
    with contextlib.suppress(ImportError, ValueError, OSError):
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    sys.stdout = open(os.devnull, "w")
    import runtime.cli.main  # noqa: F401 - the imports are not a case's time
    import runtime.sweep.runner  # noqa: F401
    import sim.profile  # noqa: F401
    proto.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        case = Case(**json.loads(line))
        folder = work / "case"
        shutil.rmtree(folder, ignore_errors=True)
        start = time.monotonic()
        outcome, detail = run_case(case, folder)
        proto.write(json.dumps({"outcome": outcome, "detail": detail, "seconds": time.monotonic() - start}) + "\n")


class Worker:
    """The worker process, restarted after a hang or a death."""

    def __init__(self, timeout: float = TIMEOUT_S):
        self.timeout = timeout
        self.proc: subprocess.Popen | None = None
        self.work: Path | None = None   # the worker's files, removed by close()

    def _start(self) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "DTB_DELEGATE_TIMEOUT": "5"}
        self.work = self.work or Path(tempfile.mkdtemp(prefix="dtb-scenario-fuzz-"))
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.fuzz_scenarios", "--serve", str(self.work)],
                                     cwd=ROOT, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True, encoding="utf-8", errors="surrogateescape")
        # No time limit on the start: on a cold, busy host its imports (and numba's first compiles) can take
        # minutes; the worker either writes its ready line or exits, and a closed pipe reads as "".
        if not self.proc.stdout.readline():
            self.close()
            raise RuntimeError("the fuzz worker did not start")

    def run(self, case: Case) -> tuple[str, str, float]:
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        start = time.monotonic()
        self.proc.stdin.write(json.dumps(case.__dict__, ensure_ascii=True) + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], self.timeout)
        line = self.proc.stdout.readline() if ready else ""
        seconds = time.monotonic() - start
        if not ready:
            self.close()
            return HANG, f"no answer in {self.timeout:g} s", seconds
        if not line:
            code = self.proc.wait()
            self.proc = None
            return CRASH, f"the worker died (exit {code}; memory?)", seconds
        reply = json.loads(line)
        return reply["outcome"], reply["detail"], reply["seconds"]

    def close(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.communicate()   # waits, and closes its pipes
            self.proc = None
        if self.work is not None:   # rmtree unlinks the case folder's link to tests/, never follows it
            shutil.rmtree(self.work, ignore_errors=True)
            self.work = None


# -- the long run -----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.fuzz_scenarios", description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", type=int, default=500)
    p.add_argument("--seed", type=int, default=0, help="case k uses random.Random(f'{seed}:{k}')")
    p.add_argument("--timeout", type=float, default=TIMEOUT_S, help="seconds a case may take")
    p.add_argument("--save", type=Path, help="write every crashing or hanging case here")
    p.add_argument("--modes", default="api,api,check,run", help="the modes cases are drawn from (a list)")
    p.add_argument("--serve", type=Path, metavar="DIR", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.serve:
        serve(args.serve)
        return 0
    with contextlib.suppress(ImportError, ValueError, OSError):  # the harness itself stays small too
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    worker = Worker(args.timeout)
    outcomes: Counter = Counter()
    by: Counter = Counter()
    bad: list[tuple[int, Case, str, str]] = []
    slowest = (0.0, -1)
    start = time.monotonic()
    try:
        for k in range(args.cases):
            case = make_case(random.Random(f"{args.seed}:{k}"), modes=tuple(args.modes.split(",")))
            outcome, detail, seconds = worker.run(case)
            outcomes[outcome] += 1
            by[(case.kind, case.mode, outcome)] += 1
            slowest = max(slowest, (seconds, k))
            if outcome in (CRASH, HANG):
                bad.append((k, case, outcome, detail))
                print(f"case {k} ({case.kind} {case.seed_file}, {case.mode}): {outcome.upper()}: {detail[-400:]}",
                      flush=True)
                if args.save:
                    args.save.mkdir(parents=True, exist_ok=True)
                    stem = f"case{k}_{case.kind}_{case.mode}_{Path(case.seed_file).stem}"
                    (args.save / f"{stem}.yaml").write_text(case.text, encoding="utf-8", errors="surrogatepass")
                    (args.save / f"{stem}.txt").write_text(f"{case.extra}\n{detail}\n", encoding="utf-8")
            if (k + 1) % 250 == 0:
                print(f"{k + 1} cases, {time.monotonic() - start:.0f} s: {dict(outcomes)}", flush=True)
    finally:
        worker.close()
    elapsed = time.monotonic() - start
    print(f"\n{args.cases} cases (seed {args.seed}) in {elapsed:.0f} s; slowest case {slowest[1]}: {slowest[0]:.1f} s")
    for outcome in (OK, REJECTED, CRASH, HANG):
        print(f"  {outcome:9s} {outcomes[outcome]}")
    for kind in ("scenario", "profile"):
        for mode in MODES:
            row = {o: by[(kind, mode, o)] for o in (OK, REJECTED, CRASH, HANG) if by[(kind, mode, o)]}
            print(f"  {kind:8s} {mode:5s} {row}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
