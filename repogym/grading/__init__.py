"""Grading: how a task's hidden tests are planted, run and judged.

- :mod:`repogym.grading.grader`: one grading of a diff (the filtered diff applied in a fresh
  sandbox, the hidden tests planted, the grading run, the verdict and the reward);
- :mod:`repogym.grading.canaries`: planting a test file (renamed tests, sealed checks,
  canaries);
- :mod:`repogym.grading.seal`: sealed checks (the expected values kept out of the sandbox);
- :mod:`repogym.grading.gold`: the values the gold patch's checks report, recorded once;
- :mod:`repogym.grading.grading_run`: the launcher's invocation, its result channel and the
  verdict;
- ``launcher/``: what runs inside the sandbox (the launcher and the canonical encoding).

It sits between :mod:`repogym.scenarios` (the task format) and :mod:`repogym.envs` (the
Gymnasium envs that grade through it), and imports neither ``envs`` nor anything above.
"""
