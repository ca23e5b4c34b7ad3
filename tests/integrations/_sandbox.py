"""A wrapper that breaks an episode's sandbox, for the integrations' infra_error tests."""

from __future__ import annotations

import subprocess

import gymnasium as gym


class BreakSandbox(gym.Wrapper):
    """Removes the sandbox's workspace right after reset: the next tool call is an
    infrastructure failure (as tests/grading/test_grader.py's crashed sandbox)."""

    def reset(self, **kwargs):
        out = self.env.reset(**kwargs)
        workspace = self.env.unwrapped.session.sandbox.workspace
        subprocess.run(["umount", "-l", str(workspace.path)], check=False)
        subprocess.run(["rm", "-rf", str(workspace.path)], check=False)
        return out
