"""The CPU toy: a tiny model learns to pick, among each task's own patches, one that passes.

It shows the training machinery end to end on a CPU in minutes -- real RepoEnv episodes, the
bwrap sandbox, hidden-test grading, the same trainers -- and is not a claim that a
0.5M-parameter model fixes bugs.

- :mod:`~repogym.agents.toy.tiny`: a tiny offline Qwen2 and byte-level BPE tokenizer (ChatML
  template), also the random-init "real checkpoint" of the tests;
- :mod:`~repogym.agents.toy.menu`: the menu language (``fix <k>`` / ``submit``);
- :mod:`~repogym.agents.toy.setup`: ``--model tiny`` for ``repogym train``;
- :mod:`~repogym.agents.toy.menu_env` and :mod:`~repogym.agents.toy.sb3_ppo`: the menu as a
  ``Discrete`` env and the Stable-Baselines3 baseline (``--algo sb3-ppo``);
- :mod:`~repogym.agents.toy.demo`: ``make train-demo``.
"""
