"""``repogym gc``: remove what killed processes left behind.

A process killed with SIGKILL cannot run ``close()`` (any other signal, garbage collection
and interpreter exit already clean up). What it left is found and removed here:

- its lease folders (templates and workspaces, with their mounts) and the lease's cgroups:
  the kernel released the lease's lock when the process died;
- its Docker containers (labelled ``repogym.sandbox`` with the owner's host and pid);
- folders and cgroups of repogym versions before leases (named with the owner's pid).

A leftover whose owner pid is alive is removed too when that process is no longer its
owner: it started after the leftover was made (a reused pid) or is no longer a Python
interpreter (it exec'd into another program). ``--all`` removes every repogym container,
even those of running processes.
"""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("gc", help="remove leftover sandboxes (containers, workspaces, cgroups)")
    p.add_argument(
        "--all",
        action="store_true",
        help="remove every repogym container, even those of running processes",
    )
    p.add_argument(
        "--docker-host",
        default=None,
        help="Docker engine URL (default: REPOGYM_DOCKER_HOST, the private "
        "daemon's socket, DOCKER_HOST)",
    )
    p.add_argument("--no-docker", action="store_true", help="do not look for containers")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from repogym.sandbox.leases import collect_garbage
    from repogym.sandbox.owners import collect_legacy

    removed = collect_garbage() + collect_legacy()
    cgroups = [p for p in removed if p.parts[:3] == ("/", "sys", "fs")]
    print(
        f"removed {len(removed) - len(cgroups)} folders (templates and workspaces), "
        f"{len(cgroups)} cgroups"
    )
    for p in removed:
        print(f"  {p}")
    if args.no_docker:
        return 0
    try:
        from repogym.sandbox.docker_setup import default_base_url, ping

        url = args.docker_host or default_base_url()
        why = ping(url)
    except ImportError as e:  # the docker extra is not installed
        why = f"{e} (pip install 'repogym[docker]')"
    if why:
        print(f"docker: no engine answers ({why}); no containers checked")
        return 0
    from repogym.sandbox.docker import remove_leftovers

    names = remove_leftovers(everything=args.all, base_url=url)
    print(f"docker: removed {len(names)} containers" + (f": {', '.join(names)}" if names else ""))
    return 0
