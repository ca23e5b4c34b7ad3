"""Source distributions from PyPI as task repositories.

- :func:`download` fetches a project's sdist with ``pip download`` (no dependencies, no
  wheels: an sdist carries the project's tests) into ``<cache>/sdists``, checks its sha256
  when one is given, and reuses an already downloaded copy;
- :func:`unpack` extracts it safely (no absolute paths, no ``..``, no links out) as a
  repository folder, without the artefacts an sdist may carry (:data:`ARTEFACTS`: compiled
  files, caches, build output, an ``*.egg-info``'s ``SOURCES.txt`` list of every file): a
  compiled copy of a hidden test runs that test, a file list names the hidden tests; the
  project's metadata stays as ``<name>.egg-info/PKG-INFO`` (code reads its own version)
  with its ``entry_points.txt`` (code finds its own plugins);
- :func:`derive_environment` reads the project's own declarations (core metadata,
  ``pyproject.toml`` (optional dependencies, dependency groups, Poetry and Hatch test
  environments), ``setup.cfg``, ``setup.py``, ``tox.ini``'s test environments, test
  requirement files) for its install and test requirements, without the project itself
  and without lint, coverage and packaging tools;
- :func:`pytest_ini_options` carries the project's pytest settings over to the grader's
  configuration (the grader never reads the repository's own): markers, warning filters,
  test discovery patterns and ``pythonpath`` (``src`` for a src layout).

Nothing here runs the project's code: its tests run only in a sandbox.
"""

from __future__ import annotations

import ast
import configparser
import dataclasses
import email.parser
import fnmatch
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
import zipfile
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from packaging.markers import UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name, parse_sdist_filename

from repogym.sandbox.base import WORKSPACE
from repogym.sandbox.runtime import cache_dir
from repogym.scenarios.dependencies import DependencySpec
from repogym.scenarios.patches import is_test_file

#: Extras and dependency groups that hold a project's test requirements (also any whose
#: name holds ``test``: ``unittest``, ``test-extras``...).
TEST_EXTRAS = ("test", "tests", "testing", "dev", "develop", "development")
#: What :func:`unpack` removes from a repository: anywhere, compiled files and caches; at
#: the root, build output and file lists.
ARTEFACTS = (
    "__pycache__",
    "*.pyc",
    "*.pyo",
    "*.so",
    "*.pyd",
    "*.o",
    "*.dist-info",
    ".eggs",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    ".hypothesis",
    ".tox",
    ".nox",
    ".git",
    ".hg",
    ".svn",
    ".coverage",
    "htmlcov",
)
ROOT_ARTEFACTS = ("build", "dist", "MANIFEST", "SOURCES.txt", "wheelhouse")
#: The project's core metadata in an ``*.egg-info`` folder (see :func:`keep_metadata`).
METADATA_FILE = "PKG-INFO"
#: The files of an ``*.egg-info`` folder a workspace keeps: the core metadata (code reads
#: its own version) and the entry points (code finds its own plugins by name: markdown's
#: ``Markdown(extensions=["meta"])``, whose tests fail in a workspace without them). The
#: rest goes: ``SOURCES.txt`` lists the hidden test files.
METADATA_FILES = (METADATA_FILE, "entry_points.txt")
#: Markers of common pytest plugins -> the plugin's requirement. A plugin that is otherwise a
#: tool (pytest-cov) is kept when the tests use its marker: under ``filterwarnings =
#: error`` an unregistered marker stops collection.
MARK_PLUGINS = {
    "no_cover": "pytest-cov",
    "benchmark": "pytest-benchmark",
    "asyncio": "pytest-asyncio",
    "timeout": "pytest-timeout",
    "django_db": "pytest-django",
    "flaky": "flaky",
    "vcr": "pytest-recording",
}
_MARK_USE = re.compile(r"\bmark\.(\w+)")  # pytest.mark.x, or mark.x after an import
#: Requirements that are tools around the tests, not needed to run them.
TOOLS = re.compile(
    r"^(coverage|pytest-cov|codecov|coveralls|flake8.*|pycodestyle|pyflakes|pylint|mypy.*|"
    r"types-.*|black|isort|ruff|pre-commit.*|tox.*|nox|sphinx.*|twine|build|wheel|"
    r"setuptools.*|check-manifest|bump2?version|towncrier|pyright|pytest-xdist|pytest-sugar|"
    r"pytest-benchmark|pytest-codspeed|pytest-randomly|pytest-mypy.*|pytest-flake8|"
    r"ipython|ipdb|jupyter.*|"
    r"readme-renderer|docutils|furo|myst-.*|flit.*|hatch.*|poetry.*|pip|uv|virtualenv|"
    r"flake8-.*|pep8-naming|bandit|safety|interrogate|doc8|codespell|pydocstyle|"
    r"autopep8|yapf|pyupgrade|commitizen|bumpver|setuptools-scm|pytest-pylint|"
    r"pytest-black|pytest-isort|pytest-ruff|pytest-cover|pytest-coverage|"
    r"pytest-runner|pytest-html|pytest-github-actions-annotate-failures|"
    r"pytest-timeout|pytest-rerunfailures|pytest-instafail|pytest-clarity|"
    r"pytest-icdiff|pytest-pretty|pytest-sugar|nose2?-cov|zest-releaser|pyroma|"
    r"release-.*|gitchangelog|scriv|bump-my-version|semantic-release|python-semantic-release|"
    r"sphinx_rtd_theme|sphinx-rtd-theme|mkdocs.*|pdoc3?|wheel-inspect|pip-tools|invoke)$"
)
#: pytest settings carried into the grader's configuration (``[verifier] ini_options``).
INI_KEYS = (
    "markers",
    "filterwarnings",
    "xfail_strict",
    "python_files",
    "python_classes",
    "python_functions",
    "pythonpath",
    "usefixtures",
    "asyncio_mode",
    "asyncio_default_fixture_loop_scope",
    "consider_namespace_packages",
    "empty_parameter_set_mark",
)
_ARCHIVES = (".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".zip")


class PypiError(ValueError):
    """A project cannot be fetched or used; the message names the cause and the fix."""


@dataclasses.dataclass(frozen=True)
class Sdist:
    """A downloaded source distribution.

    Attributes:
        name: The project name as PyPI spells it in the file name.
        version: Its version.
        path: The archive.
        sha256: Its hash.
    """

    name: str
    version: str
    path: Path
    sha256: str


def parse_project(text: str) -> tuple[str, str | None]:
    """``NAME`` or ``NAME==VERSION`` -> (name, version or None).

    Raises:
        PypiError: anything else (the message shows the accepted forms).
    """
    try:
        req = Requirement(text)
    except InvalidRequirement as e:
        raise PypiError(
            f"{text!r} is not a project name. Fix: write NAME or NAME==VERSION, e.g. toolz==1.0.0"
        ) from e
    specs = list(req.specifier)
    if (
        req.extras
        or req.marker
        or req.url
        or len(specs) > 1
        or (specs and specs[0].operator not in ("==", "==="))
    ):
        raise PypiError(
            f"{text!r}: give an exact version or none. Fix: NAME or "
            "NAME==VERSION, e.g. toolz==1.0.0"
        )
    return req.name, specs[0].version if specs else None


def sdists_dir() -> Path:
    """Where downloaded sdists are kept: ``<cache>/sdists``."""
    return cache_dir() / "sdists"


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _cached(name: str, version: str | None, sha256: str | None) -> Sdist | None:
    if version is None:
        return None
    folder = sdists_dir() / f"{canonicalize_name(name)}-{version}"
    for path in folder.glob("*") if folder.is_dir() else []:
        if path.name.endswith(_ARCHIVES):
            digest = file_sha256(path)
            if sha256 is None or digest == sha256:
                return Sdist(name, version, path, digest)
    return None


def download(project: str, *, sha256: str | None = None) -> Sdist:
    """The sdist of ``project`` (``NAME`` or ``NAME==VERSION``), downloaded once.

    Args:
        project: What to fetch; without a version, the newest release.
        sha256: The archive's expected hash (pip checks it; a mismatch is an error).

    Raises:
        PypiError: pip found no sdist, the network failed, or the hash differs (each
            message says the fix).
    """
    name, version = parse_project(project)
    if (hit := _cached(name, version, sha256)) is not None:
        return hit
    with tempfile.TemporaryDirectory(prefix="repogym-sdist-") as tmp:
        req = Path(tmp) / "req.txt"
        line = f"{name}=={version}" if version else name
        req.write_text(line + (f" --hash=sha256:{sha256}" if sha256 else "") + "\n")
        # Only the project itself as source: its build requirements may be wheels (with
        # ``:all:`` pip builds them from source too: bidict's uv_build needs a Rust one).
        argv = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--no-binary",
            name,
            "--disable-pip-version-check",
            "--no-input",
            "--progress-bar",
            "off",
            "--dest",
            str(Path(tmp) / "out"),
            "-r",
            str(req),
        ]
        if sha256:
            argv.append("--require-hashes")
        res = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, "PYTHONNOUSERSITE": "1"},
        )
        got = sorted((Path(tmp) / "out").glob("*")) if res.returncode == 0 else []
        output = res.stdout + res.stderr
        if not got and version and "DO NOT MATCH THE HASHES" not in output:
            # pip builds an sdist's metadata to check it; a release whose build backend
            # no longer reads it (an old setup.py, a pyproject today's poetry-core refuses)
            # is fetched from the index's file list instead
            (Path(tmp) / "out").mkdir(exist_ok=True)
            try:
                got = [_sdist_from_index(name, version, Path(tmp) / "out")]
            except PypiError as e:
                raise PypiError(f"{_download_failure(line, output, sha256)}; and {e}") from e
        if not got:
            raise PypiError(_download_failure(line, output, sha256))
        archive = got[0]
        sd_name, sd_version = parse_sdist_filename(archive.name)
        digest = file_sha256(archive)
        if sha256 and digest != sha256:
            raise PypiError(
                f"{line}: the sdist's sha256 is {digest}, expected {sha256}. Fix: "
                "the release was replaced upstream; pin the version you checked"
            )
        dest = sdists_dir() / f"{sd_name}-{sd_version}"
        dest.mkdir(parents=True, exist_ok=True)
        shutil.move(archive, dest / archive.name)
    return Sdist(name, str(sd_version), dest / archive.name, digest)


#: The package index's simple API, in its JSON form (PEP 691), which gives each file's URL,
#: hash and upload time (PEP 700). ``$REPOGYM_SIMPLE_INDEX`` points elsewhere (a mirror
#: that serves the JSON form).
SIMPLE_INDEX = "https://pypi.org/simple/"


def project_page(name: str) -> dict:
    """The project's page of the simple index, as PEP 691 JSON (with ``url``: where it was
    read, which a file's relative URL is resolved against).

    Raises:
        PypiError: the index cannot be read.
    """
    import json
    import urllib.error
    import urllib.request

    base = os.environ.get("REPOGYM_SIMPLE_INDEX", SIMPLE_INDEX).rstrip("/") + "/"
    url = f"{base}{canonicalize_name(name)}/"
    request = urllib.request.Request(url, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            return {**json.loads(r.read()), "url": url}
    except (urllib.error.URLError, OSError, ValueError) as e:
        raise PypiError(
            f"{name}: cannot read {url} ({e}). Fix: check the network, or set "
            "$REPOGYM_SIMPLE_INDEX to an index that serves PEP 691 JSON"
        ) from e


def _sdist_from_index(name: str, version: str, dest: Path) -> Path:
    """Fetch ``name`` ``version``'s sdist straight from the index's file list, checked
    against the hash the index gives: no build, so an old release whose build backend no
    longer reads its metadata (anytree 2.9's pyproject under today's poetry-core) still
    downloads.

    Raises:
        PypiError: the index lists no sdist of that release, or the file's hash differs.
    """
    import urllib.parse
    import urllib.request

    from packaging.version import InvalidVersion, Version

    page = project_page(name)
    for f in page.get("files", ()):
        fn = str(f.get("filename", ""))
        try:
            sd_name, sd_version = parse_sdist_filename(fn)
            found = sd_name == canonicalize_name(name) and sd_version == Version(version)
        except (ValueError, InvalidVersion):
            continue
        if not found or f.get("yanked") not in (None, False):
            continue
        out = dest / fn
        url = urllib.parse.urljoin(page["url"], str(f["url"]))
        try:
            with urllib.request.urlopen(url, timeout=120) as r, open(out, "wb") as w:
                shutil.copyfileobj(r, w)
        except OSError as e:
            raise PypiError(
                f"{name}=={version}: cannot download {url} ({e}). Fix: check the network"
            ) from e
        want = (f.get("hashes") or {}).get("sha256")
        if want and file_sha256(out) != want:
            raise PypiError(
                f"{name}=={version}: {fn} does not have the sha256 the index gives. Fix: "
                "download again (a proxy may have changed it)"
            )
        return out
    raise PypiError(f"{name}=={version}: the package index lists no sdist of this release")


def _download_failure(line: str, output: str, sha256: str | None) -> str:
    tail = " | ".join(ln.strip() for ln in output.splitlines() if "ERROR" in ln)[-600:]
    if "THESE PACKAGES DO NOT MATCH THE HASHES" in output:
        return (
            f"{line}: the downloaded sdist does not have sha256 {sha256}. Fix: the "
            "release was replaced upstream; pin the version you checked"
        )
    if "No matching distribution" in output or "Could not find a version" in output:
        return (
            f"{line}: no source distribution on the package index ({tail}). Fix: check "
            "the name and version (`pip index versions NAME`); repogym needs the sdist "
            "(it carries the tests), not a wheel"
        )
    return (
        f"{line}: pip download failed ({tail or output.strip()[-600:]}). Fix: check the "
        "network and pip's index settings (`pip config list`)"
    )


# -- unpacking -------------------------------------------------------------------------
def _safe_member(name: str) -> bool:
    p = PurePosixPath(name)
    return not p.is_absolute() and ".." not in p.parts


def unpack(sdist: Sdist | Path, dest: Path) -> Path:
    """Extract an sdist into ``dest`` (which must not exist), dropping its top folder.

    Raises:
        PypiError: not an sdist archive, or a member that would land outside ``dest``.
    """
    path = sdist.path if isinstance(sdist, Sdist) else Path(sdist)
    with tempfile.TemporaryDirectory(prefix="repogym-unpack-", dir=dest.parent) as tmp:
        if path.name.endswith(".zip"):
            with zipfile.ZipFile(path) as z:
                bad = [n for n in z.namelist() if not _safe_member(n)]
                if bad:
                    raise PypiError(f"{path.name}: member {bad[0]!r} leaves the archive")
                z.extractall(tmp)
        elif path.name.endswith(_ARCHIVES):
            with tarfile.open(path) as t:
                try:
                    t.extractall(tmp, filter="data")
                except tarfile.FilterError as e:
                    raise PypiError(f"{path.name}: unsafe member ({e})") from e
        else:
            raise PypiError(f"{path}: not an sdist (.tar.gz or .zip)")
        tops = os.listdir(tmp)
        root = (
            Path(tmp) / tops[0] if len(tops) == 1 and (Path(tmp) / tops[0]).is_dir() else Path(tmp)
        )
        strip_artefacts(root)
        shutil.move(root, dest)
    return dest


def is_artefact(rel: str | PurePosixPath) -> bool:
    """True for a repository path that :func:`strip_artefacts` removes (or that lies in one).
    An ``*.egg-info`` folder is not one, nor its :data:`METADATA_FILES`: only the rest of
    it."""
    p = PurePosixPath(rel)
    parts = p.parts
    if parts and parts[0] in ROOT_ARTEFACTS:
        return True
    for i, part in enumerate(parts):
        if fnmatch.fnmatch(part, "*.egg-info"):
            if i == len(parts) - 1 or (i == len(parts) - 2 and parts[-1] in METADATA_FILES):
                continue
            return True
        if any(fnmatch.fnmatch(part, pattern) for pattern in ARTEFACTS):
            return True
    return False


def strip_artefacts(repo: Path) -> list[str]:
    """Remove every :data:`ARTEFACTS` path under ``repo`` and the :data:`ROOT_ARTEFACTS` at
    its root, and keep the project's metadata in the one form code reads it in (see
    :func:`keep_metadata`); returns the repository paths removed."""
    removed = []
    for dirpath, dirnames, filenames in os.walk(repo):
        here = Path(dirpath)
        for name in [*dirnames, *filenames]:
            rel = (here / name).relative_to(repo)
            if is_artefact(rel.as_posix()):
                removed.append(rel.as_posix())
                path = here / name
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path)
                else:
                    path.unlink()
        dirnames[:] = [d for d in dirnames if (here / d).is_dir()]
    keep_metadata(repo)
    return sorted(removed)


def keep_metadata(repo: Path) -> Path | None:
    """The project's metadata as ``<name>.egg-info/PKG-INFO`` beside its code (the root, or
    ``src/``), made from the sdist's ``PKG-INFO`` when it has no egg-info: code that reads
    its own version with ``importlib.metadata`` (semantic_version, humanize) finds it
    there. Only the metadata: an egg-info's ``SOURCES.txt`` lists the hidden test files.
    Returns the file (None without a ``PKG-INFO``)."""
    existing = sorted(
        [*repo.glob(f"*.egg-info/{METADATA_FILE}"), *repo.glob(f"src/*.egg-info/{METADATA_FILE}")]
    )
    if existing:
        return existing[0]
    info = repo / METADATA_FILE
    if not info.is_file():
        return None
    name = email.parser.Parser().parsestr(info.read_text(errors="replace")).get("Name", "")
    if not name:
        return None
    base = repo / "src" if _src_layout(repo) else repo
    dest = base / f"{re.sub(r'[-_.]+', '_', name)}.egg-info" / METADATA_FILE
    dest.parent.mkdir()
    shutil.copyfile(info, dest)
    return dest


def _src_layout(repo: Path) -> bool:
    """Whether the project's code lies under ``src/``: a package there, or a module
    (toposort ships ``src/toposort.py`` alone)."""
    src = repo / "src"
    return src.is_dir() and any(
        (p / "__init__.py").is_file()
        or (p.suffix == ".py" and p.stem.isidentifier() and p.stem not in _NOT_CODE)
        for p in src.iterdir()
    )


def archive_top_level(sdist: Sdist | Path) -> list[str]:
    """The import names an sdist's ``*.egg-info/top_level.txt`` lists (read from the
    archive: :func:`unpack` removes the egg-info)."""
    path = sdist.path if isinstance(sdist, Sdist) else Path(sdist)
    wanted = re.compile(r"^(?:[^/]+/)?(?:src/)?[^/]+\.egg-info/top_level\.txt$")
    data = b""
    try:
        if path.name.endswith(".zip"):
            with zipfile.ZipFile(path) as z:
                names = [n for n in z.namelist() if wanted.match(n)]
                data = z.read(names[0]) if names else b""
        else:
            with tarfile.open(path) as t:
                member = next(
                    (m for m in t.getmembers() if wanted.match(m.name) and m.isfile()), None
                )
                f = t.extractfile(member) if member is not None else None
                data = f.read() if f is not None else b""
    except (OSError, tarfile.TarError, zipfile.BadZipFile):
        return []
    return [line.strip() for line in data.decode(errors="replace").splitlines() if line.strip()]


# -- requirements ------------------------------------------------------------------------
def _requirements_of(lines: Iterable[str], extras: Iterable[str] = ()) -> list[Requirement]:
    """Parseable requirements whose markers hold here (extras as given); others dropped."""
    out = []
    for line in lines:
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith(("#", "-", ".", "/")):
            continue
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        envs = [{"extra": e} for e in (*extras, "")]
        try:
            if req.marker is not None and not any(req.marker.evaluate(e) for e in envs):
                continue
        except UndefinedEnvironmentName:
            continue
        req.marker = None
        out.append(req)
    return out


def _requirement_file(path: Path, seen: set[Path]) -> list[str]:
    if path in seen or not path.is_file():
        return []
    seen.add(path)
    lines = []
    for line in path.read_text(errors="replace").splitlines():
        m = re.match(r"^\s*(?:-r|--requirement)[\s=]+(\S+)", line)
        if m:
            lines += _requirement_file((path.parent / m.group(1)).resolve(), seen)
        else:
            lines.append(line)
    return lines


def _test_requirement_files(repo: Path) -> list[Path]:
    """``requirements*test*.txt``-like files at the root, in ``requirements/`` folders and in
    the test folders (``tests/requirements.txt``)."""
    files = [
        p
        for pattern in (
            "*requirements*.txt",
            "*requirements*.in",
            "requirements/*.txt",
            "*requirements*/*.txt",
            "requirements/*.in",
        )
        for p in repo.glob(pattern)
        if "test" in p.name.lower()
    ]
    files += [
        p
        for folder in ("test", "tests", "testing")
        for pattern in ("requirements*.txt", "requirements*.in")
        for p in (repo / folder).glob(pattern)
    ]
    return sorted(set(files))


def is_test_group(name: str) -> bool:
    """True for an extra, dependency group or tool environment that holds test
    requirements (:data:`TEST_EXTRAS`, or a name holding ``test``)."""
    key = canonicalize_name(name)
    return key in TEST_EXTRAS or "test" in key


def _groups(data: dict) -> list[str]:
    """The test dependency groups (PEP 735) of a ``pyproject.toml``, includes followed."""
    groups = data.get("dependency-groups", {})
    out: list[str] = []

    def add(name: str, depth: int = 0) -> None:
        for item in groups.get(name, []) if depth < 10 else []:
            if isinstance(item, str):
                out.append(item)
            elif isinstance(item, dict) and "include-group" in item:
                add(item["include-group"], depth + 1)

    for n in groups if isinstance(groups, dict) else ():
        if is_test_group(n):
            add(n)
    return out


def _poetry_and_hatch(data: dict) -> list[str]:
    """Test requirements of Poetry groups and dev-dependencies (names only: Poetry's
    version syntax is not PEP 440) and of Hatch's default and test environments."""
    tool = data.get("tool", {}) if isinstance(data.get("tool"), dict) else {}
    out: list[str] = []
    poetry = tool.get("poetry", {}) if isinstance(tool.get("poetry"), dict) else {}
    tables = [poetry.get("dev-dependencies", {})]
    tables += [
        g.get("dependencies", {})
        for n, g in (poetry.get("group", {}) or {}).items()
        if isinstance(g, dict) and is_test_group(n)
    ]
    for table in tables:
        out += [n for n in table if isinstance(table, dict) and n.lower() != "python"]
    hatch = tool.get("hatch", {}) if isinstance(tool.get("hatch"), dict) else {}
    for n, env in (hatch.get("envs", {}) or {}).items():
        if isinstance(env, dict) and (n == "default" or is_test_group(n)):
            out += [
                d
                for key in ("dependencies", "extra-dependencies")
                for d in env.get(key, []) or []
                if isinstance(d, str)
            ]
    return out


def _tox_lines(repo: Path) -> list[str]:
    """``deps`` of ``tox.ini``'s ``[testenv]`` and test environments (``[testenv:py311]``,
    ``[testenv:tests]``, ``[testenv:unit]``; not lint, docs or type checks), unconditional lines
    only (a ``py38: mock`` factor line is left out), ``-r`` includes followed and
    ``{[sec]key}`` references resolved."""
    path = repo / "tox.ini"
    cfg = configparser.ConfigParser(interpolation=None)
    try:
        cfg.read(path, encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError):
        return []

    def value(section: str, key: str, depth: int = 0) -> list[str]:
        raw = cfg.get(section, key, fallback="") if cfg.has_section(section) else ""
        out: list[str] = []
        for line in raw.splitlines():
            line = line.strip()
            ref = re.fullmatch(r"\{\[([^\]]+)\]([\w-]+)\}", line)
            if ref and depth < 5:
                out += value(ref.group(1), ref.group(2), depth + 1)
            elif line and not re.match(r"^[\w,{}.-]+\s*:\s", line) and "{" not in line:
                out.append(line)
        return out

    sections = [
        s
        for s in cfg.sections()
        if s == "testenv"
        or (
            s.startswith("testenv:")
            and (re.fullmatch(r"(py|pypy)[\d.]*|unit\w*", s[8:]) or is_test_group(s[8:]))
        )
    ]
    lines: list[str] = []
    for section in sections:
        for line in value(section, "deps"):
            m = re.match(r"^(?:-r|--requirement)\s*=?\s*(\S+)", line)
            if m:
                lines += _requirement_file((repo / m.group(1)).resolve(), set())
            else:
                lines.append(line)
    return lines


def _literal(node: ast.AST) -> object:
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return None


def _setup_py(repo: Path) -> tuple[list[str], dict[str, list[str]]]:
    """install_requires and extras_require (+ tests_require as ``test``) when literal."""
    try:
        tree = ast.parse((repo / "setup.py").read_text(errors="replace"))
    except (OSError, SyntaxError):
        return [], {}
    install: list[str] = []
    extras: dict[str, list[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword):
            value = _literal(node.value)
            if node.arg == "install_requires" and isinstance(value, list):
                install += [v for v in value if isinstance(v, str)]
            elif node.arg == "tests_require" and isinstance(value, list):
                extras.setdefault("test", []).extend(v for v in value if isinstance(v, str))
            elif node.arg == "extras_require" and isinstance(value, dict):
                for k, v in value.items():
                    if isinstance(v, list):
                        extras.setdefault(str(k), []).extend(x for x in v if isinstance(x, str))
    return install, extras


def _setup_cfg(repo: Path) -> tuple[list[str], dict[str, list[str]]]:
    """install_requires and extras_require (+ tests_require as ``test``)."""
    cfg = configparser.ConfigParser(interpolation=None)
    try:
        cfg.read(repo / "setup.cfg", encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError):
        return [], {}
    install = cfg.get("options", "install_requires", fallback="").splitlines()
    extras = (
        {k: v.splitlines() for k, v in cfg["options.extras_require"].items()}
        if cfg.has_section("options.extras_require")
        else {}
    )
    if tests := cfg.get("options", "tests_require", fallback="").splitlines():
        extras.setdefault("test", []).extend(tests)
    return install, extras


def _test_extras(extras: dict) -> list[str]:
    return [
        r
        for name, reqs in (extras or {}).items()
        if is_test_group(name)
        for r in (reqs if isinstance(reqs, list) else [])
    ]


def declared_requirements(repo: Path) -> list[Requirement]:
    """The project's install and test requirements, as its files declare them (see the
    module docstring for which files and tables)."""
    lines: list[str] = []
    extras_named: set[str] = set(TEST_EXTRAS)
    if (repo / "PKG-INFO").is_file():
        meta = email.parser.Parser().parsestr((repo / "PKG-INFO").read_text(errors="replace"))
        lines += meta.get_all("Requires-Dist") or []
        extras_named |= {e for e in meta.get_all("Provides-Extra") or [] if is_test_group(e)}
    data: dict = {}
    if (repo / "pyproject.toml").is_file():
        try:
            data = tomllib.loads((repo / "pyproject.toml").read_text(errors="replace"))
        except tomllib.TOMLDecodeError:
            data = {}
    project = data.get("project", {}) if isinstance(data.get("project"), dict) else {}
    lines += project.get("dependencies", []) or []
    optional = project.get("optional-dependencies", {}) or {}
    lines += _test_extras(optional)
    extras_named |= {e for e in optional if is_test_group(e)}
    lines += _groups(data) + _poetry_and_hatch(data)
    for install, extras in (_setup_py(repo), _setup_cfg(repo)):
        lines += install + _test_extras(extras)
        extras_named |= {e for e in extras if is_test_group(e)}
    lines += _tox_lines(repo)
    seen: set[Path] = set()
    for f in _test_requirement_files(repo):
        lines += _requirement_file(f.resolve(), seen)
    return _requirements_of(lines, sorted(extras_named))


def marker_plugins(repo: Path) -> set[str]:
    """The plugins (:data:`MARK_PLUGINS`) whose markers the project's test files use."""
    out: set[str] = set()
    for path in repo.rglob("*.py"):
        if not (is_test_file(path.name) or path.name == "conftest.py") or any(
            p in _SKIP_SCAN for p in path.parts
        ):
            continue
        for m in _MARK_USE.finditer(path.read_text(errors="replace")):
            if (plugin := MARK_PLUGINS.get(m.group(1))) is not None:
                out.add(canonicalize_name(plugin))
    return out


_SKIP_SCAN = {
    ".git",
    ".tox",
    ".nox",
    "build",
    "dist",
    "__pycache__",
    ".venv",
    "venv",
    "node_modules",
}


def derive_environment(
    repo: Path, name: str, *, extra: Iterable[str] = (), drop: Iterable[str] = ()
) -> DependencySpec:
    """The dependencies a project's tests need: its declared install and test requirements
    (:func:`declared_requirements`) minus tools (:data:`TOOLS`; but a declared plugin
    whose marker the tests use is kept, :func:`marker_plugins`), the project itself and
    ``drop``, plus ``extra``; the project is excluded from the build in case a requirement
    pulls it in."""
    own = canonicalize_name(name)
    dropped = {canonicalize_name(d) for d in drop} | {own}
    marked = marker_plugins(repo)
    reqs: dict[str, str] = {}
    for req in declared_requirements(repo):
        key = canonicalize_name(req.name)
        if key in dropped or (TOOLS.match(key) and key not in marked):
            continue
        reqs.setdefault(key, str(req))
    for text in extra:
        req = Requirement(text)
        reqs[canonicalize_name(req.name)] = str(req)
    return DependencySpec(requirements=tuple(sorted(reqs.values())), exclude=(own,))


def pytest_plugins(site: Path, requested: Iterable[str]) -> list[str]:
    """The pytest plugins (``pytest11`` entry points) that the ``requested`` distributions
    installed in ``site`` provide, as the module names ``-p`` loads: the grader turns
    plugin auto-loading off, so a test requirement such as pytest-mock (its ``mocker``
    fixture) works only when its plugin is named in the command (a tool such as
    pytest-cov is among them only when requested: a marker of it the tests use)."""
    wanted = {canonicalize_name(r) for r in requested} - {"pytest"}
    out: list[str] = []
    for info in sorted(site.glob("*.dist-info")):
        meta = info / "METADATA"
        name = ""
        if meta.is_file():
            name = email.parser.Parser().parsestr(meta.read_text(errors="replace")).get("Name", "")
        if canonicalize_name(name) not in wanted:
            continue
        cfg = configparser.ConfigParser(interpolation=None, delimiters=("=",))
        try:
            cfg.read(info / "entry_points.txt", encoding="utf-8")
        except (configparser.Error, UnicodeDecodeError):
            continue
        if cfg.has_section("pytest11"):
            out += [v.split(":", 1)[0].strip() for v in cfg["pytest11"].values()]
    return sorted(set(out))


# -- pytest settings -----------------------------------------------------------------------
def _pyproject_ini(repo: Path) -> dict | None:
    try:
        data = tomllib.loads((repo / "pyproject.toml").read_text(errors="replace"))
    except (OSError, tomllib.TOMLDecodeError):
        return None
    return data.get("tool", {}).get("pytest", {}).get("ini_options")


def _cfg_ini(path: Path, section: str) -> dict | None:
    cfg = configparser.ConfigParser(interpolation=None)
    try:
        cfg.read(path, encoding="utf-8")
    except configparser.Error:
        return None
    return dict(cfg[section]) if cfg.has_section(section) else None


def _raw_ini(repo: Path) -> dict:
    """The project's pytest settings, from the first file pytest itself would read."""
    for finder in (
        lambda: _cfg_ini(repo / "pytest.ini", "pytest"),
        lambda: _cfg_ini(repo / ".pytest.ini", "pytest"),
        lambda: _pyproject_ini(repo),
        lambda: _cfg_ini(repo / "tox.ini", "pytest"),
        lambda: _cfg_ini(repo / "setup.cfg", "tool:pytest"),
    ):
        if (found := finder()) is not None:
            return found
    return {}


def _ini_value(value: object) -> str:
    if isinstance(value, list):
        return "\n".join(str(v) for v in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value).strip()


def pytest_ini_options(repo: Path) -> dict[str, str]:
    """The project's pytest settings the grader should write (keys of :data:`INI_KEYS`).

    ``pythonpath`` gains ``src`` for a src layout, and its folders are written as absolute
    paths in the workspace (``/workspace/src``): pytest reads them relative to the
    configuration file, which is the grader's, outside the workspace.
    """
    out = {k: _ini_value(v) for k, v in _raw_ini(repo).items() if k in INI_KEYS}
    paths = out.get("pythonpath", "").split()
    if _src_layout(repo) and "src" not in paths:
        paths.append("src")
    if paths:
        out["pythonpath"] = " ".join(str(PurePosixPath(WORKSPACE) / p) for p in paths)
    return out


# -- the package's own code --------------------------------------------------------------
_NOT_CODE = {
    "setup",
    "conftest",
    "tests",
    "test",
    "testing",
    "docs",
    "doc",
    "examples",
    "example",
    "benchmarks",
    "bench",
    "noxfile",
    "fabfile",
    "versioneer",
    "tasks",
    "scripts",
    "tools",
    "build",
    "dist",
}


def code_paths(repo: Path, name: str, top_level: Iterable[str] = ()) -> list[str]:
    """Repository paths of the project's importable code (what synthesis mutates): the
    names of ``top_level`` (:func:`archive_top_level`) or of an unpacked
    ``top_level.txt``, else the package named like the project, else every top-level
    package or module that is not tests, docs or tooling. They are looked for at the root,
    under ``src`` and in any folder holding the project's ``*.egg-info`` (markdown2 keeps
    ``lib/markdown2.py`` beside ``lib/markdown2.egg-info``: ``package_dir={"": "lib"}``)."""
    roots = [repo, repo / "src"]
    roots += sorted({e.parent for e in repo.glob("*/*.egg-info")} - set(roots))
    found: dict[str, str] = {}
    for base in roots:
        for p in base.iterdir() if base.is_dir() else []:
            stem = p.name.removesuffix(".py")
            if stem in _NOT_CODE or stem.startswith(("test_", ".", "_")) or not stem.isidentifier():
                continue
            if (p.is_dir() and (p / "__init__.py").is_file()) or p.suffix == ".py":
                found.setdefault(stem, str(p.relative_to(repo)))
    listed = list(top_level) or [
        line.strip()
        for f in [
            *repo.glob("*.egg-info/top_level.txt"),
            *repo.glob("*/*.egg-info/top_level.txt"),
        ]
        for line in f.read_text().splitlines()
        if line.strip()
    ]
    if picked := [found[n] for n in listed if n in found]:
        return sorted(set(picked))
    own = canonicalize_name(name).replace("-", "_")
    if own in found:
        return [found[own]]
    return sorted(found.values())


def path_hint(ini_options: dict[str, str]) -> str:
    """A statement's note on where the package's code is imported from ("" for the root)."""
    paths = [
        str(PurePosixPath(x).relative_to(WORKSPACE))
        for x in ini_options.get("pythonpath", "").split()
        if x.startswith(WORKSPACE + "/")
    ]
    if not paths:
        return ""
    joined = ":".join(paths)
    return (
        f"\nThe tests import the package with {', '.join(f'`{x}/`' for x in paths)} on "
        f"`sys.path`: run Python as `PYTHONPATH={joined} python ...` to do the same.\n"
    )
