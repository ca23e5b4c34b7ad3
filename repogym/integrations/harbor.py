"""Harbor task folders in and out (``repogym export-harbor`` / ``repogym import-harbor``).

A Harbor task is ``instruction.md``, ``task.toml``, ``environment/Dockerfile``,
``solution/solve.sh`` and ``tests/test.sh``, which runs after the agent and writes
``/logs/verifier/reward.txt``. An exported repogym task keeps repogym's integrity rules:

- the hidden tests, the grader (a copy of repogym's own ``repogym`` package) and the task's
  verifier settings live in ``tests/``, which Harbor copies into the container only at
  verify time;
- ``tests/test.sh`` (run as root) first kills every process of the ``agent`` user, so
  nothing the agent started outlives its turn; then takes the agent's diff of
  ``/workspace``; then runs repogym's grader (:func:`repogym.grading.grader.grade`: the diff
  filtered, applied to the pristine repository the image keeps read-only, the hidden tests
  plus canaries run through the isolated launcher) as a separate unprivileged ``verifier``
  user, and writes the reward file itself: nothing but the verifier writes it.

``tests/repogym.toml`` is the task's own ``task.toml``; importing a Harbor task reads it
(with the statement from ``instruction.md``, the repository from the Dockerfile's
``COPY ... /workspace`` folder, the hidden tests from ``tests/hidden/`` and the gold patch
from ``solution/solution.patch``). A Harbor task without it cannot be imported: repogym
grades with pytest node ids, which a bare ``test.sh`` does not name.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import shutil
import sys
import tomllib
from pathlib import Path
from typing import Any

from repogym.scenarios.importing import check_file, check_id, copy_file, copy_tree, staged_task
from repogym.scenarios.task import Task, TaskError, load_task

WORKDIR = "/workspace"
PRISTINE = "/opt/repogym/repo"
DEFAULT_BASE_IMAGE = "python:3.11-slim"
#: Parts of the repogym package the in-container grader needs (no trainers, no tasks).
_VENDORED = ("__init__.py", "envs", "sandbox", "scenarios")

TEST_SH = """\
#!/bin/bash
# repogym's verifier for Harbor: runs after the agent, as root; the only writer of the reward.
set -uo pipefail
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
# Nothing the agent started may outlive its turn.
python3 - <<'EOF'
import os, pwd, signal
uid = pwd.getpwnam("agent").pw_uid
for _ in range(3):
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.stat(f"/proc/{pid}").st_uid == uid:
                os.kill(int(pid), signal.SIGKILL)
        except OSError:
            pass
EOF
work=$(mktemp -d /tmp/repogym-verify.XXXXXX)
chmod 755 "$work"
# The agent's changes as one diff against the initial commit.
git -C /workspace -c safe.directory='*' add -A >/dev/null 2>&1
git -C /workspace -c safe.directory='*' diff --cached --binary HEAD > "$work/agent.diff" || true
chmod 644 "$work/agent.diff"
# repogym's grader, as the unprivileged verifier user; it prints one JSON result.
setpriv --reuid=verifier --regid=verifier --clear-groups \\
  env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$work" PYTHONPATH=/tests/vendor \\
  python3 -m repogym.integrations.harbor verify --task-toml /tests/repogym.toml \\
  --tests /tests/hidden --repo @PRISTINE@ --diff "$work/agent.diff" \\
  --reward-mode "${REPOGYM_REWARD_MODE:-binary}" > "$work/result.json"
python3 - "$work/result.json" <<'EOF'
import json, sys
result = json.load(open(sys.argv[1]))
json.dump(result, open("/logs/verifier/repogym.json", "w"), indent=1)
open("/logs/verifier/reward.txt", "w").write(f"{float(result['reward'])}\\n")
print(f"reward {result['reward']}  tests {result['tests']}  flags {result['hack_flags']}")
EOF
rm -rf "$work"
"""

DOCKERFILE = """\
FROM {base_image}
# git makes the one-commit workspace; pytest, gymnasium and numpy run repogym's grader.
RUN (command -v git >/dev/null || (apt-get update && apt-get install -y --no-install-recommends \\
        git && rm -rf /var/lib/apt/lists/*)) \\
    && python3 -m pip install --no-cache-dir pytest gymnasium numpy {requirements}
RUN useradd --create-home --uid 1000 agent && useradd --no-create-home --uid 1001 verifier
COPY repo/ {pristine}/
RUN chmod -R a+rX,go-w {pristine} && cp -a {pristine} {workdir} \\
    && git -C {workdir} init -q -b main && git -C {workdir} add -A \\
    && git -C {workdir} -c user.name=repogym -c user.email=repogym@localhost \\
       commit -q --no-verify -m "Initial commit" --date "2000-01-01T00:00:00+0000" \\
    && chown -R agent:agent {workdir}
WORKDIR {workdir}
"""


def _toml_str(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def harbor_task_toml(task: Task) -> str:
    """The Harbor ``task.toml`` of ``task`` (schema 1.4; agent and verifier without network)."""
    keywords = ", ".join(_toml_str(t) for t in task.tags)
    first_line = task.statement.strip().splitlines()[0]
    return (
        f'schema_version = "1.4"\nsource = "repogym"\n\n[task]\n'
        f'name = {_toml_str("repogym/" + task.id)}\nversion = "{task.version}"\n'
        f"description = {_toml_str(first_line)}\nkeywords = [{keywords}]\n\n"
        f"[metadata]\nrepogym_id = {_toml_str(task.id)}\nsplit = {_toml_str(task.split)}\n"
        f"max_steps = {task.max_steps}\n\n"
        f"[verifier]\ntimeout_sec = {float(task.test_spec.timeout_s) + 120.0}\n"
        f'user = "root"\nnetwork_mode = "no-network"\n\n'
        f'[agent]\ntimeout_sec = 1800.0\nuser = "agent"\nnetwork_mode = "no-network"\n\n'
        f'[environment]\nworkdir = "{WORKDIR}"\nnetwork_mode = "no-network"\n'
        f"cpus = 1\nmemory_mb = 2048\n"
    )


def _copy_clean(src: Path, dest: Path) -> None:
    shutil.copytree(
        src, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"), dirs_exist_ok=True
    )


def _requirements(task: Task) -> str:
    data = tomllib.loads((task.path / "task.toml").read_text())
    reqs = data.get("environment", {}).get("requirements", [])
    if isinstance(reqs, str):
        reqs = (task.path / reqs).read_text().split()
    return " ".join(shlex.quote(r) for r in reqs)


def export_task(task: Task, out: Path, *, base_image: str = DEFAULT_BASE_IMAGE) -> Path:
    """Write ``task`` as a Harbor task folder ``out/<id>``; returns it.

    Raises:
        FileExistsError: the folder exists (the message says how to overwrite).
    """
    dest = Path(out) / task.id
    if dest.exists():
        raise FileExistsError(f"{dest} exists. Fix: remove it or pick another --out")
    (dest / "environment").mkdir(parents=True)
    (dest / "instruction.md").write_text(task.statement)
    (dest / "task.toml").write_text(harbor_task_toml(task))
    _copy_clean(task.repo_dir, dest / "environment" / "repo")
    (dest / "environment" / "Dockerfile").write_text(
        DOCKERFILE.format(
            base_image=base_image,
            requirements=_requirements(task),
            pristine=PRISTINE,
            workdir=WORKDIR,
        )
    )
    solution = dest / "solution"
    solution.mkdir()
    shutil.copy(task.solution_patch, solution / "solution.patch")
    (solution / "solve.sh").write_text(
        f"#!/bin/bash\nset -euo pipefail\ncd {WORKDIR}\ngit apply --whitespace=nowarn "
        "/solution/solution.patch\n"
    )
    tests = dest / "tests"
    tests.mkdir()
    (tests / "test.sh").write_text(TEST_SH.replace("@PRISTINE@", PRISTINE))
    shutil.copy(task.path / "task.toml", tests / "repogym.toml")
    _copy_clean(task.tests_dir, tests / "hidden")
    for kind in ("alternatives", "decoys"):
        for patch in getattr(task, kind):
            (tests / kind).mkdir(exist_ok=True)
            shutil.copy(patch, tests / kind / patch.name)
    _vendor_repogym(tests / "vendor" / "repogym")
    for script in (solution / "solve.sh", tests / "test.sh"):
        script.chmod(0o755)
    return dest


def _vendor_repogym(dest: Path) -> None:
    src = Path(__file__).resolve().parent.parent
    dest.mkdir(parents=True)
    for name in _VENDORED:
        if (src / name).is_dir():
            shutil.copytree(
                src / name,
                dest / name,
                ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "builtin"),
            )
        else:
            shutil.copy(src / name, dest / name)
    (dest / "integrations").mkdir()
    (dest / "integrations" / "__init__.py").write_text("")
    shutil.copy(__file__, dest / "integrations" / "harbor.py")


_COPY = re.compile(r"^\s*COPY\s+(?:--\S+\s+)*(\S+)\s+(\S+)\s*$", re.IGNORECASE)


def _repo_source(harbor_dir: Path, workdir: str) -> Path:
    """The folder the Dockerfile copies to the working directory (the repository)."""
    dockerfile = harbor_dir / "environment" / "Dockerfile"
    if not dockerfile.is_file():
        raise TaskError(
            f"{dockerfile}: missing. Fix: a Harbor task needs environment/"
            "Dockerfile (an image given only by docker_image cannot be imported)"
        )
    sources = {}
    for line in dockerfile.read_text().splitlines():
        m = _COPY.match(line)
        if m:
            sources[m.group(2).rstrip("/")] = m.group(1)
    for target in (workdir.rstrip("/"), PRISTINE):
        if target in sources:
            src = (harbor_dir / "environment" / sources[target]).resolve()
            if src.is_dir() and src.is_relative_to(harbor_dir.resolve()):
                return src
    raise TaskError(
        f"{dockerfile}: no `COPY <folder> {workdir}` line copies the repository "
        "from the task folder, so it cannot be built offline as a repogym task. "
        f"Fix: put the repository in environment/ and COPY it to {workdir}"
    )


def import_task(harbor_dir: Path, out: Path, **foreign: Any) -> Task:
    """Turn one Harbor task folder into a repogym task folder under ``out``; returns it loaded.

    A folder ``repogym export-harbor`` wrote (it has ``tests/repogym.toml``) comes back as
    the task it was (``foreign`` is not used); any other Harbor task is imported by
    :func:`repogym.integrations.harbor_tasks.import_foreign` (``foreign`` are its options),
    graded by its own ``tests/test.sh``. Nothing is written before the id is checked (one
    path component), files are copied without following links
    (:mod:`repogym.scenarios.importing`), and a failed import leaves nothing under ``out``.

    Raises:
        TaskError: the folder cannot be imported (the message names the file and the fix).
        FileExistsError: ``out/<id>`` exists.
    """
    harbor_dir = Path(harbor_dir)
    if not (harbor_dir / "tests" / "repogym.toml").is_file():
        from repogym.integrations.harbor_tasks import import_foreign

        return import_foreign(harbor_dir, Path(out), **foreign)
    for name in ("instruction.md", "task.toml", "solution/solution.patch"):
        if not (harbor_dir / name).is_file():
            raise TaskError(
                f"{harbor_dir / name}: missing. Fix: add it (a task exported by "
                "`repogym export-harbor` has it)"
            )
    config = _read_toml(harbor_dir / "task.toml")
    workdir = config.get("environment", {}).get("workdir") or WORKDIR
    repo = _repo_source(harbor_dir, workdir)
    meta_file = harbor_dir / "tests" / "repogym.toml"
    meta = _read_toml(meta_file)
    task_id = check_id(meta.get("id", harbor_dir.name), f"{meta_file}: id")
    hidden = harbor_dir / "tests" / "hidden"
    if not hidden.is_dir():
        raise TaskError(f"{hidden}: missing. Fix: put the hidden pytest files in tests/hidden/")
    with staged_task(Path(out), task_id) as dest:
        dest.mkdir()
        copy_tree(repo, dest / "repo", internal_links=True, ignore=_bytecode)
        copy_tree(hidden, dest / "tests", ignore=_bytecode)
        copy_file(harbor_dir / "solution" / "solution.patch", dest / "solution.patch")
        for kind in ("alternatives", "decoys"):
            if (harbor_dir / "tests" / kind).is_dir():
                copy_tree(harbor_dir / "tests" / kind, dest / kind)
        copy_file(harbor_dir / "instruction.md", dest / "STATEMENT.md")
        check_file(meta_file)
        (dest / "task.toml").write_text('statement_file = "STATEMENT.md"\n' + meta_file.read_text())
        load_task(dest)  # a malformed task fails here, before anything reaches out/
    return load_task(Path(out) / task_id)


def _read_toml(path: Path) -> dict:
    check_file(path)
    try:
        return tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise TaskError(f"{path}: invalid TOML: {e}. Fix: correct the syntax") from e


def _bytecode(name: str) -> bool:
    return name == "__pycache__" or name.endswith(".pyc")


# -- inside the container: tests/test.sh runs this as the verifier user ------------------------
def verify(task_toml: Path, tests: Path, repo: Path, diff: str, reward_mode: str) -> dict:
    """Grade ``diff`` with repogym's grader; the result as a JSON-safe dict."""
    import tempfile
    import warnings

    from repogym.grading import grader
    from repogym.sandbox import make_sandbox
    from repogym.sandbox.workspace import TemplateCache

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "task"
        folder.mkdir()
        shutil.copy(task_toml, folder / "task.toml")
        shutil.copytree(repo, folder / "repo")
        shutil.copytree(tests, folder / "tests")
        (folder / "solution.patch").write_text("")  # the gold patch is not needed to grade
        task = load_task(folder)
        templates = TemplateCache()
        try:
            with warnings.catch_warnings():  # the container is the isolation here
                warnings.simplefilter("ignore", RuntimeWarning)
                result = grader.grade(
                    task,
                    templates.get(task.repo_dir),
                    diff,
                    mode=reward_mode,
                    make_sandbox=lambda spec: make_sandbox("process", spec),
                )
        finally:
            templates.close()
    return {
        "reward": result.reward,
        "resolved": result.resolved,
        "tests": result.tests,
        "hack_flags": result.hack_flags,
        "infra_error": result.infra_error,
        "reward_breakdown": result.reward_breakdown,
    }


def main(argv: list[str] | None = None) -> int:
    """``python -m repogym.integrations.harbor verify ...`` (what tests/test.sh runs)."""
    from repogym.sandbox import cleanup

    cleanup.install_signal_handlers()  # an entry point: SIGTERM removes its sandboxes
    p = argparse.ArgumentParser(prog="repogym.integrations.harbor")
    sub = p.add_subparsers(dest="cmd", required=True)
    v = sub.add_parser("verify", help="grade a diff (inside an exported task's container)")
    v.add_argument("--task-toml", type=Path, required=True)
    v.add_argument("--tests", type=Path, required=True)
    v.add_argument("--repo", type=Path, required=True)
    v.add_argument("--diff", type=Path, required=True)
    v.add_argument("--reward-mode", default="binary")
    args = p.parse_args(argv)
    result = verify(args.task_toml, args.tests, args.repo, args.diff.read_text(), args.reward_mode)
    json.dump(result, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
