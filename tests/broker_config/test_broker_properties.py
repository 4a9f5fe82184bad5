"""The Java .properties parser (`broker.config.parse_properties`) and writer."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.config import ConfigError, format_properties, load_properties, parse_properties


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a=1", {"a": "1"}),
        ("a = 1", {"a": "1"}),
        ("a: 1", {"a": "1"}),
        ("a 1", {"a": "1"}),
        ("a\t\f1", {"a": "1"}),
        ("   a=1", {"a": "1"}),
        # After a whitespace-ended key, one = or : may still follow.
        ("a = = 1", {"a": "= 1"}),
        ("a := 1", {"a": "= 1"}),
        ("a  :  1", {"a": "1"}),
        ("a==1", {"a": "=1"}),
        # A key alone has an empty value.
        ("a", {"a": ""}),
        ("a=", {"a": ""}),
        ("a   ", {"a": ""}),
        # Trailing whitespace of a value is kept (Java keeps it; BrokerConfig trims).
        ("a=1  ", {"a": "1  "}),
        # Separators and spaces inside keys need a backslash.
        (r"a\=b=1", {"a=b": "1"}),
        (r"a\:b=1", {"a:b": "1"}),
        (r"a\ b=1", {"a b": "1"}),
        # Values may contain separators freely.
        ("url=PLAINTEXT://h:9092", {"url": "PLAINTEXT://h:9092"}),
        ("a=b=c:d", {"a": "b=c:d"}),
        # Later keys win.
        ("a=1\na=2", {"a": "2"}),
    ],
)
def test_key_value_separators(text: str, expected: dict[str, str]) -> None:
    assert parse_properties(text) == expected


def test_comments_and_blank_lines() -> None:
    text = "# comment\n! also a comment\n   # indented comment\n\n   \na=1\nb=2 # not a comment\n"
    assert parse_properties(text) == {"a": "1", "b": "2 # not a comment"}


def test_comment_line_ending_in_backslash_does_not_continue() -> None:
    assert parse_properties("# comment \\\na=1") == {"a": "1"}


def test_line_continuation_drops_leading_whitespace_of_next_line() -> None:
    text = "log.dirs=/a,\\\n         /b,\\\n\t/c\nnext=1"
    assert parse_properties(text) == {"log.dirs": "/a,/b,/c", "next": "1"}


def test_continued_line_starting_with_hash_is_not_a_comment() -> None:
    assert parse_properties("a=x\\\n#y") == {"a": "x#y"}


def test_even_backslashes_do_not_continue() -> None:
    assert parse_properties("a=x\\\\\nb=2") == {"a": "x\\", "b": "2"}


def test_backslash_at_end_of_file_is_dropped() -> None:
    assert parse_properties("a=x\\") == {"a": "x"}


def test_continuation_across_key() -> None:
    assert parse_properties("bro\\\n  ker.id=1") == {"broker.id": "1"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r"a=x\ty", "x\ty"),
        (r"a=x\ny", "x\ny"),
        (r"a=x\ry", "x\ry"),
        (r"a=x\fy", "x\fy"),
        (r"a=x\\y", "x\\y"),
        (r"a=\u0041\u00e9", "Aé"),
        (r"a=\uD83D\uDE00", "\U0001f600"),  # a UTF-16 surrogate pair
        (r"a=\q\#\!", "q#!"),  # any other escaped character stands for itself
        (r"a=\ leading", " leading"),
    ],
)
def test_escapes(text: str, expected: str) -> None:
    assert parse_properties(text) == {"a": expected}


def test_malformed_unicode_escape_is_an_error() -> None:
    with pytest.raises(ConfigError, match=r"\\uXXXX"):
        parse_properties("a=\\u12G4")
    with pytest.raises(ConfigError, match="line 2"):
        parse_properties("ok=1\na=\\u12")


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_line_terminators(newline: str) -> None:
    assert parse_properties(newline.join(["a=1", "b=2\\", " 3"])) == {"a": "1", "b": "23"}


def test_load_reads_iso_8859_1(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_bytes("rack=caf\xe9\n".encode("latin-1"))
    assert load_properties(path) == {"rack": "café"}


def test_format_then_parse_special_cases() -> None:
    props = {
        "plain": "value",
        "key with spaces": " leading and trailing ",
        "k=:#!": "v=:#!",
        "tabs\t": "\t\n\r\f",
        "back\\slash": "c:\\dir\\",
        "unicode": "é€\U0001f600",
        "": "",
    }
    assert parse_properties(format_properties(props, header="a\nb")) == props


_text = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=20)


@given(st.dictionaries(_text, _text, max_size=8))
def test_format_parse_round_trip(props: dict[str, str]) -> None:
    assert parse_properties(format_properties(props)) == props


@given(st.text(max_size=200))
def test_parser_never_crashes_except_on_bad_unicode_escapes(text: str) -> None:
    try:
        parse_properties(text)
    except ConfigError as e:
        assert "\\uXXXX" in str(e)
