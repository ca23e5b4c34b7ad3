"""Hidden verifier tests: slugify()'s max_length option."""

from slugify import slugify


def test_short_slugs_are_not_cut():
    assert slugify("hello world", max_length=11) == "hello-world"
    assert slugify("hello world", max_length=50) == "hello-world"


def test_word_ending_at_the_limit_is_kept():
    assert slugify("abc def gh", max_length=7) == "abc-def"
    assert slugify("Über Straße", max_length=4) == "uber"


def test_cut_leaves_no_part_of_a_long_separator():
    assert slugify("Hello World", sep="___", max_length=6) == "hello"
