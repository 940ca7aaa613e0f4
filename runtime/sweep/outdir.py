"""The folder `dtb run` writes into: checked before anything runs, locked while a run uses it, and its
result files replaced as one set, so a killed run never leaves files of two runs side by side.

How a run writes its results:

1. Before any cell runs the folder is created (an existing file, or a path that cannot be made, is an
   OutputFolderError) and locked: `.dtb-lock` inside it, held with flock for the whole run, so the
   kernel releases it even when the process is killed. A second run into a locked folder is refused.
2. A folder holding another scenario's results (per its manifest.json, or an older results.json)
   is refused unless the caller passes overwrite=True (`dtb run --overwrite`); rerunning the same
   scenario replaces its own results.
3. The new files are written into a staging folder inside it (`.dtb-staging-<pid>-<random>/`),
   with a manifest naming each file and its SHA-256.
4. Commit: manifest.json is removed, each staged file is renamed over its old copy (a rename within
   one file system is atomic), and the staged manifest is renamed into place last. SIGINT and SIGTERM
   are held back during these few renames (from the main thread).
5. Only SIGKILL or a crash of the machine can stop a run inside step 4; the folder then has no
   manifest.json, and the next run into it (or anything that takes the lock) finishes the commit
   from the staging folder, which still holds the rest of the set. Staging folders of runs killed
   before step 4 are deleted. So: a folder with a manifest.json holds exactly one run's files.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import shutil
import signal
import stat
import threading
from pathlib import Path
from typing import Callable, Iterator, Mapping

from runtime.ir.errors import TestbedError
from runtime.ir.files import NotRegularFile, read_text

__all__ = ["OutputFolderError", "ResultsFolder", "MANIFEST", "check_output_path"]

MANIFEST = "manifest.json"
_LOCK = ".dtb-lock"
_STAGING = ".dtb-staging-"
# never taken from a staging folder: the cells' database and the lock belong to the folder, not to a set
_NEVER_STAGED = ("results.db", _LOCK)


class OutputFolderError(TestbedError):
    """The output folder cannot be used: a file, impossible to create, busy, or another scenario's."""


def check_output_path(out: Path) -> None:
    """An OutputFolderError unless `out` is a folder, or could be created as one."""
    try:
        if out.exists() and not out.is_dir():
            raise OutputFolderError(f"output folder {out} is a file")
        ancestor = out
        while not ancestor.exists():
            if ancestor.parent == ancestor:
                break
            ancestor = ancestor.parent
        if not ancestor.is_dir():
            raise OutputFolderError(f"output folder {out} cannot be created: {ancestor} is a file")
        if not os.access(ancestor, os.W_OK | os.X_OK):
            raise OutputFolderError(f"output folder {out} cannot be written: no permission in {ancestor}")
    except (OSError, ValueError) as exc:  # a name too long, a NUL in the path, ...
        raise OutputFolderError(f"output folder {out} cannot be used: {exc}") from None


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _open_lock(path: Path):
    """The lock file, opened without following a symlink; a symlink, a directory or anything but a
    plain file there is an OutputFolderError (the lock is written to: never through a link)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        what = "a symlink" if stat.S_ISLNK(st.st_mode) else "a directory" if stat.S_ISDIR(st.st_mode) else \
            "not a regular file"
        raise OutputFolderError(f"{path} is {what}, not dtb's lock file; remove it or choose another output folder")
    # O_NOFOLLOW: a symlink put there since the check fails here instead of being written through
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0), 0o644)
    return os.fdopen(fd, "a+", encoding="utf-8")


def _stageable(name: object) -> bool:
    """A name a staging manifest may list: a plain file name of the set, never the database or the lock."""
    return (isinstance(name, str) and name == Path(name).name and not name.startswith(".") and name != MANIFEST
            and not any(name.startswith(n) for n in _NEVER_STAGED))


class ResultsFolder:
    """`with ResultsFolder(out, scenario) as folder: ... folder.commit(writers)`."""

    def __init__(self, out: str | os.PathLike, scenario: str | os.PathLike, overwrite: bool = False):
        self.out = Path(out)
        self.scenario = Path(scenario)
        self.overwrite = overwrite
        self._lock_file = None
        self._created = False
        self._staging: Path | None = None

    # -- taking the folder ---------------------------------------------------------------------

    def __enter__(self) -> "ResultsFolder":
        check_output_path(self.out)
        try:
            self._created = not self.out.exists()
            self.out.mkdir(parents=True, exist_ok=True)
            self._lock()
        except OSError as exc:
            self._release()
            raise OutputFolderError(f"output folder {self.out} cannot be used: {exc.strerror or exc}") from None
        try:
            self._recover()
            self._check_owner()
        except BaseException:
            self._release()
            raise
        return self

    def __exit__(self, *exc_info) -> None:
        self._release()

    def _lock(self) -> None:
        try:
            import fcntl
        except ImportError:  # no flock on this platform: run unlocked
            return
        path = self.out / _LOCK
        while True:
            f = _open_lock(path)
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                f.seek(0)
                holder = " ".join(f.read(300).split()) or "unknown"
                f.close()
                raise OutputFolderError(f"output folder {self.out} is in use by another dtb run ({holder}); "
                                        f"wait for it to finish or choose another folder") from None
            # the holder before us may have removed the file on its way out: lock the file that is there
            try:
                same = os.fstat(f.fileno()).st_ino == os.lstat(path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            f.close()
        f.seek(0)
        f.truncate()
        f.write(f"pid {os.getpid()}, scenario {self.scenario}\n")
        f.flush()
        self._lock_file = f

    def _release(self) -> None:
        if self._staging is not None:
            shutil.rmtree(self._staging, ignore_errors=True)
            self._staging = None
        if self._lock_file is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.out / _LOCK)   # still holding the lock, so no one is between
            self._lock_file.close()
            self._lock_file = None
        if self._created:  # a run that failed before writing anything leaves no empty folder behind
            with contextlib.suppress(OSError):
                self.out.rmdir()

    def _recover(self) -> None:
        """Finish a commit a killed run left half done; delete staging folders of runs killed earlier."""
        for staging in sorted(self.out.glob(_STAGING + "*")):
            if staging.is_symlink() or not staging.is_dir():   # not a folder a run made: never followed
                with contextlib.suppress(OSError):
                    staging.unlink()
                continue
            staged = staging / MANIFEST
            if _plain_file(staged) and not (self.out / MANIFEST).exists():
                names = _staged_files(staging)
                if names is not None:
                    for name in names:
                        os.replace(staging / name, self.out / name)
                    os.replace(staged, self.out / MANIFEST)
            shutil.rmtree(staging, ignore_errors=True)

    def _check_owner(self) -> None:
        """Refuse a folder holding another scenario's results unless overwriting was asked for."""
        if self.overwrite:
            return
        other = self._owner()
        if other is None or other == str(self.scenario.resolve()):
            return
        raise OutputFolderError(f"output folder {self.out} holds the results of another scenario ({other}); "
                                f"pass --overwrite (overwrite=True) to replace them, or choose another folder")

    def _owner(self) -> str | None:
        """The scenario whose results the folder holds (resolved path), or None when it holds none."""
        for name, key in ((MANIFEST, "scenario"), ("results.json", "scenario")):
            path = self.out / name
            if not path.exists():
                continue
            try:
                text = json.loads(read_text(path))[key]   # a FIFO is refused, not waited on for ever
            except NotRegularFile as exc:
                return f"an unreadable {name}: {exc}"
            except (OSError, ValueError, KeyError, TypeError):
                return f"an unreadable {name}"
            if not isinstance(text, str):
                return f"an unreadable {name}"
            return str(Path(text).resolve()) if name == "results.json" and Path(text).exists() else text
        return None

    # -- writing the results -------------------------------------------------------------------

    def commit(self, writers: Mapping[str, Callable[[Path], object]]) -> None:
        """writers: file name -> function writing that file at the path it is given. All are written
        into the staging folder first; then the set replaces the folder's files (see the module)."""
        refused = [name for name in writers if not _stageable(name)]
        if refused:
            raise OutputFolderError(f"{self.out}: {', '.join(refused)} cannot be part of a result set")
        self._staging = self.out / f"{_STAGING}{os.getpid()}-{secrets.token_hex(4)}"
        self._staging.mkdir()
        for name, write in writers.items():
            write(self._staging / name)
        files = {name: _sha256(self._staging / name) for name in writers}
        manifest = {"schema": 1, "scenario": str(self.scenario.resolve()), "files": files}
        (self._staging / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n",
                                              encoding="utf-8")
        with _signals_held():
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.out / MANIFEST)
            for name in writers:
                os.replace(self._staging / name, self.out / name)
            os.replace(self._staging / MANIFEST, self.out / MANIFEST)
        self._created = False


def _plain_file(path: Path) -> bool:
    return path.is_file() and not path.is_symlink()


def _staged_files(staging: Path) -> list[str] | None:
    """The staged files a half-done commit still has to move, each a plain file whose SHA-256 is the
    one its manifest names; None when the staging folder is not a whole, sound rest of one set (a
    name outside the set's, a changed or linked file): then nothing of it replaces anything."""
    try:
        files = json.loads((staging / MANIFEST).read_text(encoding="utf-8"))["files"]
        if not isinstance(files, dict) or not all(_stageable(n) for n in files):
            return None
        left = [n for n in files if os.path.lexists(staging / n)]
        if all(_plain_file(staging / n) and _sha256(staging / n) == files[n] for n in left):
            return left
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return None


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM wait until the block ends (only the main thread may set handlers; elsewhere
    the block runs as it is, and a signal mid-commit is repaired by the next run)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    wanted = (signal.SIGINT, signal.SIGTERM)
    previous = {s: signal.signal(s, lambda signum, frame: caught.append(signum)) for s in wanted}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        for signum in caught[:1]:
            handler = previous[signum]
            if callable(handler):
                handler(signum, None)
            elif handler == signal.SIG_DFL:
                if signum == signal.SIGINT:
                    raise KeyboardInterrupt
                os.kill(os.getpid(), signum)
