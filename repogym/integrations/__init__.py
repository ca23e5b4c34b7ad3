"""Adapters to the field's tools: TRL, SkyRL-Gym, Harbor task folders and trajectories (ATIF).

Each module needs its own extra (``repogym[trl]``, ``repogym[skyrl]``); none is imported by
``import repogym``.
"""
