"""Start a private Docker daemon and build repogym's base image offline.

The docker backend needs a Docker engine and an image with ``python`` (with pytest),
``bash`` and ``git``. Where no engine runs (a CI machine, a fresh VM) this module starts
one of its own and builds the image without any registry:

- ``dockerd`` with overlay2, no iptables, no bridge network, and its data root, exec root,
  pidfile, log and socket all under ``ROOT`` (``$REPOGYM_DOCKER_ROOT``, default
  ``/var/lib/repogym-docker``), so it never touches a system Docker;
- the image ``repogym/python:bookworm``: the bwrap sandbox's root file system
  (:mod:`repogym.sandbox.rootfs`, ``debootstrap --variant=minbase``) with Debian's python3,
  python3-pytest and python-is-python3 added, fetched from the Debian mirror that apt
  already uses, then ``docker import``-ed. It stays in ROOT's data root, so the next
  run skips the build.

Command line (root): ``python -m repogym.sandbox.docker_setup up|down|status``. ``up``
prints the ``REPOGYM_DOCKER_HOST`` to export; the docker backend finds this daemon's
socket by itself.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from repogym.sandbox.base import SandboxError
from repogym.sandbox.limits import default_signals
from repogym.sandbox.rootfs import DOCKER_PACKAGES
from repogym.sandbox.rootfs import PACKAGES as ROOT_PACKAGES
from repogym.sandbox.rootfs import build as build_root

DEFAULT_ROOT = Path("/var/lib/repogym-docker")
DEFAULT_IMAGE = "repogym/python:bookworm"
LABEL = "repogym.sandbox"
_DAEMON_FLAGS = (
    "--storage-driver=overlay2",
    "--iptables=false",
    "--ip6tables=false",
    "--ip-masq=false",
    "--bridge=none",
    "--log-level=warn",
)
_INSTALL_HINT = (
    "Fix: `apt-get install -y docker.io debootstrap` (Debian/Ubuntu), or point "
    "REPOGYM_DOCKER_HOST at a running Docker engine"
)


class DockerSetupError(RuntimeError):
    """The daemon could not start or the image could not be built (message says why)."""


def root_dir() -> Path:
    """Where the private daemon keeps everything (``$REPOGYM_DOCKER_ROOT``)."""
    return Path(os.environ.get("REPOGYM_DOCKER_ROOT") or DEFAULT_ROOT)


def socket_path(root: Path | None = None) -> Path:
    return (root or root_dir()) / "docker.sock"


def default_base_url() -> str | None:
    """The engine the docker backend talks to, first match wins.

    ``$REPOGYM_DOCKER_HOST``, then this module's private daemon if its socket exists, then
    ``$DOCKER_HOST``; None means the Docker SDK's own default (``/var/run/docker.sock``).
    """
    if url := os.environ.get("REPOGYM_DOCKER_HOST"):
        return url
    sock = socket_path()
    if sock.is_socket():
        return f"unix://{sock}"
    return os.environ.get("DOCKER_HOST") or None


def client(base_url: str | None = None, timeout: int = 120):
    """A ``docker.DockerClient`` for ``base_url`` (default: :func:`default_base_url`)."""
    import docker

    url = base_url or default_base_url()
    if url:
        return docker.DockerClient(base_url=url, version="auto", timeout=timeout)
    return docker.from_env(version="auto", timeout=timeout)


def ping(base_url: str | None = None) -> str | None:
    """None when the engine answers, else the reason it does not."""
    try:
        c = client(base_url, timeout=5)
        try:
            c.ping()
        finally:
            c.close()
        return None
    except Exception as e:
        return f"{type(e).__name__}: {e}"


# -- the daemon -----------------------------------------------------------------------------
def _log_tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def start_daemon(root: Path | None = None, wait_s: float = 60.0) -> bool:
    """Start the private dockerd unless it already answers.

    Returns:
        True if this call started it (the caller should stop it), False if it was running.

    Raises:
        DockerSetupError: not root, dockerd missing, or it did not come up (log tail included).
    """
    root = root or root_dir()
    url = f"unix://{socket_path(root)}"
    if ping(url) is None:
        return False
    dockerd = shutil.which("dockerd", path=os.environ.get("PATH", "") + ":/usr/sbin:/usr/bin")
    if not dockerd:
        raise DockerSetupError(f"dockerd is not installed. {_INSTALL_HINT}")
    if os.geteuid() != 0:
        raise DockerSetupError(
            "starting a private dockerd needs root. Fix: run as root, or "
            "set REPOGYM_DOCKER_HOST to a Docker engine you may use"
        )
    root.mkdir(parents=True, exist_ok=True)
    for name in ("docker.sock", "docker.pid"):
        (root / name).unlink(missing_ok=True)
    log = root / "dockerd.log"
    argv = [
        dockerd,
        *_DAEMON_FLAGS,
        f"--data-root={root / 'data'}",
        f"--exec-root={root / 'exec'}",
        f"--pidfile={root / 'docker.pid'}",
        "-H",
        url,
    ]
    with open(log, "ab") as out:
        # containers started by this daemon inherit its signal dispositions (default_signals)
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,
            preexec_fn=default_signals,
        )
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise DockerSetupError(
                f"dockerd exited with code {proc.returncode}; {log}:\n{_log_tail(log)}"
            )
        if ping(url) is None:
            return True
        time.sleep(0.3)
    _stop_pid(proc.pid)
    raise DockerSetupError(f"dockerd did not answer within {wait_s:.0f}s; {log}:\n{_log_tail(log)}")


def _stop_pid(pid: int, wait_s: float = 20.0) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            if os.waitpid(pid, os.WNOHANG) != (0, 0):
                return
        except ChildProcessError:  # not our child: poll for its exit instead
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
        time.sleep(0.1)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def stop_daemon(root: Path | None = None) -> bool:
    """Stop the private dockerd (the image stays cached). Returns False if none was running."""
    pidfile = (root or root_dir()) / "docker.pid"
    try:
        pid = int(pidfile.read_text().strip())
    except (OSError, ValueError):
        return False
    _stop_pid(pid)
    return True


# -- the image ------------------------------------------------------------------------------
def image_exists(name: str = DEFAULT_IMAGE, base_url: str | None = None) -> bool:
    import docker

    c = client(base_url)
    try:
        c.images.get(name)
        return True
    except docker.errors.ImageNotFound:
        return False
    finally:
        c.close()


def build_image(
    name: str = DEFAULT_IMAGE, base_url: str | None = None, mirror: str | None = None
) -> bool:
    """Build ``name`` with debootstrap + import unless it exists. Returns True if built."""
    if image_exists(name, base_url):
        return False
    work = Path(tempfile.mkdtemp(prefix="repogym-image-", dir=_build_dir()))
    try:
        rootfs, tar = work / "rootfs", work / "rootfs.tar"
        try:
            build_root(rootfs, mirror, (*ROOT_PACKAGES, *DOCKER_PACKAGES))
        except SandboxError as e:
            raise DockerSetupError(f"{e}. {_INSTALL_HINT}") from e
        subprocess.run(
            ["tar", "-C", str(rootfs), "--numeric-owner", "-cf", str(tar), "."],
            check=True,
            capture_output=True,
        )
        repo, _, tag = name.rpartition(":") if ":" in name.split("/")[-1] else (name, "", "latest")
        c = client(base_url, timeout=600)
        try:
            c.api.import_image_from_file(str(tar), repository=repo, tag=tag)
        finally:
            c.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if not image_exists(name, base_url):
        raise DockerSetupError(f"docker import did not produce {name}")
    return True


def _build_dir() -> Path:
    d = root_dir() / "build" if os.geteuid() == 0 else Path(tempfile.gettempdir())
    d.mkdir(parents=True, exist_ok=True)
    return d


@dataclasses.dataclass(frozen=True)
class Setup:
    """A ready engine: where it is, and whether :func:`ensure` started it."""

    base_url: str
    started: bool
    image: str


def ensure(image: str = DEFAULT_IMAGE) -> Setup:
    """An engine that answers, with ``image`` present; starts/builds what is missing.

    An engine named by ``$REPOGYM_DOCKER_HOST``/``$DOCKER_HOST`` (or the default socket)
    that answers is used as is; otherwise the private daemon is started.
    """
    started = False
    url = default_base_url()
    why = ping(url)
    if why and os.environ.get("REPOGYM_DOCKER_HOST"):
        raise DockerSetupError(
            f"REPOGYM_DOCKER_HOST={url} does not answer ({why}). Fix: start "
            "that engine, or unset REPOGYM_DOCKER_HOST to use a private one"
        )
    if why:
        started = start_daemon()
        url = f"unix://{socket_path()}"
    assert url is not None
    build_image(image, url)
    return Setup(base_url=url, started=started, image=image)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m repogym.sandbox.docker_setup", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("action", choices=["up", "down", "status"])
    p.add_argument("--image", default=DEFAULT_IMAGE)
    args = p.parse_args(argv)
    try:
        if args.action == "up":
            s = ensure(args.image)
            print(
                f"docker engine: {s.base_url} ({'started' if s.started else 'running'}); "
                f"image {s.image} ready\nexport REPOGYM_DOCKER_HOST={s.base_url}"
            )
        elif args.action == "down":
            print("stopped" if stop_daemon() else "no private dockerd was running")
        else:
            why = ping(default_base_url())
            print(f"engine {default_base_url() or '(docker default)'}: {why or 'answers'}")
            return 1 if why else 0
    except DockerSetupError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
