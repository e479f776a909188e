"""Text normalisation: matching forms, answer forms and the empty-cell rule."""

import pytest

from tapas_tf.data.text_normalization import (
    format_text,
    is_empty_text,
    normalize_answer_text,
    normalize_for_match,
)


@pytest.mark.parametrize("text,expected", [
    ("  Café  DU   Monde ", "cafe du monde"),
    ("“quoted” – dash", '"quoted" - dash'),
    ("km²", "km²"),  # A superscript is not folded into a digit.
    ("It’s", "it's"),
])
def test_normalize_for_match(text, expected):
    assert normalize_for_match(text) == expected


@pytest.mark.parametrize("text,expected", [
    ("Paris (France)", "paris"),
    ("Gold[1]", "gold"),
    ('"Hello"', "hello"),
    ("St. Louis Browns.", "st. louis browns"),
    ("km²", "km2"),
])
def test_normalize_answer_text(text, expected):
    assert normalize_answer_text(text) == expected


@pytest.mark.parametrize("text,empty", [
    ("", True), ("  ", True), ("n/a", True), ("N/A", True), ("-", True), ("—", True), ("?", True),
    ("nan", True), ("0", False), ("a", False), ("--x", False),
])
def test_empty_cells(text, empty):
    assert is_empty_text(text) == empty


def test_format_text_strips_punctuation():
    assert format_text("Hello, World!") == "hello world"
    assert format_text("under_score") == "under score"
