"""Hidden verifier tests for urlquery.py."""

from urlquery import decode_component, first_value, parse_query


def test_repeated_keys_keep_all_values_in_order():
    assert parse_query("tag=a&tag=b&x=1&tag=c") == {"tag": ["a", "b", "c"], "x": ["1"]}
    assert first_value("tag=a&tag=b", "tag") == "a"


def test_plus_decodes_to_space():
    assert parse_query("q=hello+world") == {"q": ["hello world"]}
    assert parse_query("first+name=Ada") == {"first name": ["Ada"]}


def test_percent_escapes_are_utf8():
    assert parse_query("name=Jos%C3%A9") == {"name": ["José"]}
    assert decode_component("%E2%82%AC5") == "€5"


def test_malformed_escapes_are_kept_literally():
    assert parse_query("discount=50%off") == {"discount": ["50%off"]}
    assert decode_component("100%") == "100%"
    assert decode_component("%4") == "%4"


def test_escaped_plus_stays_plus():
    assert parse_query("expr=1%2B1") == {"expr": ["1+1"]}


def test_ascii_escapes():
    assert parse_query("path=%2Fhome%2Fuser&eq=a%3Db") == {"path": ["/home/user"], "eq": ["a=b"]}


def test_leading_question_mark_and_empty_pairs():
    assert parse_query("?a=1&&b=") == {"a": ["1"], "b": [""]}
    assert parse_query("") == {}


def test_key_without_equals_sign():
    assert parse_query("flag&x=1") == {"flag": [""], "x": ["1"]}


def test_first_value_missing_key():
    assert first_value("a=1", "b") is None
    assert first_value("a=1", "b", "dflt") == "dflt"


def test_unescaped_non_ascii_text_is_kept():
    assert parse_query("city=Zürich&price=5€") == {"city": ["Zürich"], "price": ["5€"]}


def test_escapes_next_to_unescaped_non_ascii_text():
    assert parse_query("name=Jos%C3%A9+Müller") == {"name": ["José Müller"]}
