"""Hidden verifier tests for Tokenizer."""

import pytest
from tokenizer import TokenizeError, Tokenizer


def test_second_call_starts_fresh():
    tokenizer = Tokenizer()
    assert tokenizer.tokenize("x * 2") == ["x", "*", "2"]
    assert tokenizer.tokenize("b") == ["b"]
    assert tokenizer.tokenize("") == []


def test_earlier_results_are_not_changed_by_later_calls():
    tokenizer = Tokenizer()
    first = tokenizer.tokenize("x*2")
    tokenizer.tokenize("y")
    assert first == ["x", "*", "2"]


def test_error_does_not_poison_later_calls():
    tokenizer = Tokenizer()
    with pytest.raises(TokenizeError):
        tokenizer.tokenize("(1 + 2")
    assert tokenizer.tokenize("3 + 4") == ["3", "+", "4"]
    with pytest.raises(TokenizeError):
        tokenizer.tokenize("rate $ 2")
    assert tokenizer.tokenize("rate * 2") == ["rate", "*", "2"]
    with pytest.raises(TokenizeError):
        tokenizer.tokenize("abc ) (")
    assert tokenizer.tokenize("(abc)") == ["(", "abc", ")"]


def test_tokenizes_a_full_expression():
    assert Tokenizer().tokenize("2*(base_price + 10.5)/qty") == [
        "2", "*", "(", "base_price", "+", "10.5", ")", "/", "qty",
    ]


def test_whitespace_separates_and_is_dropped():
    assert Tokenizer().tokenize("  a\tb \n") == ["a", "b"]
    assert Tokenizer().tokenize("   ") == []


def test_unbalanced_brackets_are_rejected():
    for text in ("(1 + 2", "1 + 2)", ")(", "((x)"):
        with pytest.raises(TokenizeError):
            Tokenizer().tokenize(text)


def test_unexpected_character_is_rejected():
    with pytest.raises(TokenizeError, match="position 2"):
        Tokenizer().tokenize("a $ b")


def test_unclosed_bracket_error_gives_the_last_open_position():
    with pytest.raises(TokenizeError, match="position 5"):
        Tokenizer().tokenize("(1 + (2")
