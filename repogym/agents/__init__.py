"""Reference RL trainers for repogym environments (needs the ``train`` extra).

Layers, each importing only the ones above it in this list:

1. maths: :mod:`~repogym.agents.losses` (advantages, policy losses, KL, corrections, Echo);
2. data: :mod:`~repogym.agents.episode` (exact-token episodes, batches, rollout files),
   :mod:`~repogym.agents.chat` (the chat rendering shared with the harness ``hf`` agent),
   :mod:`~repogym.agents.shaping`, :mod:`~repogym.agents.metrics`;
3. model: :mod:`~repogym.agents.scoring` (chunked log-probs, entropy, KL),
   :mod:`~repogym.agents.policy` (loading, fp32 masters, LoRA, the value head);
4. rollout: :mod:`~repogym.agents.engines` (in-process HF, OpenAI-compatible server),
   :mod:`~repogym.agents.rollout` (environments, collection, dynamic sampling);
5. trainers: :mod:`~repogym.agents.trainer` (the shared loop, checkpoints, resume),
   :mod:`~repogym.agents.grpo`, :mod:`~repogym.agents.ppo`, :mod:`~repogym.agents.distill`,
   :mod:`~repogym.agents.echo` (an extra term), :mod:`~repogym.agents.async_rl` (a wrapper);
6. :mod:`~repogym.agents.cli` (``repogym train``), and beside it the CPU toy,
   :mod:`repogym.agents.toy`.

Importing this package is cheap: nothing is imported until a submodule is.
"""
