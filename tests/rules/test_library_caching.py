"""The libraries' parsers keep only short texts, and only the last few thousand: what pods say cannot grow them."""

from __future__ import annotations

import pytest

from rulesched.rules.cel.libs import cidr, ip, quantity, regex, semver, urls
from rulesched.rules.cel.libs.caching import keep_short


def counting_parser() -> tuple[list[str], object]:
    seen: list[str] = []

    @keep_short(2, 5)
    def parse(text: str) -> str:
        seen.append(text)
        if text == "bad":
            raise ValueError("bad")
        return text.upper()

    return seen, parse


def test_a_short_text_is_parsed_once() -> None:
    seen, parse = counting_parser()
    assert [parse("ab"), parse("ab")] == ["AB", "AB"]  # type: ignore[operator]
    assert seen == ["ab"]


def test_a_long_text_is_parsed_each_time() -> None:
    seen, parse = counting_parser()
    assert [parse("abcdef"), parse("abcdef")] == ["ABCDEF", "ABCDEF"]  # type: ignore[operator]
    assert seen == ["abcdef", "abcdef"]


def test_only_the_last_texts_are_kept() -> None:
    seen, parse = counting_parser()
    for text in ("a", "b", "c", "a"):
        parse(text)  # type: ignore[operator]
    assert seen == ["a", "b", "c", "a"], "'a' was forgotten when 'c' came (two are kept)"


def test_a_text_that_does_not_parse_raises_each_time() -> None:
    seen, parse = counting_parser()
    for _ in range(2):
        with pytest.raises(ValueError, match="bad"):
            parse("bad")  # type: ignore[operator]
    assert seen == ["bad", "bad"]


@pytest.mark.parametrize(
    ("parse", "short", "long"),
    [
        (quantity.value, "1Gi", "1" * 100),
        (semver.parse, "1.2.3", "1.2.3-" + "a" * 300),
        (regex.compiled, "^a+$", "a" * 300),
        (urls.parse, "https://example.com/", "https://example.com/" + "a" * 3000),
        (ip.parse, "10.0.0.1", None),
        (cidr.parse, "10.0.0.0/8", None),
    ],
    ids=["quantity", "semver", "regex", "urls", "ip", "cidr"],
)
def test_every_library_parser_keeps_short_texts_only(parse: object, short: str, long: str | None) -> None:
    assert parse(short) is parse(short), "a short text is kept"  # type: ignore[operator]
    if long is not None:
        assert parse(long) is not parse(long), "a long text is parsed each time"  # type: ignore[operator]
