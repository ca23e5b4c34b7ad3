"""The leaderboard: Markdown, PNGs and an HTML page rendered by headless Chromium."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest

from repogym.harness.config import RunConfig
from repogym.harness.leaderboard import build
from repogym.harness.runner import run

from .conftest import TASKS, run_cli

REPO = Path(__file__).resolve().parents[2]
REFERENCE_AGENTS = ["oracle", "noop", "random", "replay", "forger"]


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


class _Tables(HTMLParser):
    """Cells of every ``<table id=...>``, the links in each cell, and the <img> sources."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.links: dict[str, list[list[list[tuple[str, str]]]]] = {}
        self.images: list[str] = []
        self._table: str | None = None
        self._in_cell = False

    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = dict(attrs)
        if tag == "table":
            self._table = a.get("id")
            self.tables[self._table] = []
            self.links[self._table] = []
        elif self._table and tag == "tr":
            self.tables[self._table].append([])
            self.links[self._table].append([])
        elif self._table and tag in ("td", "th"):
            self._in_cell = True
            self.tables[self._table][-1].append("")
            self.links[self._table][-1].append([])
        elif self._table and self._in_cell and tag == "a":
            self.links[self._table][-1][-1].append((a.get("class", ""), a.get("href", "")))
        elif tag == "img":
            self.images.append(a.get("src", ""))

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._table = None
        elif tag in ("td", "th"):
            self._in_cell = False

    def handle_data(self, data: str) -> None:
        if self._table and self._in_cell:
            self.tables[self._table][-1][-1] += data


def parse(dom: str) -> _Tables:
    t = _Tables()
    t.feed(dom)
    return t


def _write(folder: Path, agent: str, resolved: list[bool], split: str = "train") -> Path:
    """A synthetic run: sample i of task t{i % 2}."""
    folder.mkdir(parents=True)
    with (folder / "results.jsonl").open("w") as f:
        for i, ok in enumerate(resolved):
            f.write(json.dumps({"agent": agent, "task": f"t{i % 2}", "split": split,
                                "tags": ["x"], "sample": i // 2, "reward": float(ok),
                                "resolved": ok, "steps": 3 + i, "wall_s": 1.5, "tokens": 10 * i,
                                "hack_flags": [], "infra_error": None,
                                "agent_error": None}) + "\n")
    return folder


def _screenshot(page: Path, png: Path, profile: Path) -> np.ndarray:
    proc = subprocess.run(
        [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         "--disable-background-networking", "--no-first-run", f"--user-data-dir={profile}",
         f"--screenshot={png}", "--window-size=1280,4000", page.resolve().as_uri()],
        capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0 and png.is_file(), proc.stderr[-2000:]
    return (plt.imread(png)[..., :3] * 255).round()


def _pixels(img: np.ndarray, css_hex: str) -> int:
    rgb = np.array([int(css_hex[i:i + 2], 16) for i in (1, 3, 5)])
    return int((np.abs(img - rgb).max(axis=-1) <= 3).sum())


@pytest.fixture(scope="module")
def real_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of real runs: oracle, and noop twice (same label, two folders)."""
    root = tmp_path_factory.mktemp("runs")
    for agent, out in (("oracle", "oracle"), ("noop", "noop-a"), ("noop", "sweep/noop-b")):
        run(RunConfig(agent=agent, out=root / out, task_ids=TASKS))
    return root


def test_page_shows_runs_matrix_and_episode_links_in_chromium(real_runs: Path,
                                                             tmp_path: Path) -> None:
    out = tmp_path / "lb"
    proc = run_cli("leaderboard", "--results", str(real_runs), "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "label 'noop' is used by 2 runs" in proc.stdout  # said, not silently merged
    for name in ("index.html", "leaderboard.md", "resolve_rate.png", "reward.png", "steps.png"):
        assert (out / name).stat().st_size > 0, name
    page = parse(dump_dom(out / "index.html", tmp_path / "profile"))
    header, *body = page.tables["leaderboard"]
    assert header[:4] == ["agent", "episodes", "tasks", "resolve rate"]
    assert "pass@2" not in header  # one sample per task: one k (=1) for every run
    assert [r[0] for r in body] == ["oracle", "noop [noop-a]", "noop [noop-b]"]
    assert [r[3] for r in body] == ["100.0%", "0.0%", "0.0%"]
    assert {"tokens total", "tokens mean", "wall s mean", "wall s total"} <= set(header)
    tags_head, *tag_rows = page.tables["tags"]
    assert tags_head == ["tag", "tasks", "oracle", "noop [noop-a]", "noop [noop-b]"]
    assert ["off-by-one", "2", "100.0%", "0.0%", "0.0%"] in tag_rows  # both tasks have it
    assert page.tables["splits"][0] == ["agent", "train"]
    mhead, *mrows = page.tables["matrix"]
    assert mhead == ["task", "split", "oracle", "noop [noop-a]", "noop [noop-b]"]
    assert [r[0] for r in mrows] == TASKS
    links = page.links["matrix"][1:]
    for row in links:
        (oracle,), (noop_a,), (noop_b,) = row[2:]
        assert oracle[0] == "ep solved" and noop_a[0] == noop_b[0] == "ep failed"
        assert len({oracle[1], noop_a[1], noop_b[1]}) == 3
        for _, href in row[2][:1] + row[3][:1] + row[4][:1]:
            assert (out / href).is_file(), href
    episode = dump_dom(out / links[0][2][0][1], tmp_path / "profile2")
    assert "Step 3" in episode and "submit" in episode and "passed" in episode
    assert "diff --git" in episode and "← leaderboard" in episode
    img = _screenshot(out / "index.html", tmp_path / "shot.png", tmp_path / "profile3")
    assert _pixels(img, "#1a7f37") > 200 and _pixels(img, "#cf222e") > 400  # marks are drawn
    assert all(s.startswith("data:image/png;base64,") for s in page.images)
    html = (out / "index.html").read_text()
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)  # no external assets
    md = (out / "leaderboard.md").read_text()
    assert "| oracle | 2 | 2 | 100.0% |" in md and "## Tasks × runs" in md
    assert f"[✓]({links[0][2][0][1]})" in md


def test_one_pass_at_k_for_every_run(tmp_path: Path) -> None:
    dirs = [_write(tmp_path / "a", "alpha", [True, True, True, False]),
            _write(tmp_path / "b", "beta <b>", [False, False, True, False], split="test")]
    board = build(dirs, tmp_path / "lb")
    assert board.k == 2 and list(board.summaries) == ["alpha", "beta <b>"]  # best first
    # pass@2, alpha: t0 n=2,c=2 -> 1; t1 n=2,c=1 -> 1. beta: t0 c=1 -> 1; t1 c=0 -> 0.
    assert board.summaries["alpha"]["pass_at_k"][2] == 1.0
    assert board.summaries["beta <b>"]["pass_at_k"][2] == 0.5
    md = (tmp_path / "lb" / "leaderboard.md").read_text()
    assert "| pass@2 |" in md and "k = 2 for every agent" in md
    assert "| beta <b> | 4 | 2 | 25.0% | 0.250 | 25.0% | 50.0% |" in md
    html = (tmp_path / "lb" / "index.html").read_text()
    assert "beta &lt;b&gt;" in html and "beta <b>" not in html  # escaped
    dirs.append(_write(tmp_path / "c", "gamma", [False, False]))
    board = build(dirs, tmp_path / "lb2")
    assert board.k == 1 and all(list(s["pass_at_k"]) == [1] for s in board.summaries.values())
    assert json.loads((tmp_path / "lb2" / "summary.json").read_text())["k"] == 1


def test_committed_leaderboard_lists_the_reference_agents(tmp_path: Path) -> None:
    page = REPO / "leaderboard" / "index.html"
    tables = parse(dump_dom(page, tmp_path / "profile"))
    rows = tables.tables["leaderboard"][1:]
    assert set(REFERENCE_AGENTS) <= {row[0] for row in rows}, rows
    oracle = next(r for r in rows if r[0] == "oracle")
    assert oracle[3] == "100.0%"  # every built-in's gold patch resolves its task
    noop = next(r for r in rows if r[0] == "noop")
    assert noop[3] == "0.0%"
    hrefs = [h for row in tables.links["matrix"] for cell in row for _, h in cell]
    assert len(hrefs) >= 4 * len(tables.tables["matrix"][1:])
    assert all((REPO / "leaderboard" / h).is_file() for h in hrefs)  # every episode page


def test_no_results_is_explained(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="repogym run --out DIR"):
        build([tmp_path], tmp_path / "out")
    proc = run_cli("leaderboard", "--results", str(tmp_path / "missing"), "--out",
                   str(tmp_path / "o"))
    assert proc.returncode == 2 and "or a folder of them" in proc.stdout
