#!/usr/bin/env bash
# GRPO on repogym with verl's agent loop (needs a GPU box with `pip install 'repogym[verl]'`
# and verl's rollout server (vLLM or SGLang)). Not run in CI: see docs/integrations.md.
# Sized for the shipped rows (20 train tasks): a batch of 16 prompts x 8 samples; verl drops an
# incomplete last batch, so data.train_batch_size must stay <= the train rows
# (tests/integrations/test_verl.py composes this command with verl's own config and checks it).
set -euo pipefail
python examples/verl/make_dataset.py --out data/repogym
python -m verl.trainer.main_ppo \
  algorithm.adv_estimator=grpo \
  data.train_files=data/repogym/train.parquet data.val_files=data/repogym/test.parquet \
  data.return_raw_chat=True data.max_prompt_length=4096 data.max_response_length=8192 \
  data.train_batch_size=16 actor_rollout_ref.actor.ppo_mini_batch_size=16 \
  actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1 \
  actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1 \
  actor_rollout_ref.model.path="${MODEL:-Qwen/Qwen2.5-Coder-7B-Instruct}" \
  actor_rollout_ref.rollout.name=vllm actor_rollout_ref.rollout.mode=async \
  actor_rollout_ref.rollout.n=8 \
  actor_rollout_ref.rollout.multi_turn.max_assistant_turns=30 \
  actor_rollout_ref.rollout.agent.agent_loop_config_path=examples/verl/repogym_agent_loop.yaml \
  +repogym.sandbox=bwrap +repogym.reward_mode=binary +repogym.max_steps=30 \
  trainer.n_gpus_per_node=8 trainer.nnodes=1 "$@"
