"""Hidden verifier tests for urlpath.join()."""

from urlpath import join, split


def test_no_double_slash_where_segments_meet():
    assert join("/v2/", "/items") == "/v2/items"
    assert join("api/", "v1") == "api/v1"
    assert join("api", "/v1") == "api/v1"


def test_many_segments_with_slashes_on_both_sides():
    assert join("/a/", "/b/", "/c/", "d") == "/a/b/c/d"


def test_root_followed_by_segments():
    assert join("/", "users") == "/users"
    assert join("/", "/users/") == "/users/"


def test_every_slash_where_segments_meet_is_merged():
    assert join("a//", "//b") == "a/b"
    assert join("/v2//", "items") == "/v2/items"
    assert join("a", "///b///", "c") == "a/b/c"


def test_slashes_inside_a_segment_are_left_alone():
    assert join("http://example.com/", "/a") == "http://example.com/a"
    assert join("//cdn.example.com", "lib.js") == "//cdn.example.com/lib.js"


def test_plain_segments():
    assert join("api", "v1", "users") == "api/v1/users"


def test_leading_slash_of_first_segment_is_kept():
    assert join("/api", "v1") == "/api/v1"


def test_trailing_slash_of_last_segment_is_kept():
    assert join("api", "users/") == "api/users/"
    assert join("/static", "css/") == "/static/css/"


def test_root_alone_stays_root():
    assert join("/") == "/"
    assert join("", "/") == "/"


def test_empty_segments_are_skipped():
    assert join("a", "", "b") == "a/b"
    assert join() == ""
    assert join("", "") == ""


def test_split_ignores_empty_segments():
    assert split("/a//b/") == ["a", "b"]
    assert split("/") == []


def test_inner_double_slashes_are_not_collapsed():
    assert join("a//b", "c//d") == "a//b/c//d"
