"""The benchmark harness: run agents on tasks and compare them.

- :mod:`~repogym.harness.runner` (parallel runs, resume), :mod:`~repogym.harness.worker`
  (one episode) and :mod:`~repogym.harness.executors` (the executors: threads, processes,
  Ray, remote env servers);
- :mod:`~repogym.harness.results`, :mod:`~repogym.harness.metrics`,
  :mod:`~repogym.harness.report`, :mod:`~repogym.harness.swebench_report`,
  :mod:`~repogym.harness.provenance`: what a run records (and about itself) and how it is
  summarised; :mod:`~repogym.harness.leaderboard`;
- :mod:`~repogym.harness.baselines`: the benchmark agents (oracle, noop, scripted, hf,
  openai, apr); the trainers are :mod:`repogym.agents`;
- :mod:`~repogym.harness.config`: a run's settings and label.
"""
