"""Canonical values: one encoding shared by the sealed checks and the grader.

A sealed check (see ``repogym.grading.seal``) runs inside the grading run's sandbox without the
expected value; it sends the value the code under test computed, encoded here, and the
grader compares it with the hidden expected value, encoded the same way. Two values
encode alike exactly when Python's ``==`` holds between them for the types a test literal
can have: numbers compare by their exact rational value (``1 == 1.0 == True``,
``Fraction(1, 2) == 0.5``), lists and tuples stay distinct, sets and dicts are compared
without order, and the standard library's value types (``datetime``'s, ``Decimal``,
``Fraction``, ``UUID``) by what their ``==`` compares. Any other object is ``opaque``: it
equals no expected value.

This file runs inside the sandbox: it imports only the standard library.
"""

from __future__ import annotations

import datetime as dt
import decimal
import fractions
import hashlib
import json
import math
import uuid
from collections.abc import Callable

#: Nesting deeper than this is encoded as opaque (and is not canonical data to decode).
MAX_DEPTH = 64
#: A sealed value whose canonical text is longer than this travels as its digest; the
#: grader holds a longer value, or a longer text inside one, against no expectation.
VALUE_BYTES = 64 << 10
#: Most class names a ``raises`` record may list (the exception's class and its bases).
MAX_MRO = 32
#: Longest exception message a ``raises`` record may carry (the launcher cuts it there).
MESSAGE_CHARS = 4096
#: Singletons that ``is`` compares with.
SINGLETONS = {"None": None, "True": True, "False": False, "Ellipsis": Ellipsis}


def _same_eq(value: object, base: type) -> bool:
    """True when ``value`` is a ``base`` whose ``==`` is ``base``'s own."""
    return isinstance(value, base) and type(value).__eq__ is base.__eq__


def _number(value: object) -> object | None:
    """The exact encoding of a number, or None if ``value`` is not one."""
    if isinstance(value, bool):
        return {"n": str(int(value))}
    if _same_eq(value, int):
        return {"n": str(int(value))}
    if _same_eq(value, float) or isinstance(value, decimal.Decimal | fractions.Fraction):
        if isinstance(value, decimal.Decimal) and not value.is_finite():
            value = float(value)
        if isinstance(value, float):
            if math.isnan(value):
                return {"nan": True}
            if math.isinf(value):
                return {"inf": 1 if value > 0 else -1}
        num, den = value.as_integer_ratio()
        return {"n": str(num)} if den == 1 else {"q": [str(num), str(den)]}
    if _same_eq(value, complex):
        if value.imag == 0:
            return _number(value.real)
        return {"c": [_number(value.real), _number(value.imag)]}
    return None


def _micros(delta: dt.timedelta) -> str:
    return str((delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds)


def _moment(value: object) -> object | None:
    """The encoding of a ``datetime`` value type, or None.

    ``==`` between aware datetimes compares instants; naive and aware never compare equal;
    a ``date`` never equals a ``datetime``; ``timezone`` objects compare by their offset.
    """
    if _same_eq(value, dt.datetime):
        off = value.utcoffset()
        if off is None:
            return {"dt": value.replace(fold=0).isoformat()}
        return {"dta": (value.replace(tzinfo=None) - off).isoformat()}
    if _same_eq(value, dt.date):
        return {"date": value.isoformat()}
    if _same_eq(value, dt.timedelta):
        return {"td": _micros(value)}
    if _same_eq(value, dt.time):
        off = value.utcoffset()
        if off is None:
            return {"time": value.replace(fold=0).isoformat()}
        base = dt.datetime.combine(dt.date(2000, 1, 1), value.replace(tzinfo=None))
        return {"timea": _micros(base - dt.datetime(2000, 1, 1) - off)}
    if _same_eq(value, dt.timezone):
        return {"tz": _micros(value.utcoffset(None))}
    if _same_eq(value, uuid.UUID):
        return {"uuid": value.hex}
    return None


def encode(value: object, depth: int = 0) -> object:
    """``value`` as canonical JSON data (see the module docstring)."""
    if depth > MAX_DEPTH:
        return {"opaque": "too deep"}
    if value is None:
        return None
    if (num := _number(value)) is not None:
        return num
    if (moment := _moment(value)) is not None:
        return moment
    if _same_eq(value, str):
        return {"s": str.__str__(value)}
    if _same_eq(value, bytes):
        return {"y": bytes(value).hex()}
    if _same_eq(value, list):
        return {"l": [encode(v, depth + 1) for v in list.__iter__(value)]}
    if _same_eq(value, tuple):
        return {"t": [encode(v, depth + 1) for v in tuple.__iter__(value)]}
    if isinstance(value, set | frozenset) and type(value).__eq__ in (set.__eq__, frozenset.__eq__):
        items = [encode(v, depth + 1) for v in value]
        return {"e": sorted(items, key=dumps)}
    if _same_eq(value, dict):
        items = [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in dict.items(value)]
        return {"d": sorted(items, key=lambda kv: dumps(kv[0]))}
    return {"opaque": type(value).__qualname__}


def dumps(data: object) -> str:
    """The one text of canonical data (sorted keys, no spaces)."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def digest(data: object) -> str:
    """sha256 of :func:`dumps`."""
    return hashlib.sha256(dumps(data).encode()).hexdigest()


def singleton(value: object) -> str | None:
    """The name of ``value`` if it is one of :data:`SINGLETONS` (for ``is``)."""
    return next((name for name, obj in SINGLETONS.items() if value is obj), None)


class NotCanonical(ValueError):
    """Data that is not canonical data (or holds an opaque value): it equals no literal."""


def decode(data: object) -> object:
    """Python values back from canonical data (for comparisons other than ``==``).

    Total over anything JSON (or Python) can hold: every input gives a value or
    :class:`NotCanonical`, never another exception. The data may come from the sandbox, so
    it is checked, not trusted: a zero denominator, a malformed date, a wrong type, a tag
    that does not exist, nesting deeper than :data:`MAX_DEPTH` and numbers too large to
    compare are all :class:`NotCanonical`.

    Raises:
        NotCanonical: the data holds an opaque value or is not canonical data.
    """
    try:
        return _decode(data, 0)
    except NotCanonical:
        raise
    except (
        ArithmeticError,
        LookupError,
        TypeError,
        ValueError,
        AttributeError,
        RecursionError,
        MemoryError,
    ) as e:
        raise NotCanonical(f"not canonical data ({type(e).__name__})") from None


def _text(body: object) -> str:
    if not isinstance(body, str) or len(body) > VALUE_BYTES:
        raise NotCanonical("a text body is not a string of a bounded length")
    return body


def _integer(body: object) -> int:
    text = _text(body)
    if not text.lstrip("-").isdigit() or not text.isascii():
        raise NotCanonical("an integer body is not a decimal integer")
    return int(text)


def _items(body: object) -> list:
    if not isinstance(body, list):
        raise NotCanonical("a container body is not a list")
    return body


def _decode(data: object, depth: int) -> object:
    if depth > MAX_DEPTH:
        raise NotCanonical("nested too deep")
    if data is None:
        return None
    if not isinstance(data, dict) or len(data) != 1:
        raise NotCanonical(f"not canonical data: {str(data)[:80]}")
    ((tag, body),) = data.items()
    decoder = _DECODERS.get(tag)
    if decoder is None:
        raise NotCanonical(f"an opaque value ({str(body)[:80]}) equals no literal")
    return decoder(body, depth + 1)


def _fraction(body: object, sub: int) -> object:
    num, den = (_integer(b) for b in _pair(body))
    if den <= 0:
        raise NotCanonical("a fraction's denominator is not positive")
    q = fractions.Fraction(num, den)
    try:
        f = float(q)
    except OverflowError:  # past float's range: compared exactly
        return q
    return f if fractions.Fraction(f) == q else q


def _infinity(body: object, sub: int) -> float:
    if body not in (1, -1) or isinstance(body, bool):
        raise NotCanonical("an infinity's sign is not 1 or -1")
    return math.inf if body > 0 else -math.inf


def _complex(body: object, sub: int) -> complex:
    real, imag = (_decode(b, sub) for b in _pair(body))
    if not all(isinstance(x, int | float) for x in (real, imag)):
        raise NotCanonical("a complex number's parts are not real numbers")
    return complex(real, imag)


def _dict(body: object, sub: int) -> dict:
    return {_hashable(_decode(k, sub)): _decode(v, sub) for k, v in map(_pair, _items(body))}


def _time_aware(body: object, sub: int) -> dt.time:
    delta = dt.timedelta(microseconds=_integer(body))
    return (dt.datetime(2000, 1, 1) + delta).time().replace(tzinfo=dt.UTC)


#: tag -> the decoder of its body (given the depth of the body's items).
_DECODERS: dict[str, Callable[[object, int], object]] = {
    "n": lambda body, sub: _integer(body),
    "q": _fraction,
    "nan": lambda body, sub: math.nan,
    "inf": _infinity,
    "c": _complex,
    "s": lambda body, sub: _text(body),
    "y": lambda body, sub: bytes.fromhex(_text(body)),
    "l": lambda body, sub: [_decode(v, sub) for v in _items(body)],
    "t": lambda body, sub: tuple(_decode(v, sub) for v in _items(body)),
    "e": lambda body, sub: {_hashable(_decode(v, sub)) for v in _items(body)},
    "d": _dict,
    "dt": lambda body, sub: dt.datetime.fromisoformat(_text(body)),
    "date": lambda body, sub: dt.date.fromisoformat(_text(body)),
    "time": lambda body, sub: dt.time.fromisoformat(_text(body)),
    "dta": lambda body, sub: dt.datetime.fromisoformat(_text(body)).replace(tzinfo=dt.UTC),
    "td": lambda body, sub: dt.timedelta(microseconds=_integer(body)),
    "tz": lambda body, sub: dt.timezone(dt.timedelta(microseconds=_integer(body))),
    "timea": _time_aware,
    "uuid": lambda body, sub: uuid.UUID(hex=_text(body)),
}


def _pair(body: object) -> list:
    if not isinstance(body, list) or len(body) != 2:
        raise NotCanonical("a pair is not a list of two")
    return body


def _hashable(value: object) -> object:
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, set):
        return frozenset(value)
    if isinstance(value, dict):  # no literal holds one as a set item or key
        raise NotCanonical("a dict inside a set or as a key")
    return value
