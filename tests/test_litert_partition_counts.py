"""apply_delegates partitions every fixture model as TFLite does: with an XNNPACK-like delegate it
reports the same "Replacing N out of M node(s) ... yielding K partitions" as LiteRT's own XNNPACK
delegate does on the same .tflite file.

LiteRT's counts are read at test time from TFLite's log line, in one child process for all models
(as tests/litert_oracle.py runs LiteRT). TFLite logs that line at VERBOSE severity
(Subgraph::ReplaceNodeSubsetsWithDelegateKernels, tflite/core/subgraph.cc), below the INFO threshold
of release builds, and the wheel offers no setter for the threshold; the child therefore lowers
tflite::logging_internal::MinimalLogger::minimum_log_severity_ itself, finding it through the
library's ELF symbol table and the loaded library's base address (dlinfo). When that variable
cannot be found, or does not hold INFO, the whole module is skipped with that reason.

Every fixture matches exactly: fully delegated float, fp16-weight and int8 models, partially
delegated LSTM, hybrid-quantized, uint8 and mixed-op models, and models XNNPACK takes nothing from
(TFLite then prints no line, and neither does apply_delegates).
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from runtime.interpreter.delegation import apply_delegates
from runtime.ops.dynamic import dynamic_tensors
from runtime.ir.optypes import OpType
from runtime.model.tflite_read import load
from tests.conftest import FIXTURES
from tests.litert_oracle import available
from tests.xnnpack_like import XnnpackLike

# Models with what tests/xnnpack_like.py states it does not model (MediaPipe's custom ops, DENSIFY of
# static sparse weights, which LiteRT's XNNPACK unpacks and takes): the test delegate cannot answer for them.
_NOT_MODELLED = {OpType.CUSTOM, OpType.DENSIFY}


def _modelled(path) -> bool:
    return not any(op.type in _NOT_MODELLED for op in load(path).ops)


MODELS = sorted(p for sub in ("models", "quant", "published") for p in (FIXTURES / sub).glob("*.tflite")
                if _modelled(p))

_LINE = re.compile(r"Replacing (\d+) out of (\d+) node\(s\) with delegate \(([^)]*)\) node, "
                   r"yielding (\d+) partitions for (subgraph (\d+)|the whole graph)")

_SKIP_EXIT = 3  # the child could not lower TFLite's log threshold

_CHILD = r'''
import ctypes, os, struct, sys
import numpy as np
import ai_edge_litert
from ai_edge_litert.interpreter import Interpreter

LIBRARY = os.path.join(os.path.dirname(ai_edge_litert.__file__), "libpywrap_litert_common.so")
SYMBOL = b"_ZN6tflite16logging_internal13MinimalLogger21minimum_log_severity_E"
VERBOSE, INFO = 0, 1  # tflite::LogSeverity

def say(text):
    print(text, file=sys.stderr, flush=True)

def symbol_value(path, name):
    """st_value of `name` in the .symtab of a 64-bit little-endian ELF file, or None."""
    with open(path, "rb") as f:
        elf = f.read()
    if elf[:4] != b"\x7fELF" or elf[4] != 2 or elf[5] != 1:
        return None
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", elf, 0x3A)
    for i in range(shnum):
        header = shoff + i * shentsize
        sh_type, = struct.unpack_from("<I", elf, header + 4)
        if sh_type != 2:  # SHT_SYMTAB
            continue
        offset, size = struct.unpack_from("<QQ", elf, header + 24)
        link, = struct.unpack_from("<I", elf, header + 40)
        str_offset, str_size = struct.unpack_from("<QQ", elf, shoff + link * shentsize + 24)
        at = elf[str_offset:str_offset + str_size].find(b"\0" + name + b"\0")
        if at < 0:
            return None
        entry = np.dtype([("name", "<u4"), ("info", "u1"), ("other", "u1"), ("shndx", "<u2"),
                          ("value", "<u8"), ("size", "<u8")])
        symbols = np.frombuffer(elf, entry, count=size // entry.itemsize, offset=offset)
        hits = np.nonzero(symbols["name"] == at + 1)[0]
        return int(symbols["value"][hits[0]]) if hits.size else None
    return None

class LinkMap(ctypes.Structure):
    _fields_ = [("l_addr", ctypes.c_size_t), ("l_name", ctypes.c_char_p)]

def load_bias(path):
    handle = ctypes.CDLL(path)._handle  # the copy the interpreter wrapper already loaded
    for libc in (None, "libdl.so.2"):
        try:
            dlinfo = ctypes.CDLL(libc).dlinfo
        except (OSError, AttributeError):
            continue
        link_map = ctypes.POINTER(LinkMap)()
        if dlinfo(ctypes.c_void_p(handle), 2, ctypes.byref(link_map)) == 0:  # RTLD_DI_LINKMAP
            return link_map.contents.l_addr
    return None

value = symbol_value(LIBRARY, SYMBOL) if os.path.exists(LIBRARY) else None
bias = load_bias(LIBRARY) if value is not None else None
if value is None or bias is None:
    say("@@NOLOG tflite's MinimalLogger::minimum_log_severity_ is not in the symbol table of " + LIBRARY)
    sys.exit(3)
threshold = ctypes.c_int.from_address(bias + value)
if threshold.value != INFO:
    say("@@NOLOG the log threshold found in %s reads %d, not INFO" % (LIBRARY, threshold.value))
    sys.exit(3)
threshold.value = VERBOSE

for k, model in enumerate(sys.argv[1:]):
    say("@@MODEL %d" % k)
    try:
        Interpreter(model_path=model, num_threads=1).allocate_tensors()
    except Exception as exc:
        say("@@ERROR %d %s: %s" % (k, type(exc).__name__, exc))
say("@@DONE")
'''


def _counts(lines) -> tuple[int, int, str, int] | None:
    """(N, M, delegate, K) from the line for the model's main graph, or None when there is none."""
    found = None
    for line in lines:
        m = _LINE.search(line)
        if m and m[6] in (None, "0"):
            if found is not None:
                raise AssertionError(f"two partition lines for one graph: {found} and {line!r}")
            found = (int(m[1]), int(m[2]), m[3], int(m[4]))
    return found


@pytest.fixture(scope="module")
def litert_counts() -> dict:
    """Model path -> LiteRT's (N, M, delegate, K), None (nothing delegated) or an error string."""
    if not available():
        pytest.skip("LiteRT (ai-edge-litert) is not installed")
    proc = subprocess.run([sys.executable, "-c", _CHILD, *map(str, MODELS)], capture_output=True, text=True)
    if proc.returncode == _SKIP_EXIT and "@@NOLOG" in proc.stderr:
        pytest.skip(proc.stderr.split("@@NOLOG", 1)[1].strip().splitlines()[0])
    if proc.returncode != 0 or "@@DONE" not in proc.stderr:
        raise RuntimeError(f"LiteRT child process failed ({proc.returncode}): {proc.stderr[-2000:]}")
    per_model: dict[int, list[str]] = {}
    errors: dict[int, str] = {}
    current = None
    for line in proc.stderr.splitlines():
        if line.startswith("@@MODEL "):
            current = int(line.split()[1])
            per_model[current] = []
        elif line.startswith("@@ERROR "):
            _, k, message = line.split(" ", 2)
            errors[int(k)] = message
        elif current is not None:
            per_model[current].append(line)
    return {path: errors.get(k) or _counts(per_model.get(k, ())) for k, path in enumerate(MODELS)}


def _ours(path) -> tuple[tuple[int, int, str, int] | None, object]:
    graph = load(path)
    delegation = apply_delegates(graph, [XnnpackLike()], dynamic_tensors(graph))
    return _counts(delegation.log), delegation


def test_litert_reported_on_every_fixture(litert_counts):
    """The capture works: LiteRT built every model, and its reports cover full, partial and no delegation."""
    assert len(MODELS) > 50
    errors = {p.name: r for p, r in litert_counts.items() if isinstance(r, str)}
    assert not errors
    reports = [r for r in litert_counts.values() if r is not None]
    assert all(r[2] == "TfLiteXNNPackDelegate" for r in reports)
    assert any(n == m for n, m, _, _ in reports), "no fully delegated model"
    assert any(0 < n < m for n, m, _, _ in reports), "no partially delegated model"
    assert len(reports) < len(MODELS), "every model delegated: the int8-only-CPU ops should not be"


@pytest.mark.parametrize("path", MODELS, ids=[f"{p.parent.name}/{p.stem}" for p in MODELS])
def test_counts_match_litert(path, litert_counts):
    want = litert_counts[path]
    assert not isinstance(want, str), f"LiteRT could not build {path.name}: {want}"
    got, delegation = _ours(path)
    assert got == want, (f"{path.name}: LiteRT (N, M, delegate, K) = {want}, apply_delegates gives {got}; "
                         f"refused: {[(u.name, u.reason) for u in delegation.per_delegate[0].unsupported]}")
    assert not delegation.restored


def test_fp16_weight_dequantize_follows_its_consumers():
    """lstm_fp16: XNNPACK unpacks float16 weights itself, so a DEQUANTIZE of static fp16 weights goes
    with the nodes reading it: taken for the FULLY_CONNECTED, left on the CPU for the LSTM."""
    graph = load(FIXTURES / "models" / "lstm_fp16.tflite")
    delegate = XnnpackLike()
    consumers = graph.consumers()
    taken, kept = 0, 0
    for op in graph.ops:
        if op.type.name != "DEQUANTIZE":
            continue
        readers = {graph.ops[j].type.name for j in consumers.get(op.outputs[0], [])}
        answer = delegate.is_node_supported(op, graph)
        if readers == {"FULLY_CONNECTED"}:
            assert answer, answer.reason
            taken += 1
        else:
            assert readers == {"UNIDIRECTIONAL_SEQUENCE_LSTM"}
            assert not answer and "UNIDIRECTIONAL_SEQUENCE_LSTM" in answer.reason
            kept += 1
    assert (taken, kept) == (2, 14)
