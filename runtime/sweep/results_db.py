"""The results database of `dtb run` (results.db): every finished cell's record and trace, so a run can resume."""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import hashlib
import json
import os
import re
import sqlite3
import stat
import zlib
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from runtime.ir.errors import TestbedError
from runtime.ir.files import open_regular
from runtime.sweep.outdir import OutputFolderError

__all__ = ["DB_NAME", "BUSY_SECONDS", "CellStore", "DatabaseBusyError", "ResumeError", "row_digest", "cell_key", "pack_events", "is_database", "read_results"]

DB_NAME = "results.db"
# 2: each cell row carries the SHA-256 of its own fields (digest), checked on --resume
_SCHEMA = "2"
BUSY_SECONDS = 10.0   # how long a run waits for a results.db that another process holds locked
_SIDE_FILES = ("-wal", "-shm", "-journal")
_MAGIC = b"SQLite format 3\x00"
_TABLES = ("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
           "CREATE TABLE IF NOT EXISTS cells (idx INTEGER PRIMARY KEY, label TEXT NOT NULL, key TEXT NOT NULL, "
           "record TEXT NOT NULL, trace BLOB NOT NULL, digest TEXT NOT NULL)")
_TRACE_CHUNK = 1 << 20   # a stored trace is checked by decompressing it this much at a time, never whole


class ResumeError(TestbedError):
    """`--resume` cannot continue: the stored cells are not this scenario's cells, or they are damaged."""


class DatabaseBusyError(OutputFolderError):
    """results.db stayed locked by another process for BUSY_SECONDS."""


def row_digest(idx: int, label: str, key: str, record: str, trace: bytes) -> str:
    """The SHA-256 a cell row carries: of its index, label, key, record and trace, each length-prefixed,
    so a flipped byte, a record moved to another row or two rows swapped no longer match."""
    digest = hashlib.sha256(b"dtb-cell-2")
    for part in (str(idx).encode(), label.encode("utf-8"), key.encode("utf-8"), record.encode("utf-8"), trace):
        digest.update(len(part).to_bytes(8, "little"))
        digest.update(part)
    return digest.hexdigest()


# ---- what makes a cell the same cell -----------------------------------------------------------

def cell_key(sc) -> str:
    """SHA-256 of a cell's definition: every compared field of its Scenario and the bytes of every file
    it reads (model, inputs, phone profile), so an edited model file is not mistaken for the same cell."""
    digest = hashlib.sha256(json.dumps(_canonical(sc), sort_keys=True).encode("utf-8"))
    for path in _files_of(sc):
        digest.update(f"\0{path}\0{_file_digest(path)}".encode("utf-8"))
    return digest.hexdigest()


def _canonical(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        # compare=False fields (InputSpec.where: a line number) do not make a different cell
        return {f.name: _canonical(getattr(value, f.name)) for f in dataclasses.fields(value) if f.compare}
    if isinstance(value, Mapping):
        return {repr(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return repr(value)


def _files_of(sc) -> list[Path]:
    """Every file the cell reads: each Path in its definition but the scenario's own, its shipped phone,
    and the base a derived phone's figures come from."""
    from sim.profile import PROFILE_DIR, profile_files

    phone = profile_files(sc.device_file or PROFILE_DIR / f"{sc.device}.yaml")
    found: list[Path] = list(phone[1:] if sc.device_file else phone)
    stack = [getattr(sc, f.name) for f in dataclasses.fields(sc) if f.name != "source"]
    while stack:
        value = stack.pop()
        if isinstance(value, Path):
            found.append(value)
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            stack.extend(getattr(value, f.name) for f in dataclasses.fields(value))
        elif isinstance(value, (list, tuple)):
            stack.extend(value)
    return sorted(found)


_DIGESTS: dict[tuple, str] = {}


def _file_digest(path: Path) -> str:
    """The file's SHA-256, read once per file version (a 10,000-cell matrix on one model reads it once)."""
    try:
        st = os.stat(path)
        key = (str(path), st.st_mtime_ns, st.st_size)
        if key not in _DIGESTS:
            _DIGESTS[key] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
        return _DIGESTS[key]
    except OSError:
        return "unreadable"


def pack_events(events: list) -> bytes:
    """A cell's trace events as stored: their JSON list, compressed where the cell ran (megabytes of
    JSON a cell shrink tenfold before they travel from a Dask worker)."""
    return zlib.compress(json.dumps(events).encode("utf-8"), 1)


# ---- the store a run writes --------------------------------------------------------------------

def _check_plain(path: Path) -> None:
    """results.db and SQLite's side files must be plain files or absent: nothing is written through a
    symlink (it could point outside the output folder), and a directory there is no database."""
    for name in (path.name, *(path.name + side for side in _SIDE_FILES)):
        target = path.with_name(name)
        try:
            st = os.lstat(target)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise OutputFolderError(f"{target}: cannot be used: {exc.strerror or exc}") from None
        what = "a symlink" if stat.S_ISLNK(st.st_mode) else "a directory" if stat.S_ISDIR(st.st_mode) else \
            None if stat.S_ISREG(st.st_mode) else "not a regular file"
        if what:
            raise OutputFolderError(f"{target} is {what}, not a results database; nothing is written through it: "
                                    f"remove it or choose another output folder")


def _is_busy(exc: sqlite3.Error) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and any(w in str(exc) for w in ("locked", "busy"))


def _busy(path: Path) -> DatabaseBusyError:
    return DatabaseBusyError(f"{path} is locked by another process (waited {BUSY_SECONDS:g} s); stop the other "
                             f"program using it (an sqlite3 shell, a dtb report) and run again")


def _connect(path: Path) -> sqlite3.Connection:
    _check_plain(path)
    # timeout: SQLite retries a locked database this long before "database is locked"
    conn = sqlite3.connect(path, isolation_level=None, timeout=BUSY_SECONDS)   # transactions are ours
    try:
        # WAL: a commit is one append to the log, and a process killed at any moment leaves the last
        # committed state; FULL: a committed cell survives a machine crash too (one fsync per cell).
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
    except sqlite3.Error as exc:
        conn.close()
        if _is_busy(exc):
            raise _busy(path) from None
        raise
    return conn


@contextlib.contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One transaction around the block, table changes included: a kill leaves all of it or none."""
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        if _is_busy(exc):
            raise _busy(Path(conn.execute("PRAGMA database_list").fetchone()[2])) from None
        raise
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _remove(path: Path) -> None:
    """Delete a database and its log; the log first, so a stale log is never replayed into a new file."""
    for name in (f"{path.name}-wal", f"{path.name}-shm", path.name):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path.with_name(name))


class CellStore:
    """results.db of an output folder, used by the run that holds the folder's lock.

    A new run (no `resume`) starts it empty; with `resume` the finished cells stay if each still
    matches its cell of `cells`, else ResumeError. The file is created with the first finished cell,
    so a run that fails before any cell finishes leaves nothing behind."""

    def __init__(self, out: Path, scenario: str | os.PathLike, cells: Sequence, resume: bool = False,
                 overwrite: bool = False):
        self.path = Path(out) / DB_NAME
        self.scenario, self.cells = Path(scenario), cells
        self.done: set[int] = set()
        self._conn: sqlite3.Connection | None = None
        _check_plain(self.path)
        if self.path.exists():
            self._open_existing(resume, overwrite)

    def __enter__(self) -> "CellStore":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _open_existing(self, resume: bool, overwrite: bool) -> None:
        conn = None
        try:
            conn = _connect(self.path)
            if not conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                self._conn = conn   # killed before its tables were made: no cell was stored
                return self._start()
            meta = dict(conn.execute("SELECT key, value FROM meta"))
            if meta.get("schema") != _SCHEMA:
                raise sqlite3.DatabaseError(f"schema {meta.get('schema')!r}, expected {_SCHEMA}")
            rows = _sound_rows(conn) if resume else []
        except sqlite3.DatabaseError as exc:
            if conn is not None:
                conn.close()
            if _is_busy(exc):
                raise _busy(self.path) from None
            if resume:
                raise ResumeError(f"{self.path}: cannot resume: not a sound results database "
                                  f"({' '.join(str(exc).split())[:300]}); run without --resume to start over") from None
            _remove(self.path)   # a new run replaces it, as it replaces results.json
            return
        self._conn = conn
        self._check_owner(meta.get("scenario"), resume, overwrite)
        if resume:
            self._check_cells(rows)
        else:
            self._start()

    def _check_owner(self, owner: str | None, resume: bool, overwrite: bool) -> None:
        mine = str(self.scenario.resolve())
        if owner == mine or (overwrite and not resume):
            return
        if resume:
            raise ResumeError(f"{self.path}: cannot resume: it holds the cells of another scenario ({owner})")
        raise OutputFolderError(f"output folder {self.path.parent} holds cells of another scenario ({owner}) in "
                                f"{DB_NAME}; pass --overwrite (overwrite=True) to replace them, or choose another "
                                f"folder")

    def _check_cells(self, rows: list[tuple[int, str, str]]) -> None:
        for idx, label, key in sorted(rows):
            if idx >= len(self.cells) or key != cell_key(self.cells[idx]) or label != self.cells[idx].label:
                shown = f"cell {idx + 1} ('{self.cells[idx].label}')" if idx < len(self.cells) else f"cell {idx + 1}"
                raise ResumeError(f"{self.path}: cannot resume: the scenario changed since its cells ran ({shown} is "
                                  f"not the cell it stored); run without --resume to start over")
            self.done.add(idx)
        with _transaction(self._conn) as conn:
            self._write_meta(conn)

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = _connect(self.path)
            self._start()
        return self._conn

    def _start(self) -> None:
        """An empty store for this run, in one transaction: a kill leaves the old store or the new one."""
        with _transaction(self._conn) as conn:
            for statement in _TABLES:
                conn.execute(statement)
            conn.execute("DELETE FROM cells")
            conn.execute("DELETE FROM meta")
            self._write_meta(conn)

    def _write_meta(self, conn: sqlite3.Connection) -> None:
        meta = {"schema": _SCHEMA, "scenario": str(self.scenario.resolve()), "scenario_arg": str(self.scenario),
                "cells": str(len(self.cells))}
        conn.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", meta.items())

    def put(self, k: int, record_json: str, events: bytes) -> None:
        """Cell k's record (JSON) and trace events (pack_events), committed as one transaction."""
        with _transaction(self._connection()) as conn:
            label, key = self.cells[k].label, cell_key(self.cells[k])
            conn.execute("INSERT OR REPLACE INTO cells VALUES (?, ?, ?, ?, ?, ?)",
                         (k, label, key, record_json, events, row_digest(k, label, key, record_json, events)))
        self.done.add(k)

    def records(self) -> list[dict]:
        """Every cell's record, in cell order."""
        self._complete()
        try:
            return [json.loads(r) for (r,) in self._conn.execute("SELECT record FROM cells ORDER BY idx")]
        except (sqlite3.Error, ValueError, TypeError) as exc:
            raise TestbedError(f"{self.path}: its cells cannot be read back ({exc})") from None

    def write_trace(self, path: Path) -> None:
        """trace.json from the stored events, one cell at a time, as runtime.measure.chrome_trace.write_trace writes it."""
        self._complete()
        with open(path, "xb") as f:   # bytes as stored: json.dumps wrote ASCII, so no decoding is needed
            f.write(b'{"traceEvents": [')
            first = True
            for (blob,) in self._conn.execute("SELECT trace FROM cells ORDER BY idx"):
                try:
                    inner = zlib.decompress(blob)[1:-1]
                except (zlib.error, TypeError) as exc:
                    raise TestbedError(f"{self.path}: a stored trace cannot be read back ({exc})") from None
                if inner:
                    f.write(b"" if first else b", ")
                    f.write(inner)
                    first = False
            f.write(b'], "displayTimeUnit": "ms"}')

    def _complete(self) -> None:
        missing = len(self.cells) - len(self.done)
        if missing:
            raise TestbedError(f"{self.path}: {missing} of {len(self.cells)} cells have no result")
        self._connection()


# ---- checking what a resumed run keeps -------------------------------------------------------

def _sound_rows(conn: sqlite3.Connection) -> list[tuple[int, str, str]]:
    """(index, label, key) of every stored cell after SQLite's own check of the file and a check of each
    row: column types, its digest, its record as JSON, its trace as zlib-compressed JSON; a
    sqlite3.DatabaseError naming the first damage found."""
    problems = [p for (p,) in conn.execute("PRAGMA quick_check")]
    if problems != ["ok"]:
        raise sqlite3.DatabaseError(f"SQLite's check failed: {'; '.join(map(str, problems[:3]))}")
    rows = []
    for row in conn.execute("SELECT idx, label, key, record, trace, digest FROM cells ORDER BY rowid"):
        problem = _row_problem(*row)
        if problem:
            shown = row[0] + 1 if isinstance(row[0], int) else repr(row[0])
            raise sqlite3.DatabaseError(f"stored cell {shown}: {problem}")
        rows.append(row[:3])
    return rows


def _row_problem(idx, label, key, record, trace, digest) -> str | None:
    """What is wrong with one stored cell row, or None."""
    types = (int, str, str, str, bytes, str)
    if not all(isinstance(v, t) for v, t in zip((idx, label, key, record, trace, digest), types)):
        return "a column holds the wrong type"
    if idx < 0:
        return "a negative index"
    if digest != row_digest(idx, label, key, record, trace):
        return "its checksum does not match (a damaged or moved record)"
    try:
        value = json.loads(record)
    except ValueError:
        return "its record is not JSON"
    # a cell's record is one object naming the cell, or a list of one per app stream (runtime/sweep/app_streams.py)
    if isinstance(value, list):
        mine = bool(value) and all(isinstance(p, dict) and str(p.get("label")).startswith(f"{label} app=")
                                   for p in value)
    else:
        mine = isinstance(value, dict) and value.get("label") == label
    if not mine:
        return "its record is not this cell's record"
    return _trace_problem(trace, idx + 1)


def _trace_problem(blob: bytes, pid: int) -> str | None:
    """A stored trace must inflate to a JSON list of this cell's events (each names process idx + 1, as
    runner.run_cell made them); checked a chunk at a time, so a compression bomb never comes out whole."""
    inflate, data, carry, first, last, seen = zlib.decompressobj(), blob, b"", b"", b"", 0
    try:
        while True:
            out = inflate.decompress(data, _TRACE_CHUNK) if data else inflate.flush()
            data = inflate.unconsumed_tail
            first, last = first or out[:1], out[-1:] or last
            buffer, done = carry + out, not data
            checked = _pids(buffer, pid, whole=done)
            if checked is None:
                return "its trace holds another cell's events"
            seen += checked[0]
            carry = buffer[max(checked[1], len(buffer) - 32):]
            if done:
                break
        if not inflate.eof:
            return "its trace is cut short"
    except zlib.error:
        return "its trace is not zlib-compressed"
    if (first, last) != (b"[", b"]"):
        return "its trace is not a JSON list"
    return None if seen else "its trace holds no events of this cell"


_PID = re.compile(rb'"pid": (-?[0-9]+)')


def _pids(buffer: bytes, pid: int, whole: bool) -> tuple[int, int] | None:
    """(how many `"pid": N` in buffer, where the last ended), None if one is not `pid`; a number that
    reaches the buffer's end may go on in the next chunk, so it waits unless the buffer is `whole`."""
    count, end, wanted = 0, 0, str(pid).encode()
    for match in _PID.finditer(buffer):
        if match.end() == len(buffer) and not whole:
            break
        if match.group(1) != wanted:
            return None
        count, end = count + 1, match.end()
    return count, end


# ---- reading it back (dtb report) ------------------------------------------------------------------

def is_database(path: str | os.PathLike) -> bool:
    """Whether the file is an SQLite database (read from its header, whatever its name)."""
    try:
        with open_regular(path) as f:   # a FIFO is no database (and open() would wait for a writer)
            return f.read(len(_MAGIC)) == _MAGIC
    except OSError:
        return False


def read_results(path: str | os.PathLike) -> tuple[dict, int]:
    """results.json's object from a results.db (the cells finished so far, in cell order) and the
    number of cells its run has; TestbedError naming the file when it cannot be read."""
    path = Path(path)
    try:
        with contextlib.closing(sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)) as conn:
            meta = dict(conn.execute("SELECT key, value FROM meta"))
            records = [json.loads(r) for (r,) in conn.execute("SELECT record FROM cells ORDER BY idx")]
    except (sqlite3.Error, ValueError) as exc:
        raise TestbedError(f"{path}: not a readable results database ({' '.join(str(exc).split())})") from None
    return {"schema": 1, "scenario": meta.get("scenario_arg"), "records": records}, int(meta.get("cells", 0))
