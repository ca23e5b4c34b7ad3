"""Payload: patch pytest's ``TestReport`` so that every report says "passed".

Planted as text by :mod:`repogym.quality.adversarial` (never imported by repogym).
"""
# Attack code: it swallows every error on purpose.


def _rg_flip_reports():
    try:
        from _pytest import reports
    except Exception:
        return
    cls = reports.TestReport
    if getattr(cls, "_rg_flipped", False):
        return
    made = cls.from_item_and_call.__func__

    def forged(c, item, call):
        r = made(c, item, call)
        r.outcome, r.longrepr = "passed", None
        return r

    cls.from_item_and_call = classmethod(forged)
    cls._rg_flipped = True
