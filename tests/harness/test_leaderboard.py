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
from repogym.version import __version__

from .conftest import TASKS, run_cli
from .test_outage import SUBMIT, ChatStub

REPO = Path(__file__).resolve().parents[2]
REFERENCE_AGENTS = ["oracle", "noop", "random", "replay", "forger"]


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    pytest.skip(
        "headless Chromium is not installed: `make system-deps` installs it (apt install chromium)"
    )


def dump_dom(page: Path, profile: Path) -> str:
    """The DOM after Chromium loaded and rendered ``page`` (no network, fresh profile)."""
    proc = subprocess.run(
        [
            chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={profile}",
            "--dump-dom",
            page.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
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
            f.write(
                json.dumps(
                    {
                        "agent": agent,
                        "task": f"t{i % 2}",
                        "split": split,
                        "tags": ["x"],
                        "sample": i // 2,
                        "reward": float(ok),
                        "resolved": ok,
                        "steps": 3 + i,
                        "wall_s": 1.5,
                        "tokens": 10 * i,
                        "hack_flags": [],
                        "infra_error": None,
                        "agent_error": None,
                    }
                )
                + "\n"
            )
    return folder


def _screenshot(page: Path, png: Path, profile: Path) -> np.ndarray:
    proc = subprocess.run(
        [
            chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--disable-background-networking",
            "--no-first-run",
            f"--user-data-dir={profile}",
            f"--screenshot={png}",
            "--window-size=1280,4000",
            page.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0 and png.is_file(), proc.stderr[-2000:]
    return (plt.imread(png)[..., :3] * 255).round()


def _pixels(img: np.ndarray, css_hex: str) -> int:
    rgb = np.array([int(css_hex[i : i + 2], 16) for i in (1, 3, 5)])
    return int((np.abs(img - rgb).max(axis=-1) <= 3).sum())


@pytest.fixture(scope="module")
def real_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of real runs: oracle, noop twice (same label, two folders), and the openai
    agent against a chat-completions stub on 127.0.0.1 (it submits at once)."""
    root = tmp_path_factory.mktemp("runs")
    for agent, out in (("oracle", "oracle"), ("noop", "noop-a"), ("noop", "sweep/noop-b")):
        run(RunConfig(agent=agent, out=root / out, task_ids=TASKS))
    stub = ChatStub(lambda n, body: (200, SUBMIT)).start()
    try:
        run(
            RunConfig(
                agent="openai",
                out=root / "llm",
                task_ids=TASKS,
                agent_args={
                    "base_url": stub.url,
                    "model": "org/stub-7b",
                    "temperature": 0.3,
                    "backoff_s": 0.01,
                },
            )
        )
    finally:
        stub.kill()
    return root


def test_page_shows_runs_matrix_and_episode_links_in_chromium(
    real_runs: Path, tmp_path: Path
) -> None:
    out = tmp_path / "lb"
    proc = run_cli("leaderboard", "--results", str(real_runs), "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "label 'noop' is used by 2 runs" in proc.stdout  # said, not silently merged
    assert "openai-stub-7b-temperature=0.3" in proc.stdout  # the model and settings, no URL
    for name in ("index.html", "leaderboard.md", "resolve_rate.png", "reward.png", "steps.png"):
        assert (out / name).stat().st_size > 0, name
    page = parse(dump_dom(out / "index.html", tmp_path / "profile"))
    header, *body = page.tables["leaderboard"]
    assert header[:4] == ["agent", "episodes", "tasks", "resolve rate"]
    assert "pass@2" not in header  # one sample per task: one k (=1) for every run
    llm = "openai-stub-7b-temperature=0.3"
    names = ["oracle", "noop [noop-a]", "noop [noop-b]", llm]
    assert [r[0] for r in body] == names
    assert [r[3] for r in body] == ["100.0%", "0.0%", "0.0%", "0.0%"]
    # 95% Wilson intervals over 2 tasks: 2/2 -> [34.2, 100], 0/2 -> [0, 65.8]
    assert header[4] == "95% CI" and [r[4] for r in body] == ["[34.2, 100.0]"] + ["[0.0, 65.8]"] * 3
    assert {
        "tokens total",
        "tokens mean",
        "wall s mean",
        "wall s total",
        "agent errors",
        "endpoint errors",
        "infra errors",
    } <= set(header)
    runs_head, *runs = page.tables["runs"]
    info = {r[0]: dict(zip(runs_head, r, strict=False)) for r in runs}
    assert runs_head == [
        "run",
        "agent",
        "model",
        "endpoint",
        "sampling",
        "agent options",
        "tasks",
        "started (UTC)",
        "repogym",
    ]
    port = llm_port(real_runs)
    assert (
        info[llm]["model"] == "org/stub-7b" and info[llm]["endpoint"] == f"http://127.0.0.1:{port}"
    )  # the host only: no path
    assert "/v1" not in info[llm]["agent options"]
    assert info[llm]["sampling"] == "temperature=0.3, max_tokens=1024"
    assert "backoff_s=0.01" in info[llm]["agent options"]
    assert info[llm]["tasks"] == "suite builtin, 2 chosen ids, 2 tasks x 1 sample(s), seed 0"
    assert re.fullmatch(r"20\d\d-\d\d-\d\d \d\d:\d\d:\d\dZ", info[llm]["started (UTC)"])
    assert re.fullmatch(
        rf"{re.escape(__version__)} (@ [0-9a-f]{{12}}.*|\(git commit not "
        r"recorded\))",
        info[llm]["repogym"],
    )  # no commit outside a checkout
    assert info["oracle"]["model"] == info["oracle"]["endpoint"] == "n/a"
    paired_head, *paired = page.tables["paired"]
    assert paired_head[:5] == [
        "run",
        "compared with",
        "common tasks",
        "only it resolved",
        "only the other resolved",
    ]
    # noop against oracle on 2 tasks: oracle alone resolved both; exact p = 2 * 1/4
    assert ["noop [noop-a]", "oracle", "2", "0", "2", "0.5"] in paired
    tags_head, *tag_rows = page.tables["tags"]
    assert tags_head == ["tag", "tasks", *names]
    assert ["off-by-one", "2", "100.0%", "0.0%", "0.0%", "0.0%"] in tag_rows  # both tasks
    assert page.tables["splits"][0] == ["agent", "train"]
    mhead, *mrows = page.tables["matrix"]
    assert mhead == ["task", "split", *names]
    assert [r[0] for r in mrows] == TASKS
    links = page.links["matrix"][1:]
    for row in links:
        (oracle,), (noop_a,), (noop_b,), _ = row[2:]
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
    assert "| oracle | 2 | 2 | 100.0% | [34.2, 100.0] |" in md and "## Tasks × runs" in md
    assert f"[✓]({links[0][2][0][1]})" in md and "## Runs" in md
    summary = json.loads((out / "summary.json").read_text())
    assert "Wilson" in summary["interval"]
    assert summary["runs"]["oracle"]["resolve_ci"] == pytest.approx([0.3424, 1.0], abs=1e-4)
    noop_vs_oracle = next(c for c in summary["paired_with_top"] if c["run"] == "noop [noop-a]")
    assert (noop_vs_oracle["a_better"], noop_vs_oracle["b_better"]) == (0, 2)
    assert noop_vs_oracle["p_value"] == 0.5 and noop_vs_oracle["b_only"] == TASKS
    meta = summary["runs"][llm]["run"]
    assert meta["model"] == "org/stub-7b" and meta["sampling"]["temperature"] == 0.3
    assert meta["repogym_version"] == __version__ and meta["started_at"]


def llm_port(root: Path) -> int:
    """The port the stub of the ``llm`` run listened on (from its run.json)."""
    meta = json.loads((root / "llm" / "run.json").read_text())
    assert meta["agent_args"]["base_url"].count("/") == 2  # recorded without its path
    return int(meta["agent_args"]["base_url"].rsplit(":", 1)[1])


def test_errors_are_marked_apart_from_failures_in_chromium(tmp_path: Path) -> None:
    folder = tmp_path / "r"
    folder.mkdir()
    base = {
        "agent": "m",
        "split": "train",
        "tags": ["x"],
        "reward": 0.0,
        "resolved": False,
        "steps": 1,
        "wall_s": 1.0,
        "tokens": 0,
        "hack_flags": [],
        "infra_error": None,
    }
    kinds = {
        "t0": {},
        "t1": {"agent_error": "RuntimeError in act: boom"},
        "t2": {"endpoint_error": "EndpointError in act: Connection refused"},
        "t3": {"infra_error": "reset: sandbox died"},
        "t4": {"resolved": True},
    }
    with (folder / "results.jsonl").open("w") as f:
        for task, extra in kinds.items():
            f.write(json.dumps({**base, "task": task, "sample": 0, **extra}) + "\n")
    out = tmp_path / "lb"
    board = build([folder], out)
    s = board.summaries["m"]
    assert (
        s["scored"],
        s["resolved"],
        s["agent_errors"],
        s["endpoint_errors"],
        s["infra_errors"],
    ) == (3, 1, 1, 1, 1)
    page = parse(dump_dom(out / "index.html", tmp_path / "profile"))
    marks = {
        row[0]: cell
        for row, cells in zip(page.tables["matrix"][1:], page.links["matrix"][1:], strict=False)
        for cell in cells[2:]
    }
    assert {t: c[0][0] for t, c in marks.items()} == {
        "t0": "ep failed",
        "t1": "ep agent_error",
        "t2": "ep endpoint",
        "t3": "ep infra",
        "t4": "ep solved",
    }
    dom = dump_dom(out / "index.html", tmp_path / "profile2")
    assert "agent error: the agent raised or timed out" in dom  # the legend says which is which
    assert "model endpoint error" in dom
    img = _screenshot(out / "index.html", tmp_path / "shot.png", tmp_path / "profile3")
    for colour in ("#cf222e", "#8250df", "#0969da", "#6e7781", "#1a7f37"):
        assert _pixels(img, colour) > 100, colour  # each status has its own colour
    md = (out / "leaderboard.md").read_text()
    assert "| m | 5 | 5 | 33.3% | [6.1, 79.2] |" in md  # 1 of 3 scored tasks


def test_one_pass_at_k_for_every_run(tmp_path: Path) -> None:
    dirs = [
        _write(tmp_path / "a", "alpha", [True, True, True, False]),
        _write(tmp_path / "b", "beta <b>", [False, False, True, False], split="test"),
    ]
    board = build(dirs, tmp_path / "lb")
    assert board.k == 2 and list(board.summaries) == ["alpha", "beta <b>"]  # best first
    # pass@2, alpha: t0 n=2,c=2 -> 1; t1 n=2,c=1 -> 1. beta: t0 c=1 -> 1; t1 c=0 -> 0.
    assert board.summaries["alpha"]["pass_at_k"][2] == 1.0
    assert board.summaries["beta <b>"]["pass_at_k"][2] == 0.5
    md = (tmp_path / "lb" / "leaderboard.md").read_text()
    assert "| pass@2 |" in md and "k = 2 for every agent" in md
    assert "| beta <b> | 4 | 2 | 25.0% | [2.7, 80.2] | 0.250 | 25.0% | 50.0% |" in md
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
    assert oracle[4] == "[89.0, 100.0]" and noop[4] == "[0.0, 11.0]"  # Wilson, 31 tasks
    runs_head, *runs = tables.tables["runs"]
    info = {r[0]: dict(zip(runs_head, r, strict=False)) for r in runs}
    # recorded before runs kept their provenance: said, not invented
    assert info["oracle"]["started (UTC)"] == info["oracle"]["repogym"] == "not recorded"
    assert info["random"]["agent options"] == "as given: seed=0 (defaults not recorded)"
    assert info["oracle"]["tasks"] == "suite builtin, 31 tasks x 1 sample(s), seed 0"
    hrefs = [h for row in tables.links["matrix"] for cell in row for _, h in cell]
    assert len(hrefs) >= 4 * len(tables.tables["matrix"][1:])
    assert all((REPO / "leaderboard" / h).is_file() for h in hrefs)  # every episode page


def test_no_results_is_explained(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="repogym run --out DIR"):
        build([tmp_path], tmp_path / "out")
    proc = run_cli(
        "leaderboard", "--results", str(tmp_path / "missing"), "--out", str(tmp_path / "o")
    )
    assert proc.returncode == 2 and "or a folder of them" in proc.stdout
