"""The image of a Harbor task, built on the docker backend's engine, offline.

A Harbor task's ``environment/Dockerfile`` starts ``FROM`` some image (``ubuntu:24.04``,
``python:3.13-slim``) that a machine without a registry cannot pull. :func:`build_task_image`
builds it anyway where it can:

1. every ``FROM`` image that is neither here nor pullable is replaced by the local base
   image (the docker backend's ``repogym/python:bookworm``, which has Python, pytest and
   git); each replacement is reported, and named in the task;
2. the Dockerfile is built as it is otherwise (no network at build time): a ``RUN`` that
   needs the network, or a ``COPY --from`` of an image that is not here, fails the build
   with the failing instruction and the cause named;
3. a layer of repogym's makes the image fit the docker sandbox: the task's working
   directory becomes a link to ``/workspace`` (the sandbox's workspace), Harbor's
   ``/logs``, ``/tests`` and ``/solution`` become links to places the sandbox can write
   or plants at grading time (:data:`TESTS_DEST` in the workspace), the entrypoint is
   cleared (the sandbox runs its own command), and the image is checked for the Python
   with pytest and the git that grading needs.
"""

from __future__ import annotations

import dataclasses
import io
import re
import shlex
import tarfile
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

from repogym.scenarios.importing import copy_tree
from repogym.scenarios.task import TaskError

#: Where the hidden tests go in the workspace (``/tests`` links there).
TESTS_DEST = ".harbor/tests"
#: Harbor's paths, as links in the image: (path, target).
LINKS = (
    ("/logs", "/tmp/harbor-logs"),
    ("/tests", f"/workspace/{TESTS_DEST}"),
    ("/solution", "/tmp/harbor-solution"),
)
_FROM = re.compile(r"^\s*FROM\s+(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?\s*$", re.IGNORECASE)
_COPY_FROM = re.compile(r"^\s*(?:COPY|ADD)\s+.*--from=(\S+)", re.IGNORECASE)
_ARG = re.compile(r"^\s*ARG\s+(\w+)(?:=(\S*))?\s*$", re.IGNORECASE)
_STEP = re.compile(r"^Step \d+/\d+ : (.*)$")


class ImageError(TaskError):
    """The task's image cannot be built here; the message names the missing piece."""


@dataclasses.dataclass
class TaskImage:
    """A built task image.

    Attributes:
        tag: The final image (what the docker sandbox runs).
        base: The image the task's Dockerfile builds (before repogym's layer).
        substituted: Original ``FROM`` image -> the local image used instead.
    """

    tag: str
    base: str
    substituted: dict[str, str]


def _expand(value: str, args: dict[str, str]) -> str:
    return re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m.group(1), m.group(0)), value)


def _available(client: Any, image: str) -> bool:
    import docker.errors

    try:
        client.images.get(image)
        return True
    except docker.errors.ImageNotFound:
        pass
    try:
        client.images.pull(image)
        return True
    except docker.errors.APIError:
        return False


def rewrite_dockerfile(text: str, client: Any, base: str) -> tuple[str, dict[str, str]]:
    """The Dockerfile with unavailable ``FROM`` images replaced by ``base``.

    Raises:
        ImageError: a ``COPY --from`` names an image that is neither here nor pullable.
    """
    args: dict[str, str] = {}
    stages: set[str] = set()
    substituted: dict[str, str] = {}
    out = []
    for line in text.splitlines():
        if m := _ARG.match(line):
            args.setdefault(m.group(1), m.group(2) or "")
        elif m := _FROM.match(line):
            image = _expand(m.group(1), args)
            if image.lower() not in stages and image != "scratch" and not _available(client, image):
                substituted[image] = base
                line = f"FROM {base}" + (f" AS {m.group(2)}" if m.group(2) else "")
            if m.group(2):
                stages.add(m.group(2).lower())
        elif m := _COPY_FROM.match(line):
            source = _expand(m.group(1), args)
            if (
                not source.isdigit()
                and source.lower() not in stages
                and not _available(client, source)
            ):
                raise ImageError(
                    f"environment/Dockerfile: `{line.strip()}` copies from image "
                    f"{source!r}, which is not on this engine and cannot be "
                    f"pulled (no registry). Fix: `docker load` it here, or build "
                    f"what the task needs without it"
                )
        out.append(line)
    return "\n".join(out) + "\n", substituted


def _failed_step(log: Any) -> str:
    step, tail = "", []
    for chunk in log or []:
        text = chunk.get("stream") or chunk.get("error") or "" if isinstance(chunk, dict) else ""
        for line in text.splitlines():
            if m := _STEP.match(line.strip()):
                step, tail = m.group(1), []
            elif line.strip():
                tail.append(line.strip())
    return f"`{step}`: " + " | ".join(tail[-6:]) if step else " | ".join(tail[-6:])


def _build(client: Any, context: Path, tag: str, timeout_s: float, what: str) -> str:
    import docker.errors

    try:
        image, _ = client.images.build(
            path=str(context),
            tag=tag,
            rm=True,
            forcerm=True,
            pull=False,
            network_mode="none",
            timeout=int(timeout_s),
        )
    except docker.errors.BuildError as e:
        detail = _failed_step(e.build_log)
        offline = (
            " (builds here have no network: a step that downloads fails)"
            if re.search(
                r"apt|pip|curl|wget|npm|uv |Could not resolve|resolve host|"
                r"Temporary failure|Unable to locate",
                detail,
            )
            else ""
        )
        raise ImageError(
            f"{what}: the build failed at {detail}{offline}. Fix: make the "
            "step work offline (e.g. a base image that already has what it "
            "installs), or drop it"
        ) from e
    except docker.errors.APIError as e:
        raise ImageError(f"{what}: docker refused the build: {e}") from e
    return image.id


def _repogym_layer(base: str, workdir: str) -> str:
    links = " && ".join(f"rm -rf {p} && ln -s {t} {p}" for p, t in LINKS)
    q = shlex.quote(workdir)
    move = (
        ""
        if workdir == "/workspace"
        else (
            f"rm -rf {q} && mkdir -p {shlex.quote(str(PurePosixPath(workdir).parent))} && "
            f"ln -s /workspace {q} && "
        )
    )
    check = (
        "command -v python3 >/dev/null && python3 -c 'import pytest' && "
        "command -v git >/dev/null && command -v bash >/dev/null || { echo "
        "'REPOGYM_MISSING: the image lacks bash, git, or python3 with pytest' >&2; "
        "exit 90; }"
    )
    return (
        f"FROM {base}\nUSER root\nRUN {check}\nRUN {move}{links}\nWORKDIR /workspace\n"
        'ENTRYPOINT []\nCMD ["sleep", "infinity"]\n'
    )


def build_task_image(
    environment: Path,
    tag: str,
    workdir: str,
    *,
    base_image: str,
    base_url: str | None = None,
    timeout_s: float = 600.0,
) -> TaskImage:
    """Build the image of a Harbor task's ``environment/`` folder (see the module doc).

    Args:
        environment: The task's ``environment/`` folder (with its Dockerfile).
        tag: The final image's tag.
        workdir: The task's working directory in the image (linked to /workspace).
        base_image: The local image that replaces an unavailable ``FROM``.
        base_url: The engine (default: the docker backend's).
        timeout_s: Build timeout.

    Raises:
        ImageError: no engine, a step that cannot run offline, an image that lacks what
            grading needs (the message names it).
    """
    from repogym.sandbox.docker_setup import client, default_base_url

    try:
        c = client(base_url or default_base_url(), timeout=int(timeout_s))
        c.ping()
    except Exception as e:
        raise ImageError(
            f"importing a Harbor task builds its environment/Dockerfile, and no "
            f"Docker engine answers ({e}). Fix: python -m "
            "repogym.sandbox.docker_setup up (then export the "
            "REPOGYM_DOCKER_HOST it prints)"
        ) from e
    try:
        text, substituted = rewrite_dockerfile(
            (environment / "Dockerfile").read_text(), c, base_image
        )
        with tempfile.TemporaryDirectory(prefix="repogym-harbor-build-") as tmp:
            ctx = Path(tmp) / "context"
            copy_tree(environment, ctx, internal_links=True)
            (ctx / "Dockerfile").write_text(text)
            try:
                base = _build(c, ctx, f"{tag}-base", timeout_s, "environment/Dockerfile")
            except ImageError as e:
                if substituted:
                    raise ImageError(
                        f"{e} (note: {', '.join(substituted)} could not be pulled "
                        f"and was replaced by {base_image}; the step may assume "
                        "the original image)"
                    ) from e
                raise
            layer = Path(tmp) / "layer"
            layer.mkdir()
            (layer / "Dockerfile").write_text(_repogym_layer(base, workdir))
            try:
                _build(c, layer, tag, timeout_s, "repogym's layer over the task image")
            except ImageError as e:
                if "REPOGYM_MISSING" in str(e):
                    raise ImageError(
                        f"environment/Dockerfile builds an image without bash, "
                        f"git or python3 with pytest, which repogym's docker "
                        f"sandbox needs to grade (its FROM was available here, so "
                        f"it was kept). Fix: install them in the Dockerfile, or "
                        f"retag {base_image} as that FROM image"
                    ) from e
                raise
        return TaskImage(tag, base, substituted)
    finally:
        c.close()


def extract_dir(image: str, path: str, dest: Path, *, base_url: str | None = None) -> None:
    """Copy folder ``path`` of ``image`` to ``dest`` (links kept only inside it, ``.git`` and
    bytecode left out, sizes capped: :func:`repogym.scenarios.importing.copy_tree`)."""
    from repogym.sandbox.docker_setup import client, default_base_url

    c = client(base_url or default_base_url())
    container = c.containers.create(image, command=["true"], entrypoint=[])
    try:
        stream, _ = container.get_archive(path.rstrip("/") + "/.")
        data = io.BytesIO(b"".join(stream))
    finally:
        container.remove(force=True)
        c.close()
    with tempfile.TemporaryDirectory(prefix="repogym-harbor-extract-") as tmp:
        root = Path(tmp) / "root"
        root.mkdir()
        with tarfile.open(fileobj=data) as tar:  # "data": no absolute paths, no links out
            tar.extractall(root, filter="data")
        copy_tree(
            root,
            dest,
            internal_links=True,
            ignore=lambda name: name in (".git", "__pycache__") or name.endswith(".pyc"),
        )


def remove_image(tag: str, base_url: str | None = None) -> None:
    """Remove a task image (and its base) if present."""
    import docker.errors

    from repogym.sandbox.docker_setup import client, default_base_url

    c = client(base_url or default_base_url())
    try:
        for name in (tag, f"{tag}-base"):
            try:
                c.images.remove(name, force=True)
            except docker.errors.ImageNotFound:
                pass
    finally:
        c.close()
