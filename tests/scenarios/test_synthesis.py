"""The synthesis pipeline's last stage: what reaches ``out`` and why the rest is dropped."""

from __future__ import annotations

from pathlib import Path

from repogym.quality.synthesis import keep
from repogym.quality.validate import TaskReport


def _folder(root: Path, name: str) -> Path:
    folder = root / name
    (folder / "repo").mkdir(parents=True)
    (folder / "task.toml").write_text(f'id = "{name}"\n')
    return folder


def test_keep_moves_the_valid_unscreened_tasks_and_says_why_the_others_are_dropped(tmp_path):
    staging, out = tmp_path / "staging", tmp_path / "out"
    folders = [_folder(staging, n) for n in ("good", "invalid", "leaky")]
    reports = [
        TaskReport("good", folders[0]),
        TaskReport("invalid", folders[1], problems=["invalid: gold fails"]),
        TaskReport("leaky", folders[2]),
    ]
    holes = {"leaky": ["leaky: a sandbox of it can read the fix: x"]}
    written, dropped = keep(folders, reports, holes, out)
    assert written == [out / "good"] and (out / "good" / "task.toml").is_file()
    assert not folders[0].exists() and sorted(p.name for p in out.iterdir()) == ["good"]
    assert dropped == {"invalid": reports[1].failures, "leaky": holes["leaky"]}
    assert reports[1].failures  # a validation failure is its own reason


def test_keep_replaces_a_task_folder_left_in_out_by_an_earlier_run(tmp_path):
    staging, out = tmp_path / "staging", tmp_path / "out"
    [folder] = [_folder(staging, "good")]
    (out / "good" / "stale").mkdir(parents=True)
    written, dropped = keep([folder], [TaskReport("good", folder)], {}, out)
    assert written == [out / "good"] and dropped == {}
    assert not (out / "good" / "stale").exists() and (out / "good" / "repo").is_dir()
