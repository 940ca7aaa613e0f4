"""Damaged results.db files and output folders under `dtb run --resume`: each is refused with one line (a
TestbedError in the API), or, where the damage changed nothing a run reads, resumes to exactly what was
written; nothing is written through a symlink or outside the output folder; a lock waits, then fails."""

from __future__ import annotations

import os
import random
import shutil
import sqlite3
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from runtime.ir.errors import TestbedError as DtbError
from runtime.sweep import results_db
from runtime.sweep.outdir import OutputFolderError, ResultsFolder
from runtime.sweep.results_db import DB_NAME, DatabaseBusyError, ResumeError, row_digest
from runtime.sweep.runner import run_file

ROOT = Path(__file__).resolve().parent.parent
FILES = ("results.json", "results.csv", "report.md", "trace.json")
QUICK = """\
device: pixel4
model: {zoo: tiny_cnn, args: {resolution: 16}}
runs: {warmup: 0, count: 3}
timing_only: true
matrix:
  device: [pixel3, pixel4]
  delegates: [[], [gpu]]
"""


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A scenario and the folder of its finished run (four cells in results.db, the four files)."""
    base = tmp_path_factory.mktemp("db")
    path = base / "sweep.yaml"
    path.write_text(QUICK)
    run_file(path, base / "whole")
    return path, base / "whole"


def copy_of(finished, tmp_path: Path) -> tuple[Path, Path]:
    path, whole = finished
    out = tmp_path / "out"
    shutil.copytree(whole, out)
    return path, out


# ---- damage, generated -------------------------------------------------------------------------

def _sql(db: Path, *statements: str, params=()) -> None:
    with sqlite3.connect(db) as conn:
        for statement in statements:
            conn.execute(statement, params if "?" in statement else ())
    conn.close()


def _redigest(db: Path) -> None:
    """Recompute every row's checksum: damage made by someone who knows the format, so only the other
    checks (types, JSON, zlib, the record against its cell) can find it."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT idx, label, key, record, trace FROM cells").fetchall()
        for idx, label, key, record, trace in rows:
            if all(isinstance(v, t) for v, t in zip((label, key, record, trace), (str, str, str, bytes))):
                conn.execute("UPDATE cells SET digest = ? WHERE idx = ?", (row_digest(idx, label, key, record, trace),
                                                                           idx))
    conn.close()


def flip_bytes(db: Path, rng: random.Random) -> None:
    data = bytearray(db.read_bytes())
    for _ in range(rng.randint(1, 8)):
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    db.write_bytes(bytes(data))


def cut_or_pad(db: Path, rng: random.Random) -> None:
    data = db.read_bytes()
    db.write_bytes(data[:rng.randrange(len(data))] if rng.random() < 0.5 else data + rng.randbytes(rng.randint(1, 5000)))


def wrong_type(db: Path, rng: random.Random) -> None:
    column, value = rng.choice([("record", b"\x00{}"), ("trace", "[]"), ("trace", 7), ("record", 3.5),
                                ("key", b"k"), ("label", b"x")])
    _sql(db, f"UPDATE cells SET {column} = ? WHERE idx = {rng.randrange(4)}", params=(value,))
    if rng.random() < 0.5:
        _redigest(db)


def not_json(db: Path, rng: random.Random) -> None:
    text = rng.choice(["", "{", "nan", "[1, 2", '{"label": ' * 50, "\x00", "not json", "123", '"text"', "[]"])
    _sql(db, f"UPDATE cells SET record = ? WHERE idx = {rng.randrange(4)}", params=(text,))
    if rng.random() < 0.7:
        _redigest(db)


def not_zlib(db: Path, rng: random.Random) -> None:
    blob = rng.choice([b"", b"[]", rng.randbytes(64), zlib.compress(b"{}"), zlib.compress(b"[1, 2]")[:-3],
                       zlib.compress(b"[" + b" " * 5_000_000 + b"]", 9)])   # the last one inflates to 5 MB, no event
    _sql(db, f"UPDATE cells SET trace = ? WHERE idx = {rng.randrange(4)}", params=(blob,))
    if rng.random() < 0.7:
        _redigest(db)


def swap_records(db: Path, rng: random.Random) -> None:
    a, b = rng.sample(range(4), 2)
    column = rng.choice(["record", "trace", "record, trace", "label, key, record, trace, digest"])
    with sqlite3.connect(db) as conn:
        first = conn.execute(f"SELECT {column} FROM cells WHERE idx = ?", (a,)).fetchone()
        second = conn.execute(f"SELECT {column} FROM cells WHERE idx = ?", (b,)).fetchone()
        sets = ", ".join(f"{c.strip()} = ?" for c in column.split(","))
        conn.execute(f"UPDATE cells SET {sets} WHERE idx = ?", (*second, a))
        conn.execute(f"UPDATE cells SET {sets} WHERE idx = ?", (*first, b))
    conn.close()
    if rng.random() < 0.5:
        _redigest(db)


def tables(db: Path, rng: random.Random) -> None:
    _sql(db, rng.choice(["DELETE FROM meta", "UPDATE meta SET value = '9' WHERE key = 'schema'", "DROP TABLE cells",
                         "UPDATE cells SET idx = idx + 100 WHERE idx = 3", "UPDATE meta SET value = 'x' WHERE "
                         "key = 'scenario'", "ALTER TABLE cells DROP COLUMN digest",
                         "UPDATE cells SET digest = x'00' WHERE idx = 0", "UPDATE cells SET digest = 0"]))


DAMAGE = (flip_bytes, cut_or_pad, wrong_type, not_json, not_zlib, swap_records, tables)


def _one_line_error(exc: BaseException, out: Path) -> None:
    message = str(exc)
    assert "\n" not in message and str(out) in message, message


@pytest.mark.parametrize("seed", range(42))
def test_a_damaged_database_is_refused_or_resumes_to_what_was_written(finished, tmp_path, seed):
    rng = random.Random(seed)
    damage = DAMAGE[seed % len(DAMAGE)]
    path, out = copy_of(finished, tmp_path)
    damage(out / DB_NAME, rng)
    try:
        run_file(path, out, resume=True)
    except DtbError as exc:
        _one_line_error(exc, out)
        return
    # the damage touched nothing the run reads (free space in a page, say): the result is what was written
    for name in FILES:
        assert (out / name).read_bytes() == (finished[1] / name).read_bytes(), (damage.__name__, name)


@pytest.mark.parametrize("damage", [not_json, not_zlib, swap_records, wrong_type])
def test_damage_behind_a_valid_checksum_is_still_found(finished, tmp_path, damage):
    """Each check of a row on its own: the checksums are made right again after the damage."""
    path, out = copy_of(finished, tmp_path)
    for seed in range(6):
        shutil.copy(finished[1] / DB_NAME, out / DB_NAME)
        damage(out / DB_NAME, random.Random(seed))
        _redigest(out / DB_NAME)
        with pytest.raises(ResumeError, match="cannot resume") as info:
            run_file(path, out, resume=True)
        _one_line_error(info.value, out)


def test_a_damaged_database_on_the_command_line_is_one_line_and_exit_1(finished, tmp_path):
    path, out = copy_of(finished, tmp_path)
    _sql(out / DB_NAME, "UPDATE cells SET record = '{\"label\": \"other\"}' WHERE idx = 1")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "runtime.cli.main", "run", str(path), "-o", str(out), "--resume"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if "error" in line]
    assert len(lines) == 1 and "cannot resume" in lines[0] and "cell 2" in lines[0], done.stderr


def test_a_damaged_database_is_replaced_by_a_run_without_resume(finished, tmp_path):
    path, out = copy_of(finished, tmp_path)
    _sql(out / DB_NAME, "UPDATE cells SET trace = x'00' WHERE idx = 2")
    run_file(path, out)
    for name in FILES:
        assert (out / name).read_bytes() == (finished[1] / name).read_bytes(), name


# ---- a database another process holds ------------------------------------------------------------

@pytest.mark.parametrize("resume", [True, False])
def test_a_locked_database_waits_then_fails_with_one_line_and_is_left_as_it_was(finished, tmp_path, monkeypatch,
                                                                                resume):
    path, out = copy_of(finished, tmp_path)
    monkeypatch.setattr(results_db, "BUSY_SECONDS", 0.2)
    before = (out / DB_NAME).read_bytes()
    holder = sqlite3.connect(out / DB_NAME, isolation_level=None)
    holder.execute("PRAGMA journal_mode=WAL")
    holder.execute("BEGIN IMMEDIATE")   # a writer's lock, as a second writer would hold it
    try:
        with pytest.raises(DatabaseBusyError, match="is locked by another process") as info:
            run_file(path, out, resume=resume)
        _one_line_error(info.value, out)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert (out / DB_NAME).read_bytes() == before
    run_file(path, out, resume=True)   # and once it is free, the run goes on from it


# ---- links and folders where files belong ----------------------------------------------------------

@pytest.mark.parametrize("name", [DB_NAME, DB_NAME + "-wal", ".dtb-lock"])
@pytest.mark.parametrize("kind", ["symlink", "directory", "dangling"])
@pytest.mark.parametrize("resume", [True, False])
def test_a_symlink_or_directory_in_place_of_the_database_or_lock_is_refused(finished, tmp_path, name, kind, resume):
    path, out = copy_of(finished, tmp_path)
    outside = tmp_path / "outside"
    outside.write_bytes(b"precious")
    target = out / name
    if target.exists():
        target.unlink()
    if kind == "symlink":
        target.symlink_to(outside)
    elif kind == "dangling":
        target.symlink_to(tmp_path / "nowhere")
    else:
        target.mkdir()
    with pytest.raises(OutputFolderError) as info:
        run_file(path, out, resume=resume)
    _one_line_error(info.value, out)
    assert outside.read_bytes() == b"precious" and not (tmp_path / "nowhere").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "outside"]   # nothing beside -o


def test_a_staging_folder_never_replaces_the_database_or_takes_a_changed_file(finished, tmp_path):
    import hashlib
    import json

    path, out = copy_of(finished, tmp_path)
    db = (out / DB_NAME).read_bytes()
    (out / "manifest.json").unlink()   # as a run killed inside its commit leaves it
    bad = {"staging-db": {DB_NAME: b"not the cells"}, "staging-dot": {".dtb-lock": b"x"},
           "staging-up": {"../escape": b"x"}}
    for folder, files in bad.items():
        staging = out / f".dtb-staging-{folder}"
        staging.mkdir()
        listed = {}
        for name, data in files.items():
            if "/" not in name:
                (staging / name).write_bytes(data)
            listed[name] = hashlib.sha256(data).hexdigest()
        (staging / "manifest.json").write_text(json.dumps({"files": listed}))
    changed = out / ".dtb-staging-changed"
    changed.mkdir()
    (changed / "results.json").write_text("{}")
    (changed / "manifest.json").write_text(json.dumps({"files": {"results.json": "0" * 64}}))
    (out / ".dtb-staging-link").symlink_to(tmp_path)   # a link where a staging folder goes: never followed
    with ResultsFolder(out, path):
        pass
    assert (out / DB_NAME).read_bytes() == db
    assert (out / "results.json").read_bytes() == (finished[1] / "results.json").read_bytes()
    assert not list(out.glob(".dtb-staging-*")) and not (tmp_path / "escape").exists()
    assert tmp_path.exists() and (tmp_path / "out").is_dir()
