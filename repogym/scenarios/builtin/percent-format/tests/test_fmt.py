"""Hidden verifier tests for fmt.py."""

from fmt import format_percent, format_progress


def test_progress_never_shows_100_before_done():
    assert format_progress(9995, 10000) == "99.9%"
    assert format_progress(999999, 1000000) == "99.9%"
    assert format_progress(199, 200, digits=0) == "99%"


def test_progress_rounds_down():
    assert format_progress(2, 3) == "66.6%"
    assert format_progress(2, 3, digits=2) == "66.66%"
    assert format_progress(1, 7, digits=3) == "14.285%"


def test_percent_has_no_negative_zero():
    assert format_percent(-0.0004) == "0.0%"
    assert format_percent(-0.0) == "0.0%"
    assert format_percent(-0.001, digits=0) == "0%"
    assert format_percent(-0.000001, digits=3) == "0.000%"


def test_percent_rounds_to_nearest():
    assert format_percent(0.256) == "25.6%"
    assert format_percent(1 / 3, digits=2) == "33.33%"
    assert format_percent(2 / 3) == "66.7%"
    assert format_percent(0.5, digits=0) == "50%"
    assert format_percent(1) == "100.0%"


def test_negative_percentages_keep_their_sign():
    assert format_percent(-0.25) == "-25.0%"
    assert format_percent(-0.0005, digits=2) == "-0.05%"
    assert format_percent(-0.012) == "-1.2%"


def test_progress_exact_values():
    assert format_progress(29, 100) == "29.0%"
    assert format_progress(57, 100, digits=0) == "57%"
    assert format_progress(10, 10) == "100.0%"
    assert format_progress(0, 10) == "0.0%"
    assert format_progress(1, 8, digits=3) == "12.500%"


def test_progress_of_nothing_is_complete():
    assert format_progress(0, 0) == "100.0%"
    assert format_progress(0, 0, digits=0) == "100%"
