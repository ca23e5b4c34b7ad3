"""One registry of algorithms; every list of them is derived from it."""

from __future__ import annotations

from typing import get_args

import pytest

from repogym.agents import registry
from repogym.agents.registry import ALGORITHMS, register_algorithm


def test_grpo_family_is_the_trainers_variants():
    from repogym.agents.grpo import VARIANTS, Variant

    assert set(registry.GRPO_FAMILY) == set(VARIANTS) == set(get_args(Variant))
    assert {n for n, a in ALGORITHMS.items() if "variant" in a.preset} == set(VARIANTS)


def test_cli_tables_come_from_the_registry():
    from repogym.agents import cli as agents_cli
    from repogym.cli import cmd_train

    assert cmd_train.ALGOS == {n: a.entry for n, a in ALGORITHMS.items()}
    assert set(cmd_train.DATA_PARALLEL) == {n for n, a in ALGORITHMS.items() if a.data_parallel}
    lm = {n for n, a in ALGORITHMS.items() if a.entry == "repogym.agents.cli:main"}
    assert set(agents_cli.ALGOS) == lm
    for name in lm:  # every registered reference resolves to a class or factory
        cfg, make, preset = agents_cli.ALGOS[name]
        assert isinstance(cfg, type) and callable(make) and preset == ALGORITHMS[name].preset


def test_a_registered_algorithm_is_offered_by_the_cli(monkeypatch):
    from repogym import cli

    monkeypatch.setattr(registry, "ALGORITHMS", dict(ALGORITHMS))
    register_algorithm("my-algo", "tests.agents.test_registry:_my_main")
    from repogym.cli import cmd_train

    monkeypatch.setattr(cmd_train, "ALGOS", {n: a.entry for n, a in registry.ALGORITHMS.items()})
    assert cli.main(["train", "--algo", "my-algo"]) == 7
    with pytest.raises(ValueError, match="registered already"):
        register_algorithm("my-algo", "x:y")


def _my_main(args) -> int:
    return 7 if args.algo == "my-algo" else 1
