"""What the sandbox sends for a sealed check is judged, never trusted, and never raises.

A sealed check's record comes from the verifier's process, where the agent's code runs: a
forger can write any JSON on the channel. The grader's side (``canon.decode``,
:meth:`Seal.holds`, :func:`judge_case`, :func:`repogym.grading.grading_run.judge`) must end every
record in a verdict: a record that is malformed, over the caps or not canonical data holds
against no expectation. A ``raises`` record names one exception (its class and that
class's bases), never a list of candidates.
"""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from repogym.grading.canaries import Canary, Masked
from repogym.grading.grading_run import Channel, ChannelError, judge, read_channel
from repogym.grading.launcher import canon, launch
from repogym.grading.seal import CheckOutcome, Seal, judge_case

CASE = "tests/test_a.py::test_real"
CANARIES = (Canary("tests/test_a.py::test_c1", True), Canary("tests/test_a.py::test_c2", False))
#: A seal of every op, with expectations of every kind a test can hold.
SEALS = (
    Seal(11, CASE, 3, "==", (2020, 53)),
    Seal(12, CASE, 4, "in", (1, 1.0, "a")),
    Seal(13, CASE, 5, "in", "abc"),
    Seal(14, CASE, 6, "in", frozenset({1, 2})),
    Seal(15, CASE, 7, "is", None),
    Seal(16, CASE, 8, "truth", True),
    Seal(17, CASE, 9, "approx", 0.5, (("rel", 1e-6),)),
    Seal(18, CASE, 10, "approx", [1.0, 2.0]),
    Seal(19, CASE, 11, "approx", {"a": 1.0}),
    Seal(20, CASE, 12, "raises", ("ValueError",)),
    Seal(21, CASE, 13, "raises", ("ParseError", "KeyError"), (("match", "bad"),)),
    Seal(22, CASE, 14, "contains", "clamped to 10"),
    Seal(23, CASE, 15, "contains", "clamped to 10", cases={CASE: frozenset({"n:40"})}),
    Seal(24, CASE, 16, "contains", "clamped to 10", cases={CASE: frozenset({"x:"})}),
)
ZERO = {"v": {"q": ["1", "0"]}, "is": None, "truth": True, "shown": "1/0"}
ONCE = {"calls": 1}


def _raised(cls: type, message: str = "") -> dict:
    """The record the launcher's runtime sends when its block raised ``cls``."""
    sent: list[dict] = []
    seals = launch.Seals(type("Sink", (), {"send": lambda self, **r: sent.append(r)})(), canon)
    seals.case = CASE
    with seals.raises(1):
        raise cls(message)
    return sent[0]["got"]


def _verdict(seal: Seal, records: list[object]):
    ch = Channel({}, {}, None, 1, seals={(CASE, seal.cid): [*records, ONCE]})
    for c in CANARIES:
        ch.phases[c.node_id] = {"call": ("passed" if c.must_pass else "failed", False)}
    ch.phases[CASE] = {"call": ("passed", False)}
    return judge(
        ch,
        exit_code=1,
        timed_out=False,
        truncated=False,
        exhausted=None,
        node_ids=[CASE],
        masked=Masked(list(CANARIES), seals=[seal]),
    )


# -- a zero denominator (and other non-canonical data) -------------------------------------
@pytest.mark.parametrize(
    "seal", [s for s in SEALS if s.op in ("in", "approx")], ids=lambda s: f"{s.op}-{s.cid}"
)
def test_a_zero_denominator_holds_against_no_expectation(seal):
    assert seal.holds(ZERO) is False
    outcome = judge_case(CASE, [seal], {(CASE, seal.cid): [ZERO, ONCE]})
    assert outcome.failed == [f"line {seal.line}: got 1/0"]
    v = _verdict(seal, [ZERO])
    assert v.trusted and v.tests[CASE] == "failed"


@pytest.mark.parametrize(
    "data",
    [
        {"q": ["1", "0"]},
        {"q": ["1", "-3"]},
        {"q": ["1"]},
        {"q": "12"},
        {"q": [1, 2]},
        {"n": "9" * 5000},
        {"n": "1e3"},
        {"n": "٣"},
        {"n": 5},
        {"inf": "x"},
        {"inf": math.nan},
        {"c": [{"s": "a"}, None]},
        {"y": "zz"},
        {"y": 3},
        {"e": [{"d": []}]},
        {"d": [[1]]},
        {"d": [[{"d": []}, None]]},
        {"date": "2021-02-30"},
        {"dt": 5},
        {"td": "x"},
        {"uuid": "nope"},
        {"opaque": "X"},
        {"zz": 1},
        {"n": "1", "q": ["1", "2"]},
        [],
        "s",
        3,
        {"l": {"n": "1"}},
        {"t": None},
    ],
)
def test_decode_is_total(data):
    with pytest.raises(canon.NotCanonical):
        canon.decode(data)


def test_decode_refuses_nesting_deeper_than_the_encoder_writes():
    deep: object = {"n": "1"}
    for _ in range(canon.MAX_DEPTH + 2):
        deep = {"l": [deep]}
    with pytest.raises(canon.NotCanonical):
        canon.decode(deep)


def test_decode_reads_back_what_encode_writes():
    from datetime import date, timedelta
    from decimal import Decimal
    from fractions import Fraction

    values = [
        None,
        3,
        -(10**40),
        0.5,
        Fraction(1, 3),
        Fraction(10**400, 3),
        math.inf,
        1 + 2j,
        "s",
        b"\x00",
        [1, (2, "a")],
        {1: [2]},
        {frozenset({1})},
        date(2021, 1, 1),
        timedelta(hours=3),
        Decimal("0.10"),
    ]
    for value in values:
        assert canon.decode(canon.encode(value)) == value, value


# -- raises: one exception, never a list ----------------------------------------------------
EVERY_NAME = {
    "raised": [
        "ValueError",
        "TypeError",
        "KeyError",
        "IndexError",
        "ParseError",
        "Exception",
        "BaseException",
        "object",
    ],
    "message": "",
}


def test_a_record_naming_every_exception_class_holds_for_no_raises_seal():
    """Before: ``raised`` was a list of names and any of them matched (a wildcard)."""
    for seal in (s for s in SEALS if s.op == "raises" and not s.options):
        assert not seal.holds(EVERY_NAME)
        assert _verdict(seal, [EVERY_NAME]).tests[CASE] == "failed"


def _chain(*entries: str, message: str = "") -> dict:
    module, _, qualname = entries[0].partition(":")
    return {"raised": qualname, "module": module, "mro": list(entries), "message": message}


BUILTIN_TAIL = ("builtins:Exception", "builtins:BaseException", "builtins:object")
WILDCARDS = {
    "every builtin as a base": _chain(
        "x:X",
        "builtins:ValueError",
        "builtins:TypeError",
        "builtins:KeyError",
        "builtins:LookupError",
        *BUILTIN_TAIL,
    ),
    "builtin names from another module": _chain(
        "x:ValueError", "y:TypeError", "z:KeyError", *BUILTIN_TAIL
    ),
    "a builtin out of its order": _chain(
        "builtins:Exception", "builtins:ValueError", "builtins:BaseException", "builtins:object"
    ),
    "a name twice": _chain("x:E", "x:E", *BUILTIN_TAIL),
    "no object at the end": _chain(
        "builtins:ValueError", "builtins:Exception", "builtins:BaseException"
    ),
    "no BaseException": _chain("x:ValueError", "builtins:object"),
    "raised is not the first": {
        **_chain("builtins:ValueError", *BUILTIN_TAIL),
        "raised": "KeyError",
    },
    "a made-up builtin": _chain("builtins:NoSuchError", *BUILTIN_TAIL),
    "too many classes": _chain(*(f"x:E{i}" for i in range(canon.MAX_MRO)), *BUILTIN_TAIL),
    "a message over the cap": _chain(
        "builtins:ValueError", *BUILTIN_TAIL, message="bad" * canon.MESSAGE_CHARS
    ),
}


@pytest.mark.parametrize("name", sorted(WILDCARDS))
def test_a_raises_record_must_be_one_consistent_chain(name):
    for seal in (s for s in SEALS if s.op == "raises"):
        assert not seal.holds(WILDCARDS[name])
        assert isinstance(seal.shown(WILDCARDS[name]), str)


class ParseError(ValueError):
    pass


class AxisError(ValueError, IndexError):  # as numpy's: two builtin bases
    pass


def test_what_the_launcher_reports_holds_as_pytest_raises_would():
    by_name = {s.expected: s for s in SEALS if s.op == "raises"}
    value_error, parse_or_key = by_name[("ValueError",)], by_name[("ParseError", "KeyError")]
    assert value_error.holds(_raised(ValueError))
    assert value_error.holds(_raised(ParseError))  # a subclass, as pytest.raises accepts
    assert value_error.holds(_raised(AxisError))
    assert not value_error.holds(_raised(TypeError))
    assert parse_or_key.holds(_raised(ParseError, "a bad date"))
    assert parse_or_key.holds(_raised(KeyError, "bad"))
    assert not parse_or_key.holds(_raised(ParseError, "a good date"))  # match
    assert not parse_or_key.holds(_raised(ValueError, "bad"))
    assert Seal(1, CASE, 1, "raises", ("IOError",)).holds(_raised(FileNotFoundError))
    key_error = Seal(1, CASE, 1, "raises", ("KeyError",))
    assert key_error.holds(_raised(KeyError))
    assert not key_error.holds(_chain("builtins:ValueError", "x:KeyError", *BUILTIN_TAIL))
    record = _raised(ParseError, "x" * (2 * canon.MESSAGE_CHARS))
    assert record["mro"][0].endswith(":ParseError") and value_error.holds(record)
    assert value_error.shown(record).startswith("ParseError: x")


def test_records_over_the_caps_hold_against_nothing():
    big = {
        "v": canon.encode("x" * (canon.VALUE_BYTES + 10)),
        "is": None,
        "truth": True,
        "shown": "",
    }
    assert not Seal(1, CASE, 1, "==", "x" * (canon.VALUE_BYTES + 10)).holds(big)
    assert not Seal(1, CASE, 1, "in", ("x" * (canon.VALUE_BYTES + 10),)).holds(big)
    assert not SEALS[0].holds({"v": canon.encode((2020, 53)), "shown": "s" * 10**6})
    assert SEALS[0].holds({"v": canon.encode((2020, 53)), "shown": "(2020, 53)"})


# -- the property: any record, any seal, a verdict ------------------------------------------
TAGS = (
    "n",
    "q",
    "nan",
    "inf",
    "c",
    "s",
    "y",
    "l",
    "t",
    "e",
    "d",
    "dt",
    "dta",
    "date",
    "time",
    "td",
    "tz",
    "timea",
    "uuid",
    "opaque",
    "zz",
)
numbers = st.one_of(
    st.integers(-(10**30), 10**30).map(str),
    st.sampled_from(["0", "-0", "1", "-1", "9" * 5000, "1e9", "0x10", "", " 1", "nan"]),
)
leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**300), 10**300),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    numbers,
)
json_values = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=12,
)
canonical = st.recursive(
    st.one_of(
        st.builds(lambda n: {"n": n}, numbers),
        st.builds(lambda a, b: {"q": [a, b]}, numbers, numbers),
        st.builds(lambda t, b: {t: b}, st.sampled_from(TAGS), json_values),
    ),
    lambda inner: st.one_of(
        st.builds(
            lambda t, b: {t: b}, st.sampled_from(("l", "t", "e", "c")), st.lists(inner, max_size=4)
        ),
        st.builds(
            lambda b: {"d": b}, st.lists(st.lists(inner, min_size=2, max_size=2), max_size=3)
        ),
        st.builds(lambda t, b: {t: b}, st.sampled_from(TAGS), inner),
    ),
    max_leaves=16,
)
value_records = st.fixed_dictionaries(
    {"v": st.one_of(canonical, json_values)},
    optional={
        "is": st.one_of(st.sampled_from(sorted(canon.SINGLETONS)), json_values),
        "truth": json_values,
        "shown": json_values,
        "digest": json_values,
        "calls": json_values,
        "overflow": json_values,
        "zz": json_values,
    },
)
names = st.one_of(
    st.sampled_from(
        [
            "builtins:ValueError",
            "builtins:Exception",
            "builtins:BaseException",
            "builtins:object",
            "builtins:KeyError",
            "builtins:LookupError",
            "x:ParseError",
            "builtins:TypeError",
        ]
    ),
    st.text(max_size=20),
)
raises_records = st.fixed_dictionaries(
    {"raised": st.one_of(st.none(), names, json_values)},
    optional={
        "module": st.one_of(st.just("builtins"), json_values),
        "mro": st.one_of(st.lists(names, max_size=12), json_values),
        "message": st.one_of(st.text(max_size=40), json_values),
    },
)
records = st.one_of(value_records, raises_records, json_values)


def _every_verdict(record: object) -> None:
    for seal in SEALS:
        assert isinstance(seal.holds(record), bool)
        assert isinstance(seal.shown(record), str)
        outcome = judge_case(CASE, [seal], {(CASE, seal.cid): [record, ONCE]})
        assert isinstance(outcome, CheckOutcome) and outcome.checks == 1
        assert _verdict(seal, [record]).trusted
    try:
        line = json.dumps({"seal": SEALS[0].cid, "case": CASE, "got": record})
    except (ValueError, RecursionError):  # no JSON text (an int past str()'s digit limit,
        return  # nesting past json's): it cannot come through the channel
    try:
        ch = read_channel(line + '\n{"exit": 1}\n')
    except ChannelError:
        return
    v = judge(
        ch,
        exit_code=1,
        timed_out=False,
        truncated=False,
        exhausted=None,
        node_ids=[CASE],
        masked=Masked(list(CANARIES), seals=list(SEALS)),
    )
    assert not v.trusted and "forged_results" in v.flags  # the canaries never reported


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record=records)
@example(record=ZERO)
@example(record={"v": {"q": ["-5", "0"]}})
@example(record={"v": {"n": "9" * 5000}})
@example(record={"v": {"l": [{"n": "1"}] * 20000}})
@example(record={"v": {"inf": [1]}})
@example(record={"v": {"e": [{"d": []}]}})
@example(record={"v": {"d": [[{"l": []}, None]]}})
@example(record={"v": {"c": [{"n": "1"}, {"s": "x"}]}})
@example(record={"v": {"q": ["1", "3" * 400]}})
@example(record={"v": {"n": str(10**400)}})
@example(record={"v": {"s": "x" * 10**6}})
@example(record={"raised": 5, "message": ""})
@example(record={"raised": {"a": 1}, "message": ""})
@example(record={"raised": [], "message": 3})
@example(record=EVERY_NAME)
@example(record={"raised": "E", "module": "x", "mro": ["x:E"] * 10**4, "message": ""})
@example(record=[ZERO])
@example(record=math.nan)
def test_any_record_ends_in_a_verdict(record):
    _every_verdict(record)


def test_deeply_nested_records_end_in_a_verdict():
    for wrap in ({"l": None}, {"t": None}, {"e": None}):
        deep: object = {"n": "1"}
        for _ in range(3000):
            deep = {next(iter(wrap)): [deep]}
        _every_verdict({"v": deep})
    nested: object = []
    for _ in range(3000):
        nested = [nested]
    _every_verdict({"v": nested, "shown": nested})


def test_the_runtime_reports_each_value_once_and_keeps_the_equality_and_the_handles():
    """``equal`` reports the computed value and still asserts the equality with the local
    (a broken ``__eq__`` fails); ``at`` reports a handle's use and answers the helper's
    comparison, and gives any other argument the computed value back."""
    sent: list[dict] = []
    seals = launch.Seals(type("Sink", (), {"send": lambda self, **r: sent.append(r)})(), canon)
    module = seals.module()
    seals.case = CASE

    class Never:
        def __eq__(self, other):
            return False

    module.equal(7, 3, 3, True)
    never = Never()
    with pytest.raises(AssertionError):
        module.equal(8, never, 3, True)
    handle = module.handle(9, 10)
    assert module.at(handle, 1, "x") == handle and "x" == module.at(handle, 0, "x")
    assert module.at(4, 0, "x") == "x"
    assert [(r["seal"], r["got"].get("shown")) for r in sent] == [
        (7, "3"),
        (8, seals._shown(never)),
        (10, "'x'"),
        (9, "'x'"),
    ]


def test_the_runtime_sends_what_a_hidden_text_is_looked_for_in():
    """``contains`` reports a text or a container as it is, and another iterable (an object
    of the package's own with ``__iter__``) as the list of its items; an object whose
    iteration fails is reported as it is (the grader then finds no text in it)."""

    class Shelf:
        def __iter__(self):
            return iter(["clamped to 10 units", 3])

    class Broken:
        def __iter__(self):
            raise RuntimeError("no")

    sent: list[dict] = []
    seals = launch.Seals(type("Sink", (), {"send": lambda self, **r: sent.append(r)})(), canon)
    seals.case = CASE
    for cid, value in ((1, "a text"), (2, Shelf()), (3, Broken()), (4, {"k": 1})):
        seals.contains(cid, value)
    got = {r["seal"]: r["got"] for r in sent}
    assert canon.decode(got[1]["v"]) == "a text" and canon.decode(got[4]["v"]) == {"k": 1}
    assert canon.decode(got[2]["v"]) == ["clamped to 10 units", 3]
    assert "opaque" in got[3]["v"]
    s = Seal(9, CASE, 3, "contains", "clamped to 10 units")
    assert s.holds(got[2]) and not s.holds(got[3]) and not s.holds(got[1])
