"""A package's own tests run in the sandbox, with its environment (``repogym synth --pypi``).

:class:`SandboxRunner` is a :class:`repogym.scenarios.synth.TestRunner` for code that is
not yours (a PyPI download): every run starts a fresh sandbox from one template of the
pristine package, writes in the files that differ from it (the mutant), and runs pytest
with the package's environment, plugin auto-loading off and the grader's configuration
(only ``ini_options``, as the grader writes it), so what synthesis sees is what grading
will see. Per-test outcomes and failure messages come from a small plugin
(``probe/rg_probe.py``) as JSON lines; paths inside the sandbox are removed from messages.
"""

from __future__ import annotations

import json
import shlex
import shutil
import tempfile
from pathlib import Path
from typing import Self

from repogym.envs.grader import is_test_file
from repogym.envs.verifier import ini_text
from repogym.sandbox import Limits, SandboxSpec, make_sandbox
from repogym.sandbox.base import WORKSPACE, Environment, Sandbox, SandboxError
from repogym.sandbox.workspace import TemplateCache

PROBE_DIR = Path(__file__).parent / "probe"
_OUT = "/tmp/rg-probe.jsonl"
_LOG = "/tmp/rg-probe.log"
_SKIP_DIRS = {".git", ".tox", ".nox", "build", "dist", "docs", "doc", "__pycache__", ".venv",
              "venv", "node_modules", "benchmarks", "bench"}


def test_files(root: Path) -> list[str]:
    """The package's test files (``test_*.py``/``*_test.py``), outside build and docs folders."""
    out = []
    for p in sorted(root.rglob("*.py")):
        rel = p.relative_to(root)
        if not _SKIP_DIRS & set(rel.parts[:-1]) and is_test_file(str(rel)):
            out.append(str(rel))
    return out


def statuses(records: list[dict]) -> tuple[dict[str, str], dict[str, str]]:
    """(node id -> passed/failed/error/skipped, node id -> failure message) from probe records."""
    phases: dict[str, dict[str, tuple[str, str]]] = {}
    for r in records:
        if isinstance(r.get("case"), str):
            phases.setdefault(r["case"], {})[str(r.get("when"))] = (
                str(r.get("outcome")), str(r.get("message", "")))
    status, messages = {}, {}
    for node, p in phases.items():
        setup, call, teardown = (p.get(w, ("", "")) for w in ("setup", "call", "teardown"))
        if setup[0] == "failed" or teardown[0] == "failed":
            status[node], messages[node] = "error", setup[1] or teardown[1]
        elif call[0]:
            status[node], messages[node] = {"passed": "passed", "failed": "failed"}.get(
                call[0], "skipped"), call[1]
        else:
            status[node] = "skipped" if setup[0] == "skipped" else "error"
    return status, messages


class SandboxRunner:
    """Runs a package's tests in a fresh sandbox per run (see the module docstring).

    Args:
        environment: The package's built environment (None: the sandbox's pytest only).
        ini_options: The pytest settings the tasks' verifier will use.
        sandbox: Sandbox backend.
        sandbox_options: Extra options for the backend.
        limits: Sandbox limits (each run's timeout comes from the caller).
    """

    def __init__(self, environment: Environment | None, ini_options: dict[str, str] | None = None,
                 *, sandbox: str = "bwrap", sandbox_options: dict | None = None,
                 limits: Limits | None = None) -> None:
        self.environment = environment
        self.backend, self.options = sandbox, dict(sandbox_options or {})
        self.limits = limits or Limits()
        self._templates = TemplateCache()
        self._template: Path | None = None
        self._snapshot: dict[str, bytes] = {}
        self._files: list[str] = []
        self._probe = Path(tempfile.mkdtemp(prefix="repogym-probe-"))
        shutil.copy(PROBE_DIR / "rg_probe.py", self._probe / "rg_probe.py")
        (self._probe / "pytest.ini").write_text(ini_text(ini_options or {}))
        self._probe.chmod(0o755)
        #: The log tail of the latest run (for error messages).
        self.log = ""

    def collect(self, root: Path, timeout_s: float) -> list[str]:
        """Take ``root`` as the pristine package; the ids of the tests that pass there."""
        self._template = self._templates.get(root, self.environment)
        self._snapshot = {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*.py")}
        self._files = test_files(root)
        found, _ = self._run(root, timeout_s)
        return sorted(t for t, s in found.items() if s == "passed")

    def run(self, root: Path, node_ids: list[str],
            timeout_s: float) -> tuple[dict[str, str], dict[str, str]]:
        found, messages = self._run(root, timeout_s)
        return ({t: found.get(t, "missing") for t in node_ids},
                {t: messages.get(t, "") for t in node_ids})

    def _changes(self, root: Path) -> dict[str, str]:
        out = {}
        for rel, data in self._snapshot.items():
            now = (root / rel).read_bytes() if (root / rel).is_file() else b""
            if now != data:
                out[rel] = now.decode("utf-8")
        return out

    def _command(self, sb: Sandbox) -> str:
        py = shlex.quote(sb.interpreter.executable)
        files = " ".join(shlex.quote(f) for f in self._files)
        return (f'PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 PYTHONPATH="$RG_PROBE:$PYTHONPATH" '
                f"RG_PROBE_OUT={_OUT} {py} -m pytest -c \"$RG_PROBE/pytest.ini\" --rootdir=. "
                f"-p no:cacheprovider -p rg_probe -q --tb=short {files} > {_LOG} 2>&1; "
                f"echo exit=$?")

    def _run(self, root: Path, timeout_s: float) -> tuple[dict[str, str], dict[str, str]]:
        if self._template is None:
            raise RuntimeError("SandboxRunner.run before collect. Fix: call collect() first")
        limits = Limits(**{**self.limits.__dict__, "timeout_s": timeout_s})
        sb = make_sandbox(self.backend, SandboxSpec(self._template, limits), **self.options)
        try:
            for rel, text in self._changes(root).items():
                sb.write_file(rel, text)
            res = sb.run_with_binds(self._command(sb), ro={"probe": self._probe},
                                    timeout_s=timeout_s)
            if res.timed_out:
                self.log = f"timed out after {timeout_s}s"
                return {}, {}
            out = sb.run(f"cat {_OUT} 2>/dev/null; true", timeout_s=60)
            self.log = sb.run(f"tail -c 3000 {_LOG}", timeout_s=60).stdout
        except SandboxError as e:
            self.log = str(e)
            return {}, {}
        finally:
            sb.close()
        records = []
        for line in out.stdout.splitlines():
            try:
                records.append(json.loads(line))
            except ValueError:
                continue
        found, messages = statuses(records)
        return found, {t: m.replace(WORKSPACE + "/", "") for t, m in messages.items()}

    def close(self) -> None:
        self._templates.close()
        shutil.rmtree(self._probe, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
