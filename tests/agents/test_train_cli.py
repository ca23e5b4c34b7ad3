"""``repogym train`` as a new user runs it: a Qwen2-style checkpoint with a ChatML template
trains with every LM algorithm in real RepoEnv episodes (bwrap); rollout files hold the exact
token ids of the training sequence; metrics use the one vocabulary; resume is bit-identical;
bad settings fail at once, naming the fix (real processes)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from repogym.agents.async_rl import AsyncOptions
from repogym.agents.cli import async_options, config_from_args
from repogym.agents.episode import collate, read_rollout
from repogym.agents.grpo import GRPOConfig
from repogym.agents.ppo import PPOConfig
from repogym.cli import build_parser, main
from repogym.cli.cmd_train import ALGOS, TRAIN_OPTIONS, TrainOption, relaunch_argv

COMMON = {
    "loss/policy",
    "loss/kl",
    "entropy",
    "reward/mean",
    "resolve_rate",
    "throughput/tokens_per_s",
    "infra_error_frac",
}
RL = {
    "loss/entropy",
    "clip/low_frac",
    "clip/high_frac",
    "is_weight/max",
    "is_weight/mean",
    "approx_kl",
    "frac_zero_std_groups",
}
FAST = [
    "--set",
    "rollout.group_size=2",
    "--set",
    "rollout.max_new_tokens=8",
    "--set",
    "rollout.max_steps=1",
    "--set",
    "micro_batch=2",
    "--set",
    "lr=1e-3",
]


def train(model: Path, algo: str, out: Path, *extra: str, steps: int = 2) -> list[dict]:
    argv = [
        "train",
        "--algo",
        algo,
        "--model",
        str(model),
        "--steps",
        str(steps),
        "--out",
        str(out),
        "--task",
        "retry-zero",
        *FAST,
        *extra,
    ]
    assert main(argv) == 0
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("algo", ["grpo", "gspo", "dapo", "cispo", "ppo", "opd", "distill", "echo"])
def test_a_chatml_checkpoint_trains_with_every_algorithm(
    qwen_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture, algo: str
) -> None:
    rows = train(qwen_dir, algo, tmp_path)
    assert [r["step"] for r in rows] == [1, 2]
    names = set().union(*rows)
    if algo == "dapo" and all(r["frac_zero_std_groups"] == 1.0 for r in rows):
        # Dynamic sampling drops groups whose rewards all agree (a random model resolves
        # nothing): no update is made, and none is logged.
        assert not any("loss/policy" in r for r in rows)
    else:
        assert COMMON <= names
        assert algo in ("distill", "opd") or RL <= names
        if algo == "opd":  # a policy-gradient loss, no entropy bonus term
            assert RL - {"loss/entropy"} <= names
    assert ("loss/value" in names) == (algo == "ppo")
    assert ("loss/echo" in names) == (algo == "echo")
    assert (tmp_path / "checkpoint-2" / "trainer_state.pt").is_file()
    assert (tmp_path / "curves.png").stat().st_size > 1000
    files = sorted((tmp_path / "rollouts").glob("*.jsonl"))
    if algo == "distill":  # the oracle's episodes are not sampled: no rollout files
        return
    assert len(files) == 4 or algo == "dapo"  # 2 steps x 2 samples (+ DAPO's resamples)
    ep = read_rollout(files[0])
    first = json.loads(files[0].read_text().splitlines()[1])
    assert first["prompt_text"].startswith("<|im_start|>system\n")
    assert "<|im_start|>user\n# Task: retry-zero" in first["prompt_text"]
    assert first["prompt_text"].endswith("<|im_start|>assistant\n")
    # The concatenated token ids of the file are the training sequence of its episode.
    batch = collate([ep], 0)
    ids = [i for t in ep.turns for i in t.prompt_ids + t.completion_ids] + ep.final_ids
    assert batch.input_ids[0].tolist() == ids
    assert batch.old_logp[0][batch.action_mask[0].bool()].tolist() == pytest.approx(
        [lp for t in ep.turns for lp in t.logprobs]
    )
    capsys.readouterr()  # `repogym show` renders it (in this process: the CLI's own code)
    assert main(["show", str(files[0])]) == 0
    shown = capsys.readouterr()
    assert "retry-zero" in shown.out, shown.err[-2000:]


def test_resume_continues_bit_identically(qwen_dir: Path, tmp_path: Path) -> None:
    straight = train(qwen_dir, "grpo", tmp_path / "a", steps=3)
    train(qwen_dir, "grpo", tmp_path / "b", steps=2)
    resumed = train(qwen_dir, "grpo", tmp_path / "b", "--resume", steps=3)
    assert [r["step"] for r in resumed] == [1, 2, 3]
    drop = ("time", "time/step_s", "throughput/tokens_per_s", "throughput/gen_tokens_per_s")
    assert [{k: v for k, v in r.items() if k not in drop} for r in resumed] == [
        {k: v for k, v in r.items() if k not in drop} for r in straight
    ]
    a = torch.load(tmp_path / "a/checkpoint-3/trainer_state.pt", weights_only=False)["policy"]
    b = torch.load(tmp_path / "b/checkpoint-3/trainer_state.pt", weights_only=False)["policy"]
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_resume_at_or_past_steps_says_there_is_nothing_to_do(
    qwen_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    rows = train(qwen_dir, "grpo", tmp_path, steps=1)
    capsys.readouterr()
    for steps in ("1", "0"):  # --steps is the total: the checkpoint is already there
        assert (
            main(
                [
                    "train",
                    "--algo",
                    "grpo",
                    "--model",
                    str(qwen_dir),
                    "--out",
                    str(tmp_path),
                    "--task",
                    "retry-zero",
                    "--resume",
                    "--steps",
                    steps,
                ]
            )
            == 0
        )
        out = capsys.readouterr().out
        assert "nothing to do" in out and "checkpoint-1 is at step 1" in out, out
        assert f"--steps {steps} is the total" in out and "--steps above 1" in out
    assert [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()] == rows


def test_the_eta_counts_measured_steps_only(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    from repogym.agents import cli

    clock = [0.0]
    monkeypatch.setattr(cli.time, "monotonic", lambda: clock[0])
    printer = cli._Printer(heartbeat_s=None)
    clock[0] = 66.0  # loading and a warm start: not a training step
    for step, seconds in ((1, 2.0), (2, 4.0)):
        printer("collect", {"step": step, "episodes": 2})
        clock[0] += seconds
        printer("step", {"step": step, "steps": 10, "metrics": {}})
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].endswith("ETA 18s") and lines[3].endswith("ETA 24s"), lines  # 2 s x 9, 3 s x 8
    assert cli.step_eta([], 5) is None


def test_a_silent_phase_gets_a_line_every_few_seconds(capsys: pytest.CaptureFixture) -> None:
    from repogym.agents import cli

    printer = cli._Printer(heartbeat_s=0.5)
    try:
        printer.say("starting the environments")
        time.sleep(2.5)  # the heartbeat looks once a second
    finally:
        printer.close()
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith("] starting the environments")
    assert len(lines) >= 2 and all("still: starting the environments (" in x for x in lines[1:])


def test_lr_schedule_warms_up(qwen_dir: Path, tmp_path: Path) -> None:
    rows = train(
        qwen_dir,
        "grpo",
        tmp_path,
        "--set",
        "warmup_steps=2",
        "--set",
        "lr_schedule=cosine",
        steps=2,
    )
    assert [r["lr"] for r in rows] == pytest.approx([5e-4, 1e-3])


def test_tasks_dir_and_progress_from_the_first_second(qwen_dir: Path, tmp_path: Path) -> None:
    from repogym.scenarios.registry import registered_tasks

    folder = tmp_path / "tasks"
    (folder / "retry-zero").parent.mkdir()
    import shutil

    shutil.copytree(registered_tasks()["retry-zero"].path, folder / "retry-zero")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "repogym.cli",
            "train",
            "--algo",
            "grpo",
            "--model",
            str(qwen_dir),
            "--steps",
            "1",
            "--out",
            str(tmp_path / "run"),
            "--tasks",
            str(folder),
            *FAST,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("[") and "loading" in lines[0]
    assert any("collecting 2 episodes" in x for x in lines)
    assert any("episodes 2/2" in x for x in lines) and any("ETA" in x for x in lines)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--algo", "async", "--set", "sync_every=3", "--set", "max_staleness=0"],
            "learner would wait forever",
        ),
        (["--algo", "grpo", "--set", "kl_kind=k1", "--set", "beta=0.1"], "zero expected gradient"),
    ],
)
def test_bad_settings_fail_at_once_in_a_real_process(
    qwen_dir: Path, tmp_path: Path, flags, message: str
) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "repogym.cli",
            "train",
            "--model",
            str(qwen_dir),
            "--out",
            str(tmp_path),
            "--task",
            "retry-zero",
            *flags,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode != 0 and not (tmp_path / "metrics.jsonl").exists()
    assert message in proc.stderr and "Fix" in proc.stderr


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--algo", "grpo", "--set", "rollout.nope=1"], "unknown field"),
        (["--algo", "async", "--set", "correction=product"], "unsafe"),
        (["--algo", "grpo", "--set", "lr_schedule=cos"], "lr_schedule"),
        (["--algo", "grpo", "--tasks", "/nonexistent"], "not a folder"),
    ],
)
def test_bad_flags_name_the_fix(qwen_dir: Path, tmp_path: Path, flags, message: str) -> None:
    with pytest.raises(SystemExit, match=message):
        main(
            [
                "train",
                "--model",
                str(qwen_dir),
                "--out",
                str(tmp_path),
                "--task",
                "retry-zero",
                *flags,
            ]
        )


def test_algos_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert {
        "ppo",
        "grpo",
        "gspo",
        "dapo",
        "cispo",
        "dr_grpo",
        "async",
        "distill",
        "opd",
        "echo",
        "sb3-ppo",
    } == set(ALGOS)
    rows = [{"step": s, "reward/mean": s / 10} for s in (1, 2, 3)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["plot", str(tmp_path), "-o", str(tmp_path / "c.png")]) == 0
    assert (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"
    assert main(["plot", str(tmp_path / "missing")]) == 2  # a clear error, no traceback
    assert "Fix: pass the --out folder" in capsys.readouterr().err


@pytest.mark.parametrize(
    "settings",
    [
        ("critic=token",),
        ("advantage=mc", "mc_rollouts=2"),
        ("critic=token", "advantage=mc", "mc_rollouts=2"),
    ],
)
def test_a_chatml_checkpoint_trains_with_the_token_critic_and_mc_advantages(
    qwen_dir: Path, tmp_path: Path, settings: tuple[str, ...]
) -> None:
    """PPO's credit-assignment options (docs/training.md) on the tiny chat model, not only
    the CPU toy: finite losses, the value loss of the critic in use, MC's own metrics."""
    extra = [a for s in settings for a in ("--set", s)]
    rows = train(qwen_dir, "ppo", tmp_path, *extra)
    assert [r["step"] for r in rows] == [1, 2]
    for r in rows:
        assert all(v == v and abs(v) != float("inf") for v in r.values() if isinstance(v, float)), r
        assert "loss/value" in r and "loss/policy" in r
    if "advantage=mc" in settings:
        assert all(r["mc/rollouts"] > 0 for r in rows)


def _sample(option: TrainOption) -> list[list[str]]:
    """Non-default command-line forms of ``option`` (a new kind of option fails here)."""
    kw = option.parser_kwargs()
    action = kw.get("action", "store")
    if action == "store_true":
        return [[option.flag]]
    value = (
        max(kw["choices"])
        if "choices" in kw
        else "7"
        if kw.get("type") is int
        else "a value with spaces=1"
    )
    if action == "append":
        return [[option.flag, value, option.flag, "second=2"]]
    assert action == "store", f"{option.flag}: a new kind of option; teach the relaunch about it"
    if kw.get("nargs") == "?":
        return [[option.flag], [option.flag, value]]
    return [[option.flag, value]]


def _parse(argv: list[str]) -> dict:
    args = vars(build_parser().parse_args(argv))
    args.pop("func")
    return args


def test_the_torchrun_relaunch_round_trips_every_option() -> None:
    """parse -> relaunch_argv -> parse gives the same args, for every option of TRAIN_OPTIONS
    set to a non-default value (each form of an optional-value option), and for none set."""
    forms = {o.dest: _sample(o) for o in TRAIN_OPTIONS if o.dest != "algo"}
    relaunched = {o.dest for o in TRAIN_OPTIONS if o.relaunch}
    assert relaunched == set(_parse(["train", "--algo", "ppo"])) - {"command", "nproc"}
    for i in range(max(len(f) for f in forms.values())):
        argv = ["train", "--algo", "ppo"]
        for dest, options in forms.items():
            argv += options[min(i, len(options) - 1)] if dest != "nproc" else []
        first = _parse(argv)
        defaults = _parse(["train", "--algo", "grpo"])
        assert all(first[d] != defaults[d] for d in relaunched), "every option is exercised"
        again = relaunch_argv(argparse.Namespace(**first))
        assert _parse(again) == first, again
    plain = _parse(["train", "--algo", "grpo"])
    assert relaunch_argv(argparse.Namespace(**plain)) == ["train", "--algo", "grpo"]


def test_asynchronous_training_is_the_async_field_and_the_old_name_is_an_alias(
    qwen_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    def config(cls, *pairs: str):
        return config_from_args(cls, argparse.Namespace(overrides=list(pairs)))

    assert async_options(config(GRPOConfig)) is None
    assert async_options(config(PPOConfig, "async_=true")) == AsyncOptions()
    flat = config(GRPOConfig, "async_.max_staleness=4", "async_.correction=tis")
    assert flat.async_ == {"max_staleness": 4, "correction": "tis"}
    assert async_options(flat, "local") == AsyncOptions(
        max_staleness=4, correction="tis", ray="local"
    )
    with pytest.raises(SystemExit, match="unsafe"):
        async_options(config(PPOConfig, "async_.correction=product"))
    with pytest.raises(SystemExit, match="unknown field"):
        config(GRPOConfig, "async_.nope=1")
    with pytest.raises(SystemExit, match="Fix: add --set async_=true"):
        async_options(config(GRPOConfig), "local")
    capsys.readouterr()
    with pytest.raises(SystemExit, match="unsafe"):
        main(
            [
                "train",
                "--algo",
                "async",
                "--model",
                str(qwen_dir),
                "--out",
                str(tmp_path),
                "--task",
                "retry-zero",
                "--set",
                "correction=product",
            ]
        )
    notes = [x for x in capsys.readouterr().err.splitlines() if x.startswith("note:")]
    assert len(notes) == 1 and "deprecated" in notes[0] and "--set async_=true" in notes[0]


def test_ppo_trains_asynchronously_through_the_async_field(qwen_dir: Path, tmp_path: Path) -> None:
    rows = train(qwen_dir, "ppo", tmp_path, "--set", "async_.num_workers=1", steps=1)
    assert [r["async/policy_version"] for r in rows] == [1.0]
    assert "staleness/mean" in rows[-1] and "loss/value" in rows[-1]
