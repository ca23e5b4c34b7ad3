"""``repogym gc``: remove what killed processes left behind.

A process killed with SIGKILL cannot run ``close()``. Its docker containers (labelled
``repogym.sandbox`` with the owner's host and pid), its lease folders (templates and
workspaces, whose lock the kernel released when it died) and its cgroups are found and
removed here. Only leftovers of owners that are gone are touched, unless ``--all`` is given
for containers.
"""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("gc", help="remove leftover sandboxes (containers, workspaces, cgroups)")
    p.add_argument("--all", action="store_true",
                   help="remove every repogym container, even those of running processes")
    p.add_argument("--docker-host", default=None,
                   help="Docker engine URL (default: REPOGYM_DOCKER_HOST, the private "
                        "daemon's socket, DOCKER_HOST)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from repogym.sandbox.leases import collect_garbage

    removed = collect_garbage()
    cgroups = sum(1 for p in removed if p.parts[:3] == ("/", "sys", "fs"))
    print(f"removed {len(removed) - cgroups} lease folders (templates and workspaces), "
          f"{cgroups} cgroups")
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
