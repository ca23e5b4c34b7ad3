"""The leaderboard: Markdown, PNGs and an HTML page rendered by headless Chromium."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from repogym.harness.leaderboard import build

from .conftest import run_cli

REPO = Path(__file__).resolve().parents[2]
REFERENCE_AGENTS = ["oracle", "noop", "random", "replay"]


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    pytest.skip("headless Chromium is not installed: `make system-deps` installs it (apt "
                "install chromium)")


def dump_dom(page: Path, profile: Path) -> str:
    """The DOM after Chromium loaded and rendered ``page`` (no network, fresh profile)."""
    proc = subprocess.run(
        [chromium(), "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-first-run", f"--user-data-dir={profile}", "--dump-dom", page.resolve().as_uri()],
        capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


class _Table(HTMLParser):
    """Cells of ``<table id="leaderboard">`` and whether every <img> carried inline data."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self.images: list[str] = []
        self._in_table = self._in_cell = False

    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = dict(attrs)
        if tag == "table":
            self._in_table = a.get("id") == "leaderboard"
        elif self._in_table and tag == "tr":
            self.rows.append([])
        elif self._in_table and tag in ("td", "th"):
            self._in_cell = True
            self.rows[-1].append("")
        elif tag == "img":
            self.images.append(a.get("src", ""))

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._in_table = False
        elif tag in ("td", "th"):
            self._in_cell = False

    def handle_data(self, data: str) -> None:
        if self._in_table and self._in_cell:
            self.rows[-1][-1] += data


def parse(dom: str) -> _Table:
    t = _Table()
    t.feed(dom)
    return t


def _write(folder: Path, agent: str, resolved: list[bool], split: str = "train") -> Path:
    folder.mkdir(parents=True)
    with (folder / "results.jsonl").open("w") as f:
        for i, ok in enumerate(resolved):
            f.write(json.dumps({"agent": agent, "task": f"t{i % 2}", "split": split,
                                "sample": i // 2, "reward": float(ok), "resolved": ok,
                                "steps": 3 + i, "wall_s": 1.5, "tokens": 10 * i,
                                "hack_flags": [], "infra_error": None,
                                "agent_error": None}) + "\n")
    return folder


def test_page_shows_every_agent_in_chromium(tmp_path: Path) -> None:
    dirs = [_write(tmp_path / "a", "alpha", [True, True, True, False]),
            _write(tmp_path / "b", "beta <b>", [False, False, True, False], split="test"),
            _write(tmp_path / "c", "gamma", [False, False])]
    out = tmp_path / "lb"
    proc = run_cli("leaderboard", "--results", *map(str, dirs), "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for name in ("index.html", "leaderboard.md", "resolve_rate.png", "reward.png", "steps.png"):
        assert (out / name).stat().st_size > 0, name
    assert (out / "resolve_rate.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = parse(dump_dom(out / "index.html", tmp_path / "profile"))
    header, *body = table.rows
    assert header[:4] == ["agent", "episodes", "tasks", "resolve rate"]
    assert [r[0] for r in body] == ["alpha", "beta <b>", "gamma"]  # best first, escaped
    assert body[0][3] == "75.0%" and body[1][3] == "25.0%" and body[2][3] == "0.0%"
    # pass@2 for alpha: t0 has n=2,c=2 -> 1; t1 n=2,c=1 -> 1.
    assert body[0][6] == "100.0% (k=2)"
    assert len(table.images) == 3 and all(s.startswith("data:image/png;base64,")
                                          for s in table.images)
    html = (out / "index.html").read_text()
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)  # no external assets
    md = (out / "leaderboard.md").read_text()
    assert "| alpha | 4 | 2 | 75.0% |" in md


def test_committed_leaderboard_lists_the_reference_agents(tmp_path: Path) -> None:
    page = REPO / "leaderboard" / "index.html"
    table = parse(dump_dom(page, tmp_path / "profile"))
    agents = {row[0] for row in table.rows[1:]}
    assert set(REFERENCE_AGENTS) <= agents, agents
    oracle = next(r for r in table.rows[1:] if r[0] == "oracle")
    assert oracle[3] == "100.0%"  # every built-in's gold patch resolves its task
    noop = next(r for r in table.rows[1:] if r[0] == "noop")
    assert noop[3] == "0.0%"


def test_no_results_is_explained(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="repogym run --out DIR"):
        build([tmp_path], tmp_path / "out")
