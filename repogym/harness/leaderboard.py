"""Building the leaderboard: Markdown, PNG plots and a static HTML page from result folders.

The page needs no server and no external asset: inline CSS, plots embedded as base64 PNGs
(the PNG files are written next to it too). Plots use matplotlib's Agg backend.
"""

from __future__ import annotations

import base64
import html
import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from repogym.harness.runner import read_results, summarize, summarize_by_agent

COLUMNS = ("agent", "episodes", "tasks", "resolve rate", "mean reward", "pass@1", "pass@k",
           "mean steps", "mean wall s", "tokens", "hack flags", "infra errors", "agent errors")
CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;
max-width:1100px;color:#1b1f24;padding:0 1rem}
h1{font-size:1.6rem;margin-bottom:.2rem}.sub{color:#57606a;margin-top:0}
table{border-collapse:collapse;width:100%;margin:1rem 0 2rem;font-size:.92rem}
th,td{border-bottom:1px solid #d0d7de;padding:.45rem .6rem;text-align:right}
th:first-child,td:first-child{text-align:left}th{background:#f6f8fa}
tr:hover td{background:#f6f8fa}.plots{display:flex;flex-wrap:wrap;gap:1rem}
.plots figure{margin:0;flex:1 1 320px}.plots img{width:100%;border:1px solid #d0d7de}
figcaption{color:#57606a;font-size:.85rem}
"""


def load_rows(result_dirs: list[str | Path]) -> list[dict[str, Any]]:
    """Every row of the given result folders (the last row per agent/task/sample wins)."""
    merged: dict[tuple, dict] = {}
    for d in result_dirs:
        for row in read_results(d):
            merged[(row.get("agent"), row.get("task"), row.get("sample"))] = row
    if not merged:
        raise ValueError(f"no result rows in {[str(d) for d in result_dirs]}. Fix: run "
                         "`repogym run --out DIR` first")
    return list(merged.values())


def _fmt(value: Any, kind: str) -> str:
    if value is None:
        return "-"
    if kind == "pct":
        return f"{100 * value:.1f}%"
    if kind == "f3":
        return f"{value:.3f}"
    if kind == "f1":
        return f"{value:.1f}"
    return str(value)


def table_rows(summaries: dict[str, dict[str, Any]]) -> list[list[str]]:
    """One list of cell strings per agent, in :data:`COLUMNS` order, best resolve rate first."""
    order = sorted(summaries, key=lambda a: (-(summaries[a]["resolve_rate"] or 0), a))
    out = []
    for agent in order:
        s = summaries[agent]
        kmax = max(s["pass_at_k"], default=None)
        pk = f"{_fmt(s['pass_at_k'][kmax], 'pct')} (k={kmax})" if kmax else "-"
        out.append([agent, str(s["episodes"]), str(s["tasks"]), _fmt(s["resolve_rate"], "pct"),
                    _fmt(s["mean_reward"], "f3"), _fmt(s["pass_at_k"].get(1), "pct"), pk,
                    _fmt(s["mean_steps"], "f1"), _fmt(s["mean_wall_s"], "f1"), str(s["tokens"]),
                    str(s["hack_flagged"]), str(s["infra_errors"]), str(s["agent_errors"])])
    return out


def by_split(rows: list[dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    """Resolve rate per agent and split."""
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in rows:
        groups[(str(r.get("agent")), str(r.get("split")))].append(r)
    out: dict[str, dict[str, float | None]] = defaultdict(dict)
    for (agent, split), rs in sorted(groups.items()):
        out[agent][split] = summarize(rs)["resolve_rate"]
    return dict(out)


def markdown(summaries: dict[str, dict[str, Any]], splits: dict[str, dict[str, Any]]) -> str:
    """The leaderboard as Markdown tables."""
    lines = ["# repogym leaderboard", "",
             "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(r) + " |" for r in table_rows(summaries)]
    names = sorted({s for v in splits.values() for s in v})
    lines += ["", "## Resolve rate by split", "", "| agent | " + " | ".join(names) + " |",
              "|---|" + "---|" * len(names)]
    for agent, v in splits.items():
        lines.append(f"| {agent} | " + " | ".join(_fmt(v.get(n), "pct") for n in names) + " |")
    lines += ["", ("Resolve rate and mean reward exclude infra-error episodes; pass@k is the "
              "unbiased estimator of Chen et al. (2021), averaged over tasks."), ""]
    return "\n".join(lines)


def plots(rows: list[dict[str, Any]], splits: dict[str, dict[str, Any]],
          out: Path) -> dict[str, Path]:
    """Write resolve_rate.png, reward.png and steps.png; return name -> path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    agents = sorted(splits)
    names = sorted({s for v in splits.values() for s in v})
    paths: dict[str, Path] = {}

    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    width = 0.8 / max(1, len(names))
    for i, split in enumerate(names):
        vals = [100 * (splits[a].get(split) or 0.0) for a in agents]
        ax.bar([x + i * width for x in range(len(agents))], vals, width, label=split)
    ax.set_xticks([x + width * (len(names) - 1) / 2 for x in range(len(agents))], agents)
    ax.set_ylabel("resolve rate (%)")
    ax.set_ylim(0, 105)
    ax.set_title("Resolve rate per agent and split")
    ax.legend()
    paths["resolve_rate"] = _save(fig, out / "resolve_rate.png")

    per_agent = {a: [r for r in rows if r.get("agent") == a and not r.get("infra_error")]
                 for a in agents}
    for key, label, name in (("reward", "reward", "reward"), ("steps", "steps", "steps")):
        fig, ax = plt.subplots(figsize=(6.4, 3.6))
        data = [[float(r.get(key) or 0) for r in per_agent[a]] or [0.0] for a in agents]
        ax.boxplot(data, showmeans=True)
        ax.set_xticks(range(1, len(agents) + 1), agents)
        ax.set_ylabel(label)
        ax.set_title(f"{label.capitalize()} distribution per agent")
        paths[name] = _save(fig, out / f"{name}.png")
    plt.close("all")
    return paths


def _save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return path


def html_page(summaries: dict[str, dict[str, Any]], splits: dict[str, dict[str, Any]],
              images: dict[str, Path], sources: list[str]) -> str:
    """A self-contained HTML page: inline CSS, base64 PNGs, no scripts."""
    esc = html.escape
    head = "".join(f"<th>{esc(c)}</th>" for c in COLUMNS)
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>"
                   for r in table_rows(summaries))
    names = sorted({s for v in splits.values() for s in v})
    split_head = "<th>agent</th>" + "".join(f"<th>{esc(n)}</th>" for n in names)
    split_body = "".join(
        f"<tr><td>{esc(a)}</td>" + "".join(f"<td>{_fmt(v.get(n), 'pct')}</td>" for n in names)
        + "</tr>" for a, v in splits.items())
    figs = "".join(
        f'<figure><img alt="{esc(name)}" src="data:image/png;base64,'
        f'{base64.b64encode(path.read_bytes()).decode()}"><figcaption>{esc(name)}</figcaption>'
        f"</figure>" for name, path in images.items())
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return (f"<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
            f"<title>repogym leaderboard</title><style>{CSS}</style></head><body>"
            f"<h1>repogym leaderboard</h1><p class=\"sub\">{len(summaries)} agents, built "
            f"{stamp} from {esc(', '.join(sources))}</p>"
            f"<table id=\"leaderboard\"><thead><tr>{head}</tr></thead><tbody>{body}</tbody>"
            f"</table><h2>Resolve rate by split</h2><table id=\"splits\"><thead><tr>{split_head}"
            f"</tr></thead><tbody>{split_body}</tbody></table><div class=\"plots\">{figs}</div>"
            f"<p class=\"sub\">Resolve rate and mean reward exclude infra-error episodes; pass@k "
            f"is the unbiased estimator of Chen et al. (2021), averaged over tasks.</p>"
            f"</body></html>\n")


def build(result_dirs: list[str | Path], out: str | Path) -> dict[str, Any]:
    """Write ``out/index.html``, ``out/leaderboard.md``, ``out/summary.json`` and the PNGs.

    Returns:
        The per-agent summaries.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rows = load_rows(result_dirs)
    summaries = summarize_by_agent(rows)
    splits = by_split(rows)
    images = plots(rows, splits, out)
    sources = [str(d) for d in result_dirs]
    (out / "leaderboard.md").write_text(markdown(summaries, splits))
    (out / "index.html").write_text(html_page(summaries, splits, images, sources))
    (out / "summary.json").write_text(json.dumps(
        {a: {**s, "pass_at_k": {str(k): v for k, v in s["pass_at_k"].items()}}
         for a, s in summaries.items()}, indent=2) + "\n")
    return summaries
