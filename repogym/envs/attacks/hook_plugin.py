"""Payload: find pytest's ``Config`` through ``gc`` and register a hook that passes every report.

Planted as text by :mod:`repogym.quality.adversarial` (never imported by repogym).
"""
# Attack code: it swallows every error on purpose.


def _rg_hook_plugin():
    import gc

    try:
        import pytest
    except Exception:
        return

    class _Forge:
        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_makereport(self, item, call):
            outcome = yield
            rep = outcome.get_result()
            rep.outcome, rep.longrepr = "passed", None

    for obj in gc.get_objects():
        if (
            type(obj).__name__ == "Config"
            and hasattr(obj, "pluginmanager")
            and not obj.pluginmanager.has_plugin("rg-forge")
        ):
            obj.pluginmanager.register(_Forge(), "rg-forge")
