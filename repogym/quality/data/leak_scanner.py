"""repogym's leak scanner: runs inside a task's sandbox (stdlib only, ``python -S -s``).

Usage: ``scan.py NEEDLES.json``; the file holds ``{"needles": [{"task", "key", "block"}],
"mode": "system" | "workspace", "skip_name": NAME}``. ``system`` walks every folder under
``/`` but ``/proc``, ``/sys``, ``/dev`` and the workspace (the working folder);
``workspace`` walks only the workspace. A file that holds a needle's ``key`` line (found
with ``grep -F`` where there is one) is read and its lines, stripped and without blank
ones, are searched for the needle's ``block``; each match is printed as a JSON line
``{"task", "key", "path"}``. Folders named ``skip_name`` (the scanner's own) are skipped.
"""

import json
import os
import shutil
import subprocess
import sys

MAX_BYTES = 16 << 20


def roots(mode, workspace):
    if mode == "workspace":
        return [workspace]
    out = []
    for name in sorted(os.listdir("/")):
        path = "/" + name
        if name in ("proc", "sys", "dev") or path == workspace or os.path.islink(path):
            continue
        if os.path.isdir(path):
            out.append(path)
    return out


def candidates_grep(grep, keys, paths, skip_name):
    folder = os.path.join("/tmp", skip_name)  # skipped like the scanner's own folder
    os.makedirs(folder, exist_ok=True)
    keyfile = os.path.join(folder, "keys.txt")
    with open(keyfile, "w", encoding="utf-8") as f:
        f.write("\n".join(keys) + "\n")
    argv = [
        grep,
        "-rlIF",
        "--null",
        "--no-messages",
        f"--exclude-dir={skip_name}",
        "-f",
        keyfile,
        "--",
        *paths,
    ]
    res = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=False)
    return [p for p in res.stdout.decode("utf-8", "surrogateescape").split("\0") if p]


def candidates_walk(keys, paths, skip_name):
    raw = [k.encode("utf-8", "surrogateescape") for k in keys]
    for top in paths:
        for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
            dirnames[:] = [d for d in dirnames if d != skip_name]
            for name in filenames:
                path = os.path.join(dirpath, name)
                try:
                    if os.path.islink(path) or os.path.getsize(path) > MAX_BYTES:
                        continue
                    with open(path, "rb") as f:
                        data = f.read()
                except OSError:
                    continue
                if any(k in data for k in raw):
                    yield path


def normalised(path):
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_BYTES)
    except OSError:
        return ""
    text = data.decode("utf-8", "replace")
    return "\n" + "\n".join(ln.strip() for ln in text.splitlines() if ln.strip()) + "\n"


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        config = json.load(f)
    needles = config["needles"]
    workspace = os.getcwd()
    paths = roots(config["mode"], workspace)
    keys = sorted({n["key"] for n in needles if n["key"]})
    if not keys or not paths:
        return 0
    grep = shutil.which("grep")
    found = (
        candidates_grep(grep, keys, paths, config["skip_name"])
        if grep
        else candidates_walk(keys, paths, config["skip_name"])
    )
    for path in found:
        text = normalised(path)
        for n in needles:
            if n["key"] in text and "\n" + n["block"] + "\n" in text:
                print(json.dumps({"task": n["task"], "key": n["key"], "path": path}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
