"""Building the leaderboard: a static HTML page, Markdown, PNG plots and episode pages.

Input: run folders (``repogym run --out DIR``) or folders of them. Each run is one row of the
board, named by its label; two runs with the same label (two runs of one agent with the same
settings) are both kept, told apart by their folder, and a note says so.

The page needs no server and no external asset (inline CSS, plots as base64 PNGs, no
scripts). It holds: the per-run table (one pass@k for everyone, k stated), costs (tokens,
episode wall time mean and total), resolve rate per split, per suite (each run's
``--suite``), per package (tasks of a shipped suite such as RealPy are tagged
``<suite>, <package>``) and per tag, and a task × run matrix whose every mark (one per sample:
solved, failed, agent error, hacked, endpoint error, infra error) links to that episode's
trajectory rendered as HTML under ``OUT/episodes/``.

Each resolve rate comes with its 95 % Wilson interval over tasks
(:func:`~repogym.harness.metrics.wilson_interval`), and a table says what each run was: the
model, the endpoint's host, the sampling settings, the agent's options, the task set, when it
started and with which repogym (version and git commit), from ``run.json``'s provenance
(:mod:`repogym.harness.provenance`); runs recorded before repogym kept it say "not recorded".
"""

from __future__ import annotations

import base64
import dataclasses
import html
import json
import os
import re
import shutil
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from repogym.envs.wrappers import read_trajectory
from repogym.harness.baselines import AgentError, agent_options, resolve_agent_class
from repogym.harness.metrics import (
    common_k,
    jsonable,
    paired_comparison,
    summarize,
    summarize_groups,
)
from repogym.harness.provenance import endpoint_of, public_args
from repogym.harness.results import (
    STATUSES,
    ResultRow,
    episode_status,
    find_run_dirs,
    read_results,
    read_run_meta,
    unscored,
)
from repogym.scenarios.registry import registered_tasks
from repogym.scenarios.suites import suite_names

EPISODES = "episodes"
STATUS_MARK = {
    "solved": "✓",
    "failed": "✗",
    "agent_error": "!",
    "hacked": "⚑",
    "endpoint": "⊘",
    "infra": "⚠",
}
STATUS_HELP = STATUSES
NOT_RECORDED = "not recorded"
#: What ``resolve_ci`` in summary.json is.
INTERVAL = (
    "resolve_ci: 95% Wilson score interval of resolve_rate with the scored tasks as "
    "trials (n = scored_tasks); run fields that are null were not recorded by the run"
)
CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;
max-width:1200px;color:#1b1f24;padding:0 1rem}
h1{font-size:1.6rem;margin-bottom:.2rem}.sub{color:#57606a;margin-top:0}
table{border-collapse:collapse;margin:1rem 0 2rem;font-size:.9rem}
th,td{border-bottom:1px solid #d0d7de;padding:.4rem .55rem;text-align:right}
th:first-child,td:first-child{text-align:left;overflow-wrap:break-word;max-width:40rem}th{background:#f6f8fa}
tr:hover td{background:#f6f8fa}.plots{display:flex;flex-wrap:wrap;gap:1rem}
.plots figure{margin:0;flex:1 1 320px}.plots img{width:100%;border:1px solid #d0d7de}
figcaption{color:#57606a;font-size:.85rem}
#matrix td{text-align:center}#matrix td:first-child{text-align:left}
a.ep{display:inline-block;min-width:1.5em;margin:1px;padding:.1em .25em;border-radius:4px;
color:#fff;text-decoration:none;font-weight:600}
.solved{background:#1a7f37}.failed{background:#cf222e}.hacked{background:#9a6700}
.infra{background:#6e7781}.agent_error{background:#8250df}.endpoint{background:#0969da}
#runs td{text-align:left;max-width:22rem}#runs td:nth-child(6){overflow-wrap:anywhere}
#leaderboard td:nth-child(5){white-space:nowrap}
pre{white-space:pre-wrap;overflow-wrap:anywhere;background:#f6f8fa;
padding:.6rem;border:1px solid #d0d7de;font-size:.82rem}
"""


@dataclasses.dataclass
class Entry:
    """One row of the board: one run's label, folder and rows."""

    name: str
    label: str
    run_dir: Path
    rows: list[ResultRow]


@dataclasses.dataclass
class Board:
    """What :func:`build` computed.

    Attributes:
        summaries: Entry name -> :func:`~repogym.harness.metrics.summarize` output.
        k: The pass@k budget used for every entry (0 when some entry has no scored episode).
        notes: Warnings for the reader (e.g. labels disambiguated by folder).
        entries: The entries, in table order (best resolve rate first).
        infos: Entry name -> :func:`run_info` (what the run was).
    """

    summaries: dict[str, dict[str, Any]]
    k: int
    notes: list[str]
    entries: list[Entry]
    infos: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)


def load_entries(paths: list[str | Path]) -> tuple[list[Entry], list[str]]:
    """Entries of every run under ``paths``; labels that repeat get their folder appended.

    Raises:
        FileNotFoundError: a path holds no run.
        ValueError: no rows at all.
    """
    runs = [(d, read_results(d)) for d in find_run_dirs(paths)]
    by_label: dict[str, list[tuple[Path, list[dict]]]] = defaultdict(list)
    for d, rows in runs:
        groups: dict[str, list[dict]] = defaultdict(list)
        for r in rows:
            groups[str(r.get("agent"))].append(r)
        for label, rs in groups.items():
            by_label[label].append((d, rs))
    entries, notes = [], []
    for label, items in sorted(by_label.items()):
        if len(items) == 1:
            entries.append(Entry(label, label, items[0][0], items[0][1]))
            continue
        tags = _folder_tags([d for d, _ in items])
        notes.append(
            f"label {label!r} is used by {len(items)} runs "
            f"({', '.join(str(d) for d, _ in items)}); shown as separate rows named by "
            "folder. Give runs distinct --name labels to avoid this"
        )
        entries += [
            Entry(f"{label} [{tag}]", label, d, rs)
            for (d, rs), tag in zip(items, tags, strict=True)
        ]
    if not any(e.rows for e in entries):
        raise ValueError(
            f"no result rows in {[str(p) for p in paths]}. Fix: run `repogym run --out DIR` first"
        )
    return entries, notes


def _folder_tags(dirs: list[Path]) -> list[str]:
    """The shortest trailing path parts that tell ``dirs`` apart."""
    for n in range(1, max(len(d.parts) for d in dirs) + 1):
        tags = ["/".join(d.parts[-n:]) for d in dirs]
        if len(set(tags)) == len(tags):
            return tags
    return [str(d) for d in dirs]


# -- statuses and breakdowns ----------------------------------------------------------------------
def status(row: ResultRow) -> str:
    """An episode's matrix status (:func:`~repogym.harness.results.episode_status`)."""
    return episode_status(row)


def _task_tags(row: ResultRow) -> list[str]:
    tags = row.get("tags")
    if tags is None:  # rows written before tags were recorded: ask the catalogue
        task = registered_tasks().get(str(row.get("task")))
        tags = list(task.tags) if task else []
    return list(tags) or ["(untagged)"]


def package_of(row: ResultRow) -> str | None:
    """The package of a shipped suite's task (its tags are ``<suite>, <package>``), or None."""
    tags = _task_tags(row)
    shipped = set(suite_names())
    return next((tags[i + 1] for i, t in enumerate(tags[:-1]) if t in shipped), None)


def suite_of(entry: Entry) -> str:
    """The suite a run ran (``run.json``'s ``suite``: a name, or a folder shown by its name)."""
    suite = str(read_run_meta(entry.run_dir).get("suite") or "builtin")
    return suite if suite in ("builtin", *suite_names()) else Path(suite).name


def _groups(row: ResultRow, key: str, entry: Entry) -> list[str]:
    if key == "tags":
        return _task_tags(row)
    if key == "package":
        return [p] if (p := package_of(row)) else []
    if key == "suite":
        return [suite_of(entry)]
    return [str(row.get("split"))]


def breakdown(entries: list[Entry], key: str) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """Resolve rate per entry and split (``key="split"``), tag (``"tags"``), suite
    (``"suite"``) or package of a shipped suite (``"package"``).

    Returns:
        The column names, and entry name -> column -> rate (None where no scored episode).
    """
    table: dict[str, dict[str, Any]] = {}
    cols: set[str] = set()
    for e in entries:
        groups: dict[str, list[dict]] = defaultdict(list)
        for r in e.rows:
            for v in _groups(r, key, e):
                groups[v].append(r)
        cols |= set(groups)
        table[e.name] = {v: summarize(rs, [])["resolve_rate"] for v, rs in groups.items()}
    return sorted(cols), table


def _fmt(value: Any, kind: str) -> str:
    if value is None:
        return "-"
    return {
        "pct": f"{100 * value:.1f}%",
        "f3": f"{value:.3f}",
        "f1": f"{value:.1f}",
        "int": f"{value:.0f}",
    }.get(kind, str(value))


def ci_text(ci: list[float] | None) -> str:
    """A 95 % interval as ``[44.2, 65.0]`` (percent), ``-`` when there is none."""
    return "-" if not ci else f"[{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"


def columns(k: int) -> list[str]:
    """The per-run table's header (pass@k only when k > 1)."""
    passk = [f"pass@{k}"] if k > 1 else []
    return [
        "agent",
        "episodes",
        "tasks",
        "resolve rate",
        "95% CI",
        "mean reward",
        "pass@1",
        *passk,
        "mean steps",
        "tokens total",
        "tokens mean",
        "wall s mean",
        "wall s total",
        "hack flags",
        "agent errors",
        "endpoint errors",
        "infra errors",
    ]


def table_rows(board: Board) -> list[list[str]]:
    """One list of cell strings per entry, in :func:`columns` order."""
    out = []
    for e in board.entries:
        s = board.summaries[e.name]
        pk = [_fmt(s["pass_at_k"].get(board.k), "pct")] if board.k > 1 else []
        out.append(
            [
                e.name,
                str(s["episodes"]),
                str(s["tasks"]),
                _fmt(s["resolve_rate"], "pct"),
                ci_text(s.get("resolve_ci")),
                _fmt(s["mean_reward"], "f3"),
                _fmt(s["pass_at_k"].get(1), "pct"),
                *pk,
                _fmt(s["mean_steps"], "f1"),
                str(s["tokens"]),
                _fmt(s["mean_tokens"], "int"),
                _fmt(s["mean_wall_s"], "f1"),
                _fmt(s["wall_s"], "f1"),
                str(s["hack_flagged"]),
                str(s["agent_errors"]),
                str(s.get("endpoint_errors", 0)),
                str(s["infra_errors"]),
            ]
        )
    return out


def footnote(k: int) -> str:
    """How the numbers are defined (shown under the tables)."""
    kdef = (
        f"pass@{k} uses k = {k} for every agent (the fewest samples any agent has of any task)"
        if k > 1
        else "some agent has a single sample of some task, so only pass@1 is shown"
    )
    return (
        "Resolve rate, mean reward and pass@k exclude infra-error and endpoint-error "
        "episodes (the sandbox, grader or model server failed: not scored); agent errors "
        "count as failures. 95% CI: the Wilson score interval of the resolve rate with "
        "the scored tasks as trials (with several samples per task, the samples of a task "
        "are not independent, so tasks, not episodes, are counted). pass@k is the "
        f"unbiased estimator of Chen et al. (2021), averaged over tasks; {kdef}. Tokens "
        "are prompt + completion tokens; wall time is per episode, from reset to the "
        "graded last step. `repogym compare A B` compares two runs task by task."
    )


# -- what each run was ----------------------------------------------------------------------------
def run_info(entry: Entry) -> dict[str, Any]:
    """What ``run.json`` says about a run, for the page and ``summary.json``.

    From the provenance of runs that recorded it; for older runs only what their
    ``run.json`` held (the options as given, the task selection), everything else None
    (shown as "not recorded"). ``model``/``endpoint`` are ``"n/a"`` for agents without such
    an option.
    """
    meta = read_run_meta(entry.run_dir)
    prov = meta.get("provenance") or {}
    agent = str(meta.get("agent") or "")
    given = public_args(meta.get("agent_args") or {})
    known = _option_names(agent)

    def option(key: str, value: Any) -> Any:
        if value is not None:
            return value
        return "n/a" if known is not None and key not in known else None

    tasks = prov.get("tasks")
    if tasks is None and meta:
        tasks = {
            k: meta.get(k)
            for k in (
                "suite",
                "split",
                "tags",
                "task_ids",
                "samples",
                "seed",
                "reward_mode",
                "max_steps",
            )
        }
        tasks["count"] = len({r.get("task") for r in entry.rows})
    return {
        "agent": agent or None,
        "model": option("model", prov.get("model", given.get("model"))),
        "endpoint": option(
            "base_url", prov.get("endpoint") if prov else endpoint_of(given.get("base_url"))
        ),
        "sampling": prov.get("sampling"),
        "agent_options": prov.get("agent_options"),
        "agent_options_given": given if meta else None,
        "tasks": tasks,
        "started_at": prov.get("started_at"),
        "updated_at": prov.get("updated_at"),
        "repogym_version": prov.get("repogym_version"),
        "repogym_commit": prov.get("repogym_commit"),
        "repogym_dirty": prov.get("repogym_dirty"),
        "provenance_recorded": bool(prov),
    }


def _option_names(agent: str) -> set[str] | None:
    """The options ``agent`` takes; None when it is not recorded or cannot be loaded here."""
    try:
        return {o.name for o in agent_options(resolve_agent_class(agent))} if agent else None
    except AgentError:
        return None


def _kv(d: dict[str, Any]) -> str:
    return (
        ", ".join(f"{k}={json.dumps(v) if not isinstance(v, str) else v}" for k, v in d.items())
        or "(none)"
    )


def _tasks_text(t: dict[str, Any] | None) -> str:
    if not t:
        return NOT_RECORDED
    sel = [f"suite {t.get('suite')}"]
    sel += [f"split {t['split']}"] if t.get("split") else []
    sel += [f"tags {','.join(t['tags'])}"] if t.get("tags") else []
    sel += [f"{len(t['task_ids'])} chosen ids"] if t.get("task_ids") else []
    sel.append(f"{t.get('count')} tasks x {t.get('samples')} sample(s), seed {t.get('seed')}")
    if t.get("reward_mode") not in (None, "binary"):
        sel.append(f"reward {t['reward_mode']}")
    if t.get("max_steps"):
        sel.append(f"max {t['max_steps']} steps")
    return ", ".join(sel)


def info_cells(info: dict[str, Any]) -> list[str]:
    """The cells of one run in the runs table (:data:`INFO_COLUMNS`)."""

    def text(v: Any) -> str:
        return NOT_RECORDED if v is None else str(v)

    if info["agent_options"] is not None:
        options = _kv(info["agent_options"])
    elif info["agent_options_given"] is not None:
        options = f"as given: {_kv(info['agent_options_given'])} (defaults {NOT_RECORDED})"
    else:
        options = NOT_RECORDED
    sampling = NOT_RECORDED if info["sampling"] is None else _kv(info["sampling"])
    if info["repogym_version"] is None:
        version = NOT_RECORDED
    else:
        commit = info["repogym_commit"]
        version = (
            f"{info['repogym_version']} @ {commit[:12]}"
            + (" +uncommitted changes" if info["repogym_dirty"] else "")
            if commit
            else f"{info['repogym_version']} (git commit {NOT_RECORDED})"
        )
    started = info["started_at"]
    return [
        text(info["agent"]),
        text(info["model"]),
        text(info["endpoint"]),
        sampling,
        options,
        _tasks_text(info["tasks"]),
        NOT_RECORDED if started is None else started.replace("T", " "),
        version,
    ]


#: The header of the paired comparisons with the top run.
PAIRED_COLUMNS = [
    "run",
    "compared with",
    "common tasks",
    "only it resolved",
    "only the other resolved",
    "p (exact sign test)",
]


def paired_with_top(board: Board) -> list[dict[str, Any]]:
    """Each run after the first compared with the top run on their common tasks
    (:func:`~repogym.harness.metrics.paired_comparison`, the run as A, the top run as B)."""
    if len(board.entries) < 2:
        return []
    top, *rest = board.entries
    return [{"run": e.name, "with": top.name, **paired_comparison(e.rows, top.rows)} for e in rest]


def paired_rows(board: Board) -> list[list[str]]:
    """:func:`paired_with_top` as cells of :data:`PAIRED_COLUMNS`."""
    return [
        [
            c["run"],
            c["with"],
            str(c["common_tasks"]),
            str(c["a_better"]),
            str(c["b_better"]),
            f"{c['p_value']:.3g}",
        ]
        for c in paired_with_top(board)
    ]


#: The header of the runs table (after the run's name).
INFO_COLUMNS = [
    "agent",
    "model",
    "endpoint",
    "sampling",
    "agent options",
    "tasks",
    "started (UTC)",
    "repogym",
]


# -- episode pages --------------------------------------------------------------------------------
def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "run"


def _clip(text: str, n: int = 20_000) -> str:
    return text if len(text) <= n else text[:n] + f"\n... [{len(text) - n} more characters]"


def episode_html(row: ResultRow, traj_path: Path | None, back: str, raw: str | None) -> str:
    """One episode as a self-contained HTML page (header, every step, tests, diff)."""
    esc = html.escape
    parts = [
        f'<p><a href="{esc(back)}">← leaderboard</a>'
        + (f' · <a href="{esc(raw)}">raw JSONL</a>' if raw else "")
        + "</p>",
        (
            f"<h1>{esc(str(row.get('agent')))} · {esc(str(row.get('task')))} · sample "
            f"{esc(str(row.get('sample')))}</h1>"
        ),
        f'<p class="sub">status <b>{status(row)}</b> · reward {row.get("reward")} · '
        f"steps {row.get('steps')} · wall {row.get('wall_s')} s · tokens {row.get('tokens')}"
        + "".join(
            f" · {k} {esc(str(row[k]))}"
            for k in ("agent_error", "infra_error", "stop_reason", "truncated")
            if row.get(k)
        )
        + "</p>",
    ]
    try:
        traj = read_trajectory(traj_path) if traj_path else None
    except (OSError, ValueError) as e:
        traj, note = None, f"the trajectory could not be read: {e}"
    else:
        note = "no trajectory was recorded for this episode"
    if traj is None:
        parts.append(f"<p>{esc(note)}</p>")
        return _page(f"{row.get('agent')} · {row.get('task')}", "".join(parts))
    h = traj["header"]
    parts.append(
        f'<p class="sub">{esc(str(h.get("env_id")))} · sandbox '
        f"{esc(str(h.get('sandbox')))} · seed {esc(str(h.get('seed')))} · started "
        f"{esc(str(h.get('started_at')))}</p><h2>Observation 0</h2>"
        f"<pre>{esc(_clip(str(h.get('observation', ''))))}</pre>"
    )
    for s in traj["steps"]:
        parts.append(
            f'<h2 id="t{s["t"]}">Step {s["t"]} · {esc(str(s.get("tool")))} · exit '
            f"{esc(str(s.get('exit_code')))} · {s.get('duration_s', 0):.2f} s</h2>"
            f"<h3>action</h3><pre>{esc(_clip(str(s.get('action', ''))))}</pre>"
            f"<h3>observation</h3><pre>{esc(_clip(str(s.get('observation', ''))))}</pre>"
        )
    parts.append(_summary_html(traj["summary"]))
    return _page(f"{row.get('agent')} · {row.get('task')}", "".join(parts))


def _summary_html(summary: dict[str, Any] | None) -> str:
    esc = html.escape
    if summary is None:
        return "<h2>No summary</h2><p>The episode did not finish.</p>"
    tests = "".join(
        f"<tr><td>{esc(t)}</td><td>{esc(str(o))}</td></tr>"
        for t, o in (summary.get("tests") or {}).items()
    )
    return (
        f"<h2>Result</h2><p>reward {summary.get('reward')} · resolved "
        f"{summary.get('resolved')} · hack flags {esc(str(summary.get('hack_flags')))}</p>"
        f"<table><thead><tr><th>hidden test</th><th>outcome</th></tr></thead>"
        f"<tbody>{tests}</tbody></table><h2>Diff</h2>"
        f"<pre>{esc(_clip(str(summary.get('diff') or '(no change)')))}</pre>"
    )


def _page(title: str, body: str) -> str:
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>{body}"
        f"</body></html>\n"
    )


def write_episode_pages(entries: list[Entry], out: Path) -> dict[int, str]:
    """Render every episode under ``out/episodes/<run>/``; ``id(row)`` -> page link."""
    links: dict[int, str] = {}
    shutil.rmtree(out / EPISODES, ignore_errors=True)  # pages of runs no longer on the board
    for e in entries:
        folder = out / EPISODES / _slug(e.name)
        folder.mkdir(parents=True, exist_ok=True)
        for r in e.rows:
            traj = e.run_dir / r["trajectory"] if r.get("trajectory") else None
            stem = Path(r["trajectory"]).stem if traj else f"{r.get('task')}-{r.get('sample')}"
            page = folder / f"{_slug(stem)}.html"
            raw = os.path.relpath(traj, folder) if traj and traj.is_file() else None
            back = os.path.relpath(out / "index.html", folder)
            page.write_text(episode_html(r, traj if raw else None, back, raw))
            links[id(r)] = page.relative_to(out).as_posix()
    return links


# -- the page -------------------------------------------------------------------------------------
def matrix(entries: list[Entry]) -> tuple[list[tuple[str, str]], dict[tuple[str, str], list]]:
    """Tasks (id, split) sorted by split then id, and (task, entry name) -> rows by sample."""
    tasks: dict[str, str] = {}
    cells: dict[tuple[str, str], list] = defaultdict(list)
    for e in entries:
        for r in sorted(e.rows, key=lambda r: r.get("sample") or 0):
            tasks[str(r.get("task"))] = str(r.get("split"))
            cells[(str(r.get("task")), e.name)].append(r)
    return sorted(tasks.items(), key=lambda t: (t[1], t[0])), cells


def _html_table(table_id: str, head: list[str], rows: list[list[str]]) -> str:
    esc = html.escape
    return (
        f'<table id="{table_id}"><thead><tr>'
        + "".join(f"<th>{esc(c)}</th>" for c in head)
        + "</tr></thead><tbody>"
        + "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>" for r in rows)
        + "</tbody></table>"
    )


def _breakdown_rows(entries: list[Entry], cols: list[str], table: dict) -> list[list[str]]:
    return [[e.name, *(_fmt(table[e.name].get(c), "pct") for c in cols)] for e in entries]


def _tag_rows(
    entries: list[Entry], cols: list[str], table: dict, key: str = "tags"
) -> list[list[str]]:
    """One row per tag or package (with its number of tasks), one column per entry."""
    n_tasks = {
        c: len({r["task"] for e in entries for r in e.rows if c in _groups(r, key, e)})
        for c in cols
    }
    return [
        [c, str(n_tasks[c]), *(_fmt(table[e.name].get(c), "pct") for e in entries)] for c in cols
    ]


def _suite_html(entries: list[Entry]) -> str:
    """Resolve rate per suite, and per package of the shipped suites when there are any."""
    cols, table = breakdown(entries, "suite")
    out = "<h2>Resolve rate by suite</h2>" + _html_table(
        "suites", ["agent", *cols], _breakdown_rows(entries, cols, table)
    )
    cols, table = breakdown(entries, "package")
    if cols:
        out += "<h2>Resolve rate by package</h2>" + _html_table(
            "packages",
            ["package", "tasks", *(e.name for e in entries)],
            _tag_rows(entries, cols, table, "package"),
        )
    return out


def _matrix_html(entries: list[Entry], links: dict[int, str]) -> str:
    esc = html.escape
    tasks, cells = matrix(entries)
    head = "<th>task</th><th>split</th>" + "".join(f"<th>{esc(e.name)}</th>" for e in entries)
    body = []
    for task, split in tasks:
        tds = []
        for e in entries:
            marks = "".join(
                f'<a class="ep {status(r)}" href="{esc(links[id(r)])}" '
                f'title="sample {r.get("sample")}: {STATUS_HELP[status(r)]}">'
                f"{STATUS_MARK[status(r)]}</a>"
                for r in cells.get((task, e.name), [])
            )
            tds.append(f"<td>{marks or '·'}</td>")
        body.append(f"<tr><td>{esc(task)}</td><td>{esc(split)}</td>{''.join(tds)}</tr>")
    legend = " ".join(f'<a class="ep {s}">{m}</a> {STATUS_HELP[s]}' for s, m in STATUS_MARK.items())
    return (
        f'<h2>Tasks × runs</h2><p class="sub">One mark per sample; each links to the '
        f'episode. {legend}</p><table id="matrix"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>"
    )


def html_page(
    board: Board, images: dict[str, Path], links: dict[int, str], sources: list[str]
) -> str:
    """The leaderboard page: inline CSS, base64 PNGs, no scripts."""
    esc = html.escape
    split_cols, splits = breakdown(board.entries, "split")
    tag_cols, tags = breakdown(board.entries, "tags")
    figs = "".join(
        f'<figure><img alt="{esc(name)}" src="data:image/png;base64,'
        f'{base64.b64encode(path.read_bytes()).decode()}"><figcaption>{esc(name)}</figcaption>'
        f"</figure>"
        for name, path in images.items()
    )
    notes = "".join(f'<p class="sub"><b>note:</b> {esc(n)}</p>' for n in board.notes)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    body = (
        f'<h1>repogym leaderboard</h1><p class="sub">{len(board.entries)} runs, built '
        f"{stamp} from {esc(', '.join(sources))}</p>{notes}"
        + _html_table("leaderboard", columns(board.k), table_rows(board))
        + f'<p class="sub">{esc(footnote(board.k))}</p><h2>Runs</h2>'
        + _html_table("runs", ["run", *INFO_COLUMNS], _info_rows(board))
        + _paired_html(board)
        + "<h2>Resolve rate by split</h2>"
        + _html_table(
            "splits", ["agent", *split_cols], _breakdown_rows(board.entries, split_cols, splits)
        )
        + _suite_html(board.entries)
        + _matrix_html(board.entries, links)
        + "<h2>Resolve rate by tag</h2>"
        + _html_table(
            "tags",
            ["tag", "tasks", *(e.name for e in board.entries)],
            _tag_rows(board.entries, tag_cols, tags),
        )
        + f'<div class="plots">{figs}</div>'
    )
    return _page("repogym leaderboard", body)


def _paired_html(board: Board) -> str:
    rows = paired_rows(board)
    if not rows:
        return ""
    return (
        '<h2>Paired comparison with the top run</h2><p class="sub">On the tasks both '
        "scored: tasks only one of the two resolved (with several samples: where its "
        "fraction of resolved samples is higher), and the two-sided p-value of the exact "
        "sign test on them (McNemar's exact test with one sample per task).</p>"
        + _html_table("paired", PAIRED_COLUMNS, rows)
    )


def _info_rows(board: Board) -> list[list[str]]:
    return [[e.name, *info_cells(board.infos.get(e.name) or run_info(e))] for e in board.entries]


def markdown(board: Board, links: dict[int, str]) -> str:
    """The leaderboard as Markdown: the run table, breakdowns, and the matrix with links."""

    def md_table(head: list[str], rows: list[list[str]]) -> list[str]:
        return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + [
            "| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows
        ]

    lines = ["# repogym leaderboard", ""] + md_table(columns(board.k), table_rows(board))
    lines += ["", footnote(board.k), ""] + [f"Note: {n}" for n in board.notes]
    lines += ["", "## Runs", ""] + md_table(["run", *INFO_COLUMNS], _info_rows(board))
    if paired := paired_rows(board):
        lines += [
            "",
            "## Paired comparison with the top run",
            "",
            (
                "Tasks only one of the two resolved, on the tasks both scored; p: exact "
                "two-sided sign test (McNemar's exact test with one sample per task)."
            ),
            "",
        ]
        lines += md_table(PAIRED_COLUMNS, paired)
    cols, table = breakdown(board.entries, "split")
    lines += ["", "## Resolve rate by split", ""]
    lines += md_table(["agent", *cols], _breakdown_rows(board.entries, cols, table))
    cols, table = breakdown(board.entries, "suite")
    lines += ["", "## Resolve rate by suite", ""]
    lines += md_table(["agent", *cols], _breakdown_rows(board.entries, cols, table))
    cols, table = breakdown(board.entries, "package")
    if cols:
        lines += ["", "## Resolve rate by package", ""]
        lines += md_table(
            ["package", "tasks", *(e.name for e in board.entries)],
            _tag_rows(board.entries, cols, table, "package"),
        )
    cols, table = breakdown(board.entries, "tags")
    lines += ["", "## Resolve rate by tag", ""]
    lines += md_table(
        ["tag", "tasks", *(e.name for e in board.entries)], _tag_rows(board.entries, cols, table)
    )
    tasks, cells = matrix(board.entries)
    rows = [
        [
            task,
            split,
            *(
                " ".join(
                    f"[{STATUS_MARK[status(r)]}]({links[id(r)]})"
                    for r in cells.get((task, e.name), [])
                )
                or "·"
                for e in board.entries
            ),
        ]
        for task, split in tasks
    ]
    lines += [
        "",
        "## Tasks × runs",
        "",
        " ".join(f"{m} {STATUS_HELP[s]};" for s, m in STATUS_MARK.items()),
        "",
    ]
    lines += md_table(["task", "split", *(e.name for e in board.entries)], rows)
    return "\n".join(lines) + "\n"


def plots(board: Board, out: Path) -> dict[str, Path]:
    """Write resolve_rate.png, reward.png and steps.png; return name -> path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [e.name for e in board.entries]
    split_cols, splits = breakdown(board.entries, "split")
    paths: dict[str, Path] = {}
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    width = 0.8 / max(1, len(split_cols))
    for i, split in enumerate(split_cols):
        vals = [100 * (splits[n].get(split) or 0.0) for n in names]
        ax.bar([x + i * width for x in range(len(names))], vals, width, label=split)
    ax.set_xticks(
        [x + width * (len(split_cols) - 1) / 2 for x in range(len(names))],
        names,
        rotation=20,
        ha="right",
    )
    ax.set_ylabel("resolve rate (%)")
    ax.set_ylim(0, 105)
    ax.set_title("Resolve rate per run and split")
    ax.legend()
    paths["resolve_rate"] = _save(fig, out / "resolve_rate.png")
    for key in ("reward", "steps"):
        fig, ax = plt.subplots(figsize=(6.4, 3.6))
        data = [
            [float(r.get(key) or 0) for r in e.rows if not unscored(r)] or [0.0]
            for e in board.entries
        ]
        ax.boxplot(data, showmeans=True)
        ax.set_xticks(range(1, len(names) + 1), names, rotation=20, ha="right")
        ax.set_ylabel(key)
        ax.set_title(f"{key.capitalize()} distribution per run")
        paths[key] = _save(fig, out / f"{key}.png")
    plt.close("all")
    return paths


def _save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return path


def build(result_dirs: list[str | Path], out: str | Path) -> Board:
    """Write ``out/index.html``, ``leaderboard.md``, ``summary.json``, PNGs and episode pages.

    Args:
        result_dirs: Run folders, or folders of them.
        out: The output folder (created).
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    entries, notes = load_entries(result_dirs)
    k = common_k(e.rows for e in entries)
    summaries = summarize_groups({e.name: e.rows for e in entries})
    entries.sort(key=lambda e: (-(summaries[e.name]["resolve_rate"] or 0), e.name))
    board = Board(
        {e.name: summaries[e.name] for e in entries},
        k,
        notes,
        entries,
        {e.name: run_info(e) for e in entries},
    )
    links = write_episode_pages(entries, out)
    images = plots(board, out)
    sources = [str(d) for d in result_dirs]
    (out / "leaderboard.md").write_text(markdown(board, links))
    (out / "index.html").write_text(html_page(board, images, links, sources))
    runs = {name: {**s, "run": board.infos[name]} for name, s in jsonable(board.summaries).items()}
    paired = paired_with_top(board)
    (out / "summary.json").write_text(
        json.dumps(
            {"k": k, "interval": INTERVAL, "notes": notes, "runs": runs, "paired_with_top": paired},
            indent=2,
        )
        + "\n"
    )
    return board
