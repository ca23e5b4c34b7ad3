"""Reference RL trainers for repogym environments (needs the ``train`` extra).

Layers, each importing only the ones above it in this list:

1. maths: :mod:`~repogym.agents.losses` (advantages, policy losses, KL, corrections, Echo;
   a package by family, every name importable from it);
2. data: :mod:`~repogym.agents.batch` (padded tensors, every trainer's input),
   :mod:`~repogym.agents.episode` (exact-token episodes, collation, rollout files),
   :mod:`~repogym.agents.chat` (the chat rendering shared with the harness ``hf`` agent),
   :mod:`~repogym.agents.shaping`, :mod:`~repogym.agents.metrics`;
3. model: :mod:`~repogym.agents.scoring` (chunked log-probs, entropy, KL),
   :mod:`~repogym.agents.policy` (loading, fp32 masters, LoRA, the value head);
4. rollout: :mod:`~repogym.agents.engines` (in-process HF, OpenAI-compatible server),
   :mod:`~repogym.agents.turns` (one lockstep turn: batched completions, environment steps),
   :mod:`~repogym.agents.rollout` (environments, collection, dynamic sampling);
5. trainers: :mod:`~repogym.agents.trainer` (the shared loop, checkpoints, resume),
   :mod:`~repogym.agents.grpo`, :mod:`~repogym.agents.ppo`, :mod:`~repogym.agents.distill`,
   :mod:`~repogym.agents.echo` (an extra term), :mod:`~repogym.agents.async_rl` (a wrapper);
6. :mod:`~repogym.agents.cli` (``repogym train``), and beside it the CPU toy,
   :mod:`repogym.agents.toy` (its ``--model tiny`` settings and hooks in
   :mod:`repogym.agents.toy.setup`; no trainer imports the toy).

Importing this package is cheap: nothing is imported until a submodule is.
"""
