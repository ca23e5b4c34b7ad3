"""What every importer obeys when it turns someone else's files into a task folder.

A Harbor task folder, a SWE-bench row or an R2E-Gym row is input from outside, so:

- a task id, and every path a row names (a node id's file, a generated test file), is
  checked before anything is written: an id is one path component (the loader's id rule),
  a path is relative with no ``..`` part;
- files are copied without following symbolic links: a link inside the repository that
  stays inside it is copied as a link, any other link is refused with its path named
  (a link in the hidden tests would copy the host file it names into every grading);
  FIFOs, sockets and devices are refused;
- sizes are capped (one file, a whole tree, its number of entries);
- a task folder is written in a staging folder beside ``--out`` and moved into place only
  when complete: a failed import leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath

from repogym.scenarios.task import TaskError, is_valid_id

#: One file's largest size (bytes).
MAX_FILE_BYTES = 64 << 20
#: A copied tree's largest total size (bytes) and number of entries.
MAX_TREE_BYTES = 1 << 30
MAX_TREE_ENTRIES = 200_000


class UnsafeTaskFile(TaskError):
    """An input an importer refuses: a bad id or path, a link, a special file, a size."""


def check_id(task_id: object, source: str) -> str:
    """``task_id`` if it is a valid task id (one path component), else UnsafeTaskFile.

    Args:
        task_id: The id as read from the input.
        source: Where it was read (named in the error).
    """
    if not isinstance(task_id, str) or not is_valid_id(task_id):
        raise UnsafeTaskFile(
            f"{source}: id {task_id!r} is not a valid task id (it must be "
            "one path component: lowercase letters, digits, '.', '_' and "
            "'-', starting with a letter or digit). Fix: rename it, e.g. "
            'id = "my-task"'
        )
    return task_id


def check_relpath(rel: str, source: str) -> str:
    """``rel`` normalised, if it is a relative path with no ``..``; else UnsafeTaskFile."""
    if not isinstance(rel, str) or not rel or "\0" in rel or "\\" in rel:
        raise UnsafeTaskFile(
            f"{source}: path {rel!r} is empty or has a NUL or backslash. "
            "Fix: use a relative POSIX path"
        )
    p = PurePosixPath(rel)
    if p.is_absolute() or ".." in p.parts or str(p) == ".":
        raise UnsafeTaskFile(
            f"{source}: path {rel!r} is absolute or leaves its folder "
            "('..'). Fix: use a path inside the repository"
        )
    return str(p)


def _link_inside(root: Path, link: Path) -> bool:
    """True if the relative symlink ``link`` names a path inside ``root`` (lexically)."""
    target = os.readlink(link)
    if os.path.isabs(target):
        return False
    joined = posixpath.normpath(posixpath.join(str(link.parent.relative_to(root)), target))
    return joined != ".." and not joined.startswith("../")


def _refuse(path: Path, why: str, fix: str) -> UnsafeTaskFile:
    return UnsafeTaskFile(f"{path}: {why}. Fix: {fix}")


def check_file(path: Path, *, max_bytes: int = MAX_FILE_BYTES) -> os.stat_result:
    """``lstat`` of ``path`` if it is a regular file within the size cap (links refused)."""
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise _refuse(
            path,
            f"a symbolic link (to {os.readlink(path)!r}); task files are "
            "copied without following links",
            "replace the link with the file",
        )
    if not stat.S_ISREG(st.st_mode):
        raise _refuse(path, "not a regular file (a FIFO, socket or device)", "remove it")
    if st.st_size > max_bytes:
        raise _refuse(
            path,
            f"{st.st_size} bytes, over the {max_bytes}-byte cap of one task file",
            "remove it or make it smaller",
        )
    return st


def copy_file(src: Path, dest: Path) -> None:
    """Copy one regular file (never through a link) to ``dest``."""
    check_file(src)
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dest, follow_symlinks=False)
    shutil.copymode(src, dest)


def walk_tree(
    src: Path, *, internal_links: bool = False, ignore: Callable[[str], bool] = lambda name: False
) -> Iterator[tuple[Path, str]]:
    """Every entry of the tree ``src`` as ``(relative path, "dir" | "file" | "link")``,
    checked; links are never followed.

    Args:
        src: The folder; itself not a link.
        internal_links: Allow a relative link whose target stays inside ``src`` (a link a
            repository holds); otherwise every link is refused.
        ignore: Names (files or folders) to leave out, e.g. ``__pycache__``.

    Raises:
        UnsafeTaskFile: a link, a special file or a size over the caps (the path named).
    """
    src = Path(src)
    if src.is_symlink() or not src.is_dir():
        raise _refuse(src, "not a folder (or a symbolic link to one)", "make it a real folder")
    total = entries = 0
    for dirpath, dirnames, filenames in os.walk(src, followlinks=False):
        here = Path(dirpath)
        for name in sorted(dirnames + filenames):
            path = here / name
            is_dir = name in dirnames
            if ignore(name) or path.is_symlink():
                if is_dir:
                    dirnames.remove(name)  # never walked into (a link is copied as one)
                if ignore(name):
                    continue
            entries += 1
            if entries > MAX_TREE_ENTRIES:
                raise _refuse(
                    src, f"more than {MAX_TREE_ENTRIES} files and folders", "import a smaller tree"
                )
            rel = path.relative_to(src)
            if path.is_symlink():
                if not (internal_links and _link_inside(src, path)):
                    where = (
                        "that leaves the repository"
                        if internal_links
                        else "; task files are copied without following links"
                    )
                    raise _refuse(
                        path,
                        f"a symbolic link (to {os.readlink(path)!r}) {where}",
                        "replace the link with the file it names",
                    )
                yield rel, "link"
            elif is_dir:
                yield rel, "dir"
            else:
                total += check_file(path).st_size
                if total > MAX_TREE_BYTES:
                    raise _refuse(
                        src, f"over {MAX_TREE_BYTES} bytes in all", "import a smaller tree"
                    )
                yield rel, "file"


def copy_tree(
    src: Path,
    dest: Path,
    *,
    internal_links: bool = False,
    ignore: Callable[[str], bool] = lambda name: False,
) -> None:
    """Copy the tree ``src`` to ``dest`` (which must not exist) as :func:`walk_tree`
    checks it: links never followed, special files and sizes over the caps refused."""
    dest.mkdir(parents=True)
    for rel, kind in walk_tree(src, internal_links=internal_links, ignore=ignore):
        if kind == "dir":
            (dest / rel).mkdir()
        elif kind == "link":
            os.symlink(os.readlink(src / rel), dest / rel)
        else:
            shutil.copyfile(src / rel, dest / rel, follow_symlinks=False)
            shutil.copymode(src / rel, dest / rel)


def check_tree(root: Path, *, internal_links: bool = True) -> None:
    """Refuse a tree a tool wrote (``git checkout-index``) that holds what
    :func:`walk_tree` refuses: links leaving it, special files, sizes over the caps."""
    for _ in walk_tree(root, internal_links=internal_links):
        pass


@contextlib.contextmanager
def staged_task(out: Path, task_id: str) -> Iterator[Path]:
    """A folder to write task ``task_id`` into; moved to ``out/task_id`` on success.

    Raises:
        FileExistsError: ``out/task_id`` exists (checked before and after the writing).
    """
    check_id(task_id, str(out))
    dest = Path(out) / task_id
    if dest.exists():
        raise FileExistsError(f"{dest} exists. Fix: remove it or pick another --out")
    Path(out).mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=".repogym-import-", dir=out))
    try:
        yield stage / task_id
        if dest.exists():
            raise FileExistsError(f"{dest} exists. Fix: remove it or pick another --out")
        os.rename(stage / task_id, dest)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


#: What the grader can vouch for, per kind of imported task (``repogym tasks --quality``;
#: docs/grading.md, "Imported tasks", has the measured figures).
KIND_NOTES = {
    "swebench": "pytest: value-sealed",
    "swesmith": "pytest: value-sealed",
    "r2e": "pytest: value-sealed",
    "swebench-log": "log-graded: a forger can print passes",
    "harbor": "test.sh's reward: a forger in its pytest earns it",
    "repogym": "pytest: value-sealed",
}
#: Kinds graded from what a runner printed or wrote (a log, test.sh's reward file): a value
#: seal in their generated pytest file holds that output, which code the agent changed writes.
OUTPUT_GRADED = frozenset({"swebench-log", "harbor"})


def task_kind(task_dir: Path) -> str:
    """The kind of the task folder ``task_dir`` by its importer: ``harbor`` (a Harbor task
    graded by its own test.sh), ``swebench-log`` (a non-pytest SWE-bench row graded from its
    runner's log), ``swebench``, ``swesmith`` or ``r2e`` (pytest rows), else ``repogym``
    (built-in, authored or synthesised). A key of :data:`KIND_NOTES`."""
    import tomllib

    try:
        data = tomllib.loads((Path(task_dir) / "task.toml").read_text())
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return "repogym"
    if isinstance(data.get("harbor"), dict):
        return "harbor"
    meta = data.get("swebench")
    if isinstance(meta, dict):
        if meta.get("log_parser"):
            return "swebench-log"
        tags = data.get("tags") or []
        return tags[0] if tags and tags[0] in ("swebench", "swesmith", "r2e") else "swebench"
    return "repogym"
