"""`repogym suite build` (and `repogym synth --pypi --served`) keep only the tasks a suite
would serve: the screen applies the rule a fetched suite applies (the seal floor, measured
after the strongest attack's check, and a pass_to_pass test reaching the fix), to real
validations and real gradings in the sandbox."""

from __future__ import annotations

import uuid

from repogym.quality import synthesis
from tests.scenarios._tasks import TESTS, write_task

#: The fail_to_pass test checks an ordering: a bit a forger can give, no value seal.
BIT = TESTS.replace("assert clamp(15, 0, 10) == 10", "assert clamp(15, 0, 10) <= 10")
#: The pass_to_pass test never calls clamp: nothing but the fail_to_pass test reaches the fix.
UNREACHED = TESTS.replace("assert clamp(5, 0, 10) == 5", "assert max(5, 0) == 5")


def test_the_served_screen_drops_what_a_suite_would_withhold(tmp_path):
    tag = f"# {uuid.uuid4()}\n"  # new tasks: no record of an earlier run is read
    folders = [
        write_task(tmp_path / name / name, tests=tag + tests)  # a package each
        for name, tests in (("sealed", TESTS), ("bit", BIT), ("unreached", UNREACHED))
    ]
    reports = synthesis.validate(folders, sandbox="bwrap", reruns=1, workers=1, say=lambda m: None)
    assert all(r.ok for r in reports), [r.failures for r in reports]
    holes = synthesis.screen(
        folders,
        reports,
        sandbox="bwrap",
        workers=1,
        adversarial=False,
        leak_scan=False,
        served=True,
    )
    assert set(holes) == {"bit", "unreached"}, holes
    assert "0 of 1 fail_to_pass tests witnessed by a value seal" in holes["bit"][0]
    assert "no pass_to_pass test reaches the code its fix changes" in holes["unreached"][0]
    assert (
        synthesis.screen(
            folders, reports, sandbox="bwrap", workers=1, adversarial=False, leak_scan=False
        )
        == {}
    )  # without it, all three are kept as before
