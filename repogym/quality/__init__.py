"""Task quality: is a task worth training on, and can it be gamed?

- :mod:`~repogym.quality.validate`: gold passes, noop and the bad fixes fail, graded by the
  real grader (``repogym validate``); :mod:`~repogym.quality.pool` runs those gradings.
- :mod:`~repogym.quality.validate_mutation`: mutants of the gold fix the tests must catch
  (``validate --mutation``).
- :mod:`~repogym.quality.adversarial`: test-gaming payloads that must earn no more than
  noop (``validate --adversarial``).
- :mod:`~repogym.quality.sandboxed_tests`: discovering a package's tests in a sandbox.
- :mod:`~repogym.quality.synthesis`: the `repogym synth` pipeline, stage by stage;
  :mod:`~repogym.quality.synth_pypi`, :mod:`~repogym.quality.synth_history`,
  :mod:`~repogym.quality.suite_build`: writing tasks from a PyPI package, from its release
  history, and building suites of them; :mod:`~repogym.quality.audit`: the leak scan.
- :mod:`~repogym.quality.tiers`: difficulty tiers from a baseline agent's run.

It sits beside :mod:`repogym.harness` (both use :mod:`repogym.envs`; neither imports the
other); the command line (:mod:`repogym.cli`) uses both.
"""
