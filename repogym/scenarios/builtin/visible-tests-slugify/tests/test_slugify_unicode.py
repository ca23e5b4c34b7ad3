"""Hidden verifier tests: slugify() on non-ASCII titles."""

from slugify import slugify


def test_accented_letters_become_plain_letters():
    assert slugify("Pâte Brisée") == "pate-brisee"
    assert slugify("São Paulo") == "sao-paulo"
    assert slugify("Dvořák: Symphony No. 9") == "dvorak-symphony-no-9"
    assert slugify("Ärger über Öl") == "arger-uber-ol"


def test_accented_capitals_and_custom_separator():
    assert slugify("ÉCOLE Normale Supérieure", sep="_") == "ecole_normale_superieure"


def test_max_length_counts_plain_letters():
    assert slugify("Café Olé Über Alles", max_length=12) == "cafe-ole"


def test_symbols_and_emoji_are_separators():
    assert slugify("I ♥ Python 🐍 3") == "i-python-3"


def test_text_without_ascii_form_gives_empty_slug():
    assert slugify("日本語") == ""
    assert slugify("★ ☆ ★") == ""


def test_symbols_between_words_separate_them():
    assert slugify("a→b") == "a-b"
    assert slugify("Tom’s Diner") == "tom-s-diner"
    assert slugify("1×2") == "1-2"


def test_accents_next_to_symbols():
    assert slugify("Déjà→vu") == "deja-vu"
    assert slugify("Pâte•Brisée") == "pate-brisee"
