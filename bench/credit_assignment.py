"""Credit assignment: which method's per-step advantages rank known bad steps below good ones.

The trajectories (real RepoEnv episodes of the CPU toy's menu, bwrap sandbox, hidden-test
grading): the oracle's fix with injected mistakes, some later undone, per task

- ``gold``: gold fix, submit (resolved);
- ``undo``: gold, a decoy that breaks it, gold again, submit (resolved);
- ``break``: gold, the decoy, submit (not resolved);
- ``twice``: gold, decoy, gold, decoy, submit (not resolved).

Each fix step is labelled by the grader: *good* when the share of hidden tests passing rises
after it, *bad* when it falls (steps that change nothing, and the submits, are not scored).

The policy whose values are estimated is a scripted random menu policy (each turn: submit
with probability 1/2, else a uniformly drawn menu entry). Methods, each giving every fix
step an advantage:

- ``grpo``: the episode's group-normalised outcome (the group: the task's four
  trajectories), the same for every step of an episode;
- ``gae-head`` / ``gae-token`` at lambda 0.95 and 1.0 (gamma 1): GAE over the values of a
  value head, or of the yes/no token critic, on the toy's tiny (0.5M) model, each trained
  critic-only for ``--critic-steps`` Adam steps on ``--train-episodes`` episodes of the random
  policy per task (their outcomes as targets) -- tiny and barely trained, as labelled;
- ``mc-K`` (K in 4, 8): ``V(s_{k+1}) - V(s_k)`` with Monte-Carlo values from K forked
  continuations per state (:func:`repogym.agents.mc.mc_turn_values`; ``V`` after the last
  step is the outcome);
- ``progress``: the change of ``info["progress"]`` (the environment's share of hidden tests
  passing, ``gym.make(..., progress=True)``) over the step -- the grader's own dense signal,
  so it agrees with the labels by construction;
- the reference: ``mc`` with ``--ref-rollouts`` further continuations per state (disjoint
  from the ``mc-K`` samples).

Reported per method: ROC-AUC of ranking bad steps below good ones (ties count 1/2), the
Pearson correlation of its advantages with the reference's over the scored steps, and the
cost (forked continuations, critic forward passes, wall seconds).

Run: ``nice python bench/credit_assignment.py [--tasks retry-zero chunk-list-remainder]``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path

import gymnasium as gym
import torch

from repogym.agents.critics import TokenCritic
from repogym.agents.engines import Request, ScriptedEngine
from repogym.agents.episode import Episode, collate
from repogym.agents.losses import token_critic_loss, value_loss, yes_no_value
from repogym.agents.mc import MCConfig, mc_turn_values
from repogym.agents.policy import Policy, load_policy
from repogym.agents.ppo import turn_advantages
from repogym.agents.rollout import GRADE_CACHE, EnvPool, RolloutConfig, env_id, run_episodes
from repogym.agents.toy.menu import MenuFormat
from repogym.agents.toy.tiny import TinyConfig, build_tiny, save_tiny
from repogym.scenarios.registry import registered_tasks

TEMPLATES = {
    "gold": ["gold"],
    "undo": ["gold", "decoy", "gold"],
    "break": ["gold", "decoy"],
    "twice": ["gold", "decoy", "gold", "decoy"],
}
"""Each trajectory's fix steps; every trajectory then submits."""

CONFIG = RolloutConfig(group_size=1, max_steps=24, max_new_tokens=8, max_context=512)
NOT_MEASURED = -1.0


def turn_of(fmt: MenuFormat, request: Request) -> int:
    """The turn a menu request is for: the prompt line, then an action and its observation
    line per turn."""
    lines = fmt.tokenizer.decode(request.prompt_ids).strip("\n").split("\n")
    return (len(lines) - 1) // 2


def random_policy(fmt: MenuFormat, task: str) -> ScriptedEngine:
    """Submit with probability 1/2, else a uniformly drawn menu entry (seeded per turn)."""
    labels = [e.label for e in fmt.entries(task)]

    def script(_: int, request: Request) -> str:
        rng = random.Random(f"{request.seed}:{turn_of(fmt, request)}")
        return "submit\n" if rng.random() < 0.5 else f"{rng.choice(labels)}\n"

    return ScriptedEngine(fmt.tokenizer, script)


def plan_policy(fmt: MenuFormat, plans: dict[int, list[str]]) -> ScriptedEngine:
    """Plays ``plans[seed]`` (menu labels), then submits."""

    def script(_: int, request: Request) -> str:
        plan, k = plans[request.seed], turn_of(fmt, request)
        return f"{plan[k]}\n" if k < len(plan) else "submit\n"

    return ScriptedEngine(fmt.tokenizer, script)


def progress_walk(task: str, actions: list[tuple[str, ...]]) -> list[float]:
    """The share of hidden tests passing before each fix step and after the last one."""
    env = gym.make(
        env_id(task),
        progress=True,
        sandbox=CONFIG.sandbox,
        max_steps=CONFIG.max_steps,
        grade_cache=GRADE_CACHE,
    )
    try:
        _, info = env.reset(seed=0)
        shares = [float(info["progress"])]
        for step in actions:
            share = shares[-1]
            for action in step:
                info = env.step(action)[4]
                if info["progress"] != NOT_MEASURED:
                    share = float(info["progress"])
            shares.append(share)
        return shares
    finally:
        env.close()


def choose_decoy(fmt: MenuFormat, task: str) -> str:
    """The first decoy that, applied after the gold fix, lowers the share of passing tests."""
    entries = fmt.entries(task)
    gold = next(e for e in entries if e.kind == "gold")
    for e in entries:
        if e.kind == "decoy":
            shares = progress_walk(task, [gold.actions, e.actions])
            if shares[2] < shares[1]:
                return e.label
    raise RuntimeError(f"no decoy of {task} breaks the gold fix")


def build_model(tasks: list[str], folder: Path) -> tuple[MenuFormat, Path]:
    """The toy's tiny model and menu format for ``tasks``."""
    objs = tuple(registered_tasks()[t] for t in tasks)
    model, tok = build_tiny(
        seed=0, extra_corpus=MenuFormat.corpus(objs, 0), config=TinyConfig(max_len=512)
    )
    save_tiny(model, tok, folder)
    return MenuFormat(objs, tok, 0), folder


def train_critic(policy: Policy, episodes: list[Episode], kind: str, steps: int) -> int:
    """Critic-only Adam steps on the episodes' outcomes; returns forward passes made."""
    batch = collate(episodes, policy.tokenizer.pad_token_id)
    mask = batch.state_pos >= 0
    targets = batch.rewards.clamp(0, 1)[:, None].expand_as(batch.state_pos).float()
    critic = TokenCritic(policy) if kind == "token" else None
    opt = torch.optim.Adam([p for p in policy.parameters() if p.requires_grad], lr=1e-3)
    for _ in range(steps):
        opt.zero_grad()
        if critic is not None:
            lg = critic.state_logits(policy, batch)
            loss = token_critic_loss(lg.yes, lg.no, targets, mask)
        else:
            values = policy.score(batch.input_ids, batch.attention_mask, with_values=True).values
            loss = value_loss(
                values.gather(1, batch.state_pos.clamp(min=0)),
                values.detach(),
                targets,
                mask,
                clip=None,
            )
        loss.backward()
        opt.step()
    return steps * (int(mask.sum()) + len(batch) if critic is not None else 1)


@torch.no_grad()
def critic_values(policy: Policy, episodes: list[Episode], kind: str):
    """``(V(s_k) [B, K], V(s_T) [B])`` of a trained critic."""
    batch = collate(episodes, policy.tokenizer.pad_token_id)
    if kind == "token":
        lg = TokenCritic(policy).state_logits(policy, batch)
        return batch, yes_no_value(lg.yes, lg.no), yes_no_value(lg.final_yes, lg.final_no)
    values = policy.score(batch.input_ids, batch.attention_mask, with_values=True).values
    sv = values.gather(1, batch.state_pos.clamp(min=0))
    return batch, sv, values.gather(1, batch.final_pos[:, None]).squeeze(1)


def auc(good: list[float], bad: list[float]) -> float:
    """P(a good step's advantage > a bad one's), ties 1/2."""
    pairs = [(g > b) + 0.5 * (g == b) for g in good for b in bad]
    return sum(pairs) / len(pairs)


def pearson(x: list[float], y: list[float]) -> float:
    """Pearson correlation (0 when either side is constant)."""
    if statistics.pstdev(x) == 0 or statistics.pstdev(y) == 0:
        return 0.0
    return statistics.correlation(x, y)


def main(argv: list[str] | None = None) -> int:
    """Build the trajectories, score every method, print the table (and ``--json``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=["retry-zero", "chunk-list-remainder"])
    parser.add_argument("--ref-rollouts", type=int, default=16)
    parser.add_argument("--train-episodes", type=int, default=16)
    parser.add_argument("--critic-steps", type=int, default=30)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    tmp = Path(tempfile.mkdtemp(prefix="credit-bench-"))
    fmt, model_dir = build_model(args.tasks, tmp / "tiny")
    cost: dict[str, dict[str, float]] = {}
    episodes: list[Episode] = []
    meta: list[tuple[str, str, list[float]]] = []
    t0, walk_s = time.monotonic(), 0.0
    with EnvPool(CONFIG) as pool:
        for task in args.tasks:
            by_kind = {"gold": fmt.gold_label(task), "decoy": choose_decoy(fmt, task)}
            entries = {e.label: e for e in fmt.entries(task)}
            plans = {i: [by_kind[k] for k in kinds] for i, kinds in enumerate(TEMPLATES.values())}
            eps = run_episodes(
                plan_policy(fmt, plans), fmt, pool, [task] * len(plans), CONFIG, seeds=list(plans)
            )
            for (name, _), plan, ep in zip(TEMPLATES.items(), plans.values(), eps, strict=True):
                ep.group = args.tasks.index(task)
                t_walk = time.monotonic()
                shares = progress_walk(task, [entries[label].actions for label in plan])
                walk_s += time.monotonic() - t_walk
                episodes.append(ep)
                meta.append((task, name, shares))
        cost["progress"] = {"wall_s": walk_s}
        print(f"trajectories: {len(episodes)} in {time.monotonic() - t0:.0f}s", flush=True)
        # Monte Carlo: K = 4 and 8 from the first 8 continuations; the reference from the rest.
        t1 = time.monotonic()
        mc = []
        for b, ep in enumerate(episodes):
            est = mc_turn_values(
                random_policy(fmt, ep.task),
                fmt,
                pool,
                ep,
                CONFIG,
                MCConfig(rollouts=8 + args.ref_rollouts, seed=11),
                index=b,
            )
            assert est.replay_mismatches == 0, "the replay did not reproduce the episode"
            mc.append([v.rewards for v in est.turns])
        mc_wall = time.monotonic() - t1
        print(
            f"MC: {sum(len(r) for m in mc for r in m)} continuations in {mc_wall:.0f}s", flush=True
        )
        # Learned critics, trained on the random policy's episodes.
        t2 = time.monotonic()
        train = []
        for task in args.tasks:
            train += run_episodes(
                random_policy(fmt, task),
                fmt,
                pool,
                [task] * args.train_episodes,
                CONFIG,
                seeds=list(range(100, 100 + args.train_episodes)),
            )
        data_wall = time.monotonic() - t2
    critics = {}
    for kind in ("head", "token"):
        t3 = time.monotonic()
        policy = load_policy(model_dir, value_head=kind == "head", device="cpu")
        passes = train_critic(policy, train, kind, args.critic_steps)
        critics[kind] = critic_values(policy, episodes, kind)
        cost[f"gae-{kind}"] = {
            "wall_s": time.monotonic() - t3 + data_wall,
            "train_episodes": len(train),
            "forward_passes": passes,
        }
    batch = critics["head"][0]
    adv: dict[str, list[list[float]]] = {}
    for kind in ("head", "token"):
        _, sv, fv = critics[kind]
        for lam in (0.95, 1.0):
            a, _ = turn_advantages(batch, sv, fv, 1.0, lam)
            adv[f"gae-{kind} λ={lam}"] = a.tolist()
    grpo = {}
    for task in args.tasks:
        idx = [i for i, ep in enumerate(episodes) if ep.task == task]
        r = torch.tensor([episodes[i].reward for i in idx])
        grpo.update(zip(idx, ((r - r.mean()) / (r.std() + 1e-6)).tolist(), strict=True))
    adv["grpo"] = [[grpo[i]] * len(ep.turns) for i, ep in enumerate(episodes)]

    def mc_adv(b: int, lo: int, hi: int) -> list[float]:
        values = [statistics.fmean(r[lo:hi]) for r in mc[b]] + [episodes[b].reward]
        return [values[k + 1] - values[k] for k in range(len(mc[b]))]

    ref_hi = 8 + args.ref_rollouts
    for k in (4, 8):
        adv[f"mc-{k}"] = [mc_adv(b, 0, k) for b in range(len(episodes))]
        cost[f"mc-{k}"] = {"continuations_per_state": k, "wall_s": mc_wall * k / ref_hi}
    adv["reference"] = [mc_adv(b, 8, ref_hi) for b in range(len(episodes))]
    adv["progress"] = [[s[k + 1] - s[k] for k in range(len(s) - 1)] for _, _, s in meta]
    rows = scored_steps(meta, adv)
    table = print_table(rows, adv, cost, args)
    if args.json:
        args.json.write_text(json.dumps({"table": table, "rows": rows}, indent=1))
    return 0


def scored_steps(
    meta: list[tuple[str, str, list[float]]], adv: dict[str, list[list[float]]]
) -> list[dict]:
    """One row per step that changed the progress share: task, template, turn, ``good`` or
    ``bad``, and each method's advantage for it."""
    rows = []
    for b, (task, name, shares) in enumerate(meta):
        for k in range(len(shares) - 1):
            if shares[k + 1] == shares[k]:
                continue
            rows.append(
                {
                    "task": task,
                    "template": name,
                    "turn": k,
                    "label": "good" if shares[k + 1] > shares[k] else "bad",
                    **{m: adv[m][b][k] for m in adv},
                }
            )
    return rows


def print_table(
    rows: list[dict],
    adv: dict[str, list[list[float]]],
    cost: dict[str, dict[str, float]],
    args: argparse.Namespace,
) -> dict:
    """Print each method's ROC-AUC, correlation with the reference and cost; the table."""
    good = [r for r in rows if r["label"] == "good"]
    bad = [r for r in rows if r["label"] == "bad"]
    ref = [r["reference"] for r in rows]
    print(
        f"\nscored steps: {len(good)} good, {len(bad)} bad; tasks {', '.join(args.tasks)}; "
        f"reference: MC with {args.ref_rollouts} continuations per state\n"
    )
    print("| method | ROC-AUC (bad below good) | Pearson r with reference | cost |")
    print("|---|---|---|---|")
    table = {}
    for m in [*sorted(k for k in adv if k != "reference"), "reference"]:
        a = auc([r[m] for r in good], [r[m] for r in bad])
        p = pearson([r[m] for r in rows], ref)
        c = cost.get(m.split(" ")[0], {})
        table[m] = {"auc": a, "pearson": p, **c}
        shown = ", ".join(
            f"{k} {v:.0f}" if isinstance(v, float) else f"{k} {v}" for k, v in c.items()
        )
        print(f"| {m} | {a:.3f} | {p:.3f} | {shown} |")
    return table


if __name__ == "__main__":
    raise SystemExit(main())
