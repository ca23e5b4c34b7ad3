"""Hidden verifier tests for csvline."""

from csvline import parse, parse_line


def test_delimiter_inside_quotes_is_text():
    assert parse_line('9,"Doe, John",Bergen') == ["9", "Doe, John", "Bergen"]
    assert parse_line('"a,b,c"') == ["a,b,c"]
    assert parse_line('x,",",y') == ["x", ",", "y"]


def test_doubled_quote_is_a_literal_quote():
    assert parse_line('1,"He said ""hi""",2') == ["1", 'He said "hi"', "2"]
    assert parse_line('""""') == ['"']


def test_custom_delimiter_and_quote():
    assert parse_line("a;'b;c';d", delimiter=";", quote="'") == ["a", "b;c", "d"]


def test_parse_many_lines():
    text = 'name,note\n"Lee, Ann","likes ""tea"""\nBo,\n'
    assert parse(text) == [["name", "note"], ["Lee, Ann", 'likes "tea"'], ["Bo", ""]]


def test_plain_fields():
    assert parse_line("id,name,city") == ["id", "name", "city"]
    assert parse_line("one") == ["one"]


def test_quoted_field_without_delimiter():
    assert parse_line('"Oslo",2024') == ["Oslo", "2024"]
    assert parse_line('"",x') == ["", "x"]


def test_quote_inside_an_unquoted_field_is_text():
    assert parse_line('12" pizza,large') == ['12" pizza', "large"]
    assert parse_line('a,b"c,d') == ["a", 'b"c', "d"]
    assert parse_line("it's,ok", quote="'") == ["it's", "ok"]


def test_spaces_in_unquoted_fields_are_kept():
    assert parse_line("a, b ,c") == ["a", " b ", "c"]
    assert parse_line(" x") == [" x"]


def test_empty_fields_are_kept():
    assert parse_line("a,,c") == ["a", "", "c"]
    assert parse_line(",") == ["", ""]
    assert parse_line("") == [""]


def test_tab_delimiter():
    assert parse_line("a\tb\t", delimiter="\t") == ["a", "b", ""]
