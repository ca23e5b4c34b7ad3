"""Remove the top-level ``tests`` package a distribution installed into site-packages.

Some wheels (verl's) ship their own test suite as a package named ``tests``, which then
shadows this repository's ``tests`` package. Only files the named distribution's RECORD
lists are removed. Usage: python .ci/drop_foreign_tests.py DIST [DIST ...]
"""

import importlib.metadata as md
import sys
from pathlib import Path

for name in sys.argv[1:]:
    dist = md.distribution(name)
    gone = 0
    for f in dist.files or []:
        if f.parts and f.parts[0] == "tests":
            path = Path(dist.locate_file(f))
            if path.is_file():
                path.unlink()
                gone += 1
    root = Path(dist.locate_file("tests"))
    folders = sorted((p for p in root.rglob("*") if p.is_dir()), reverse=True)
    for d in folders if root.is_dir() else []:
        if not any(d.iterdir()):
            d.rmdir()
    if root.is_dir() and not any(root.iterdir()):
        root.rmdir()
    print(f"{name}: removed {gone} files of its top-level tests package")
