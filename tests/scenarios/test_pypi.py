"""PyPI sdists as task repositories (`repogym synth --pypi` on a real package is tested in
tests/quality/test_synth_pypi.py)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import pytest

from repogym.scenarios import pypi
from tests.scenarios._tasks import PROJECT


def test_project_names():
    assert pypi.parse_project("toolz") == ("toolz", None)
    assert pypi.parse_project("more-itertools==10.1.0") == ("more-itertools", "10.1.0")
    for bad in ("toolz>=1", "toolz[extra]", "not a name!"):
        with pytest.raises(pypi.PypiError, match="Fix:"):
            pypi.parse_project(bad)


def _tar(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as t:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return path


def test_unpack_drops_the_top_folder_and_refuses_members_outside(tmp_path):
    good = _tar(
        tmp_path / "pkg-1.0.tar.gz",
        {"pkg-1.0/pkg/__init__.py": b"x = 1\n", "pkg-1.0/tests/test_pkg.py": b"def test(): pass\n"},
    )
    repo = pypi.unpack(good, tmp_path / "repo")
    assert (repo / "pkg" / "__init__.py").read_text() == "x = 1\n"
    with pytest.raises(pypi.PypiError, match="unsafe member"):
        pypi.unpack(_tar(tmp_path / "bad.tar.gz", {"../evil.py": b"x"}), tmp_path / "r2")
    assert not (tmp_path / "evil.py").exists() and not (tmp_path / "r2").exists()
    # an absolute member lands inside the repository, never at its path on the host
    inside = pypi.unpack(
        _tar(tmp_path / "abs.tar.gz", {"/tmp/evil-abs": b"x", "a.py": b""}), tmp_path / "r3"
    )
    assert (inside / "tmp" / "evil-abs").is_file() and not Path("/tmp/evil-abs").exists()


def test_unpack_leaves_out_compiled_files_build_output_and_file_lists(tmp_path):
    """funcy's sdist ships compiled tests (loading one runs a hidden test) and every
    setuptools sdist an egg-info whose SOURCES.txt names the hidden test files."""
    members = {
        "p-1/p/__init__.py": b"",
        "p-1/p/__pycache__/core.cpython-311.pyc": b"x",
        "p-1/tests/__pycache__/test_calc.cpython-311-pytest-6.2.5.pyc": b"x",
        "p-1/tests/test_calc.py": b"",
        "p-1/p.egg-info/SOURCES.txt": b"tests/test_calc.py",
        "p-1/p.egg-info/top_level.txt": b"p\n",
        "p-1/build/lib/p/__init__.py": b"",
        "p-1/p/build.py": b"",
        "p-1/p/native.so": b"\x7fELF",
        "p-1/.tox/x": b"",
    }
    members["p-1/p.egg-info/PKG-INFO"] = b"Metadata-Version: 2.1\nName: p\nVersion: 1\n"
    members["p-1/p.egg-info/entry_points.txt"] = b"[p.plugins]\nx = p:x\n"
    archive = _tar(tmp_path / "p-1.tar.gz", members)
    repo = pypi.unpack(archive, tmp_path / "repo")
    left = sorted(str(p.relative_to(repo)) for p in repo.rglob("*") if p.is_file())
    # the metadata stays (code reads its own version and finds its own plugins with
    # importlib.metadata), not the lists
    assert left == [
        "p.egg-info/PKG-INFO",
        "p.egg-info/entry_points.txt",
        "p/__init__.py",
        "p/build.py",
        "tests/test_calc.py",
    ]
    assert pypi.archive_top_level(archive) == ["p"]  # read from the archive itself
    assert pypi.is_artefact("a/b/__pycache__/c.pyc") and not pypi.is_artefact("p/build.py")
    assert pypi.is_artefact("p.egg-info/SOURCES.txt")
    assert not pypi.is_artefact("p.egg-info/PKG-INFO")


def test_an_sdist_without_egg_info_gets_its_metadata_where_importlib_finds_it(tmp_path):
    """semantic_version and humanize read their own version with importlib.metadata."""
    archive = _tar(
        tmp_path / "my-pkg-2.tar.gz",
        {
            "my-pkg-2/PKG-INFO": b"Metadata-Version: 2.1\nName: my-pkg\nVersion: 2.0\n",
            "my-pkg-2/src/my_pkg/__init__.py": (
                b"from importlib.metadata import version\n__version__ = version('my-pkg')\n"
            ),
        },
    )
    repo = pypi.unpack(archive, tmp_path / "repo")
    assert (repo / "src" / "my_pkg.egg-info" / "PKG-INFO").is_file()
    res = subprocess.run(
        [sys.executable, "-c", "import my_pkg; print(my_pkg.__version__)"],
        cwd=repo,
        env={**os.environ, "PYTHONPATH": str(repo / "src")},
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.stdout.strip() == "2.0", res.stderr


def _project(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text))
    return root


def test_environment_and_pytest_settings_come_from_the_projects_own_files(tmp_path):
    repo = _project(
        tmp_path / "demo-1.0",
        {
            "PKG-INFO": "Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n"
            "Requires-Dist: attrs>=21\nRequires-Dist: pytest-cov; extra == 'test'\n"
            "Requires-Dist: hypothesis; extra == 'test'\n"
            "Requires-Dist: sphinx; extra == 'docs'\n"
            "Requires-Dist: tomli; python_version < '3.0'\n",
            "pyproject.toml": """
            [dependency-groups]
            tests = ["freezegun>=1", {include-group = "lint"}]
            lint = ["ruff"]
            [tool.pytest.ini_options]
            addopts = "--cov=demo"
            markers = ["slow: slow tests"]
            filterwarnings = ["error"]
            pythonpath = "lib"
            """,
            "requirements/test.txt": "-r base.txt\nsimplejson  # json speed\n",
            "requirements/base.txt": "demo\nsix\n",
            "src/demo/__init__.py": "",
            "tests/test_demo.py": "",
        },
    )
    spec = pypi.derive_environment(repo, "demo")
    assert spec.requirements == (
        "attrs>=21",
        "freezegun>=1",
        "hypothesis",
        "simplejson",
        "six",
    )  # no tools, no docs extra, no other Python, not itself
    assert spec.exclude == ("demo",)
    ini = pypi.pytest_ini_options(repo)
    assert ini == {
        "markers": "slow: slow tests",
        "filterwarnings": "error",
        "pythonpath": "/workspace/lib /workspace/src",
    }  # addopts is the grader's
    assert pypi.code_paths(repo, "demo") == ["src/demo"]
    # markdown2's layout: one module in lib/, beside its egg-info (package_dir={"": "lib"})
    (repo / "lib" / "demo.egg-info").mkdir(parents=True)
    (repo / "lib" / "demo.egg-info" / "top_level.txt").write_text("demo_md\n")
    (repo / "lib" / "demo_md.py").write_text("def f():\n    return 1\n")
    assert pypi.code_paths(repo, "demo") == ["lib/demo_md.py"]
    # toposort's layout: one module under src/, no pytest configuration: src is on the path
    lone = tmp_path / "lone"
    (lone / "src").mkdir(parents=True)
    (lone / "src" / "lone.py").write_text("def f():\n    return 1\n")
    assert pypi.pytest_ini_options(lone) == {"pythonpath": "/workspace/src"}
    assert pypi.code_paths(lone, "lone") == ["src/lone.py"]
    # python-dateutil: a test marked no_cover under filterwarnings = error needs pytest-cov's
    # plugin loaded (it registers the marker), so the declared tool is kept
    (repo / "tests" / "test_demo.py").write_text(
        "import pytest\n\n\n@pytest.mark.no_cover\ndef test_x():\n    pass\n"
    )
    assert pypi.marker_plugins(repo) == {"pytest-cov"}
    assert "pytest-cov" in pypi.derive_environment(repo, "demo").requirements


def test_download_checks_the_hash_and_reuses_the_copy():
    sdist = pypi.download(PROJECT)
    assert sdist.path.is_file() and sdist.version == "4.0.0"
    assert pypi.file_sha256(sdist.path) == sdist.sha256
    again = pypi.download(PROJECT, sha256=sdist.sha256)
    assert again.path == sdist.path  # the cached copy, no second download
    with pytest.raises(pypi.PypiError, match="sha256"):
        pypi.download("munch==2.5.0", sha256="0" * 64)
    with pytest.raises(pypi.PypiError, match="no source distribution.*Fix:"):
        pypi.download("munch==0.0.404")


def test_download_takes_build_requirements_as_wheels():
    """bidict builds with uv_build, whose sdist needs a Rust toolchain (maturin): only
    the project itself is fetched as source."""
    sdist = pypi.download("bidict==0.24.1")
    assert sdist.path.name == "bidict-0.24.1.tar.gz" and sdist.path.is_file()


def test_an_old_release_whose_backend_no_longer_builds_its_metadata_still_downloads(
    tmp_path, monkeypatch
):
    """anytree 2.9.2's pyproject fails today's poetry-core (pip's metadata step): the sdist
    comes from the index's file list, checked against the index's hash and the one asked."""
    monkeypatch.setenv("REPOGYM_CACHE", str(tmp_path / "cache"))  # no cached copy
    want = "e02af617d41ede47f922e5deea0e4efc3201c6e7330cfc1265409762e5381283"
    sdist = pypi.download("anytree==2.9.2", sha256=want)
    assert sdist.path.name == "anytree-2.9.2.tar.gz" and sdist.version == "2.9.2"
    assert sdist.sha256 == want == pypi.file_sha256(sdist.path)
    src = pypi.unpack(sdist, tmp_path / "src")
    assert (src / "anytree" / "node" / "node.py").is_file()
    with pytest.raises(pypi.PypiError, match="sha256"):
        pypi.download("anytree==2.9.1", sha256="0" * 64)


def test_test_requirements_from_tox_setup_cfg_poetry_hatch_and_test_folders(tmp_path):
    """natsort declares hypothesis and pytest-mock only in tox.ini; others use setup.cfg's
    tests_require, Poetry groups, Hatch environments or tests/requirements.txt."""
    repo = _project(
        tmp_path / "demo-2.0",
        {
            "tox.ini": """
            [tox]
            envlist = py311, flake8
            [base]
            deps = attrs
            [testenv]
            deps =
                coverage
                pytest-mock
                {[base]deps}
                py38: mock
                -r requirements-extra.txt
            [testenv:flake8]
            deps = flake8-bugbear
                   pep8-naming
            [testenv:unit]
            deps = freezegun
            """,
            "requirements-extra.txt": "simplejson\n",
            "setup.cfg": "[options]\ntests_require =\n    hypothesis\n",
            "pyproject.toml": """
            [tool.poetry.group.test.dependencies]
            pytest-asyncio = "^0.21"
            [tool.poetry.group.docs.dependencies]
            sphinx-rtd = "*"
            [tool.hatch.envs.test]
            dependencies = ["toml"]
            [project.optional-dependencies]
            unittest = ["six"]
            """,
            "tests/requirements.txt": "responses\n",
            "demo/__init__.py": "",
        },
    )
    spec = pypi.derive_environment(repo, "demo")
    assert spec.requirements == (
        "attrs",
        "freezegun",
        "hypothesis",
        "pytest-asyncio",
        "pytest-mock",
        "responses",
        "simplejson",
        "six",
        "toml",
    )


def test_environment_plugins_are_named_for_the_command():
    """The grader loads no plugin it is not told to: pytest-mock's mocker needs -p."""
    from repogym.scenarios.dependencies import DependencySpec, build

    env, _ = build(DependencySpec(requirements=("pytest-mock==3.14.0", "six==1.17.0")))
    assert pypi.pytest_plugins(env.site, ["pytest-mock", "six"]) == ["pytest_mock"]
    assert pypi.pytest_plugins(env.site, ["six"]) == []  # only the requested ones
