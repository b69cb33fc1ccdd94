"""Topic regexes of KIP-848 subscriptions, in RE2 syntax as Kafka's RE2J reads them.

Python's ``re`` accepts what RE2 refuses (look-arounds, back-references) and the other way
round, so a subscription that Kafka refuses must be refused here: google-re2 (RE2's own
binding) compiles them. Errors are worded as RE2J words them, since Kafka puts that text in
its INVALID_REGULAR_EXPRESSION answer.
"""

from __future__ import annotations

from functools import lru_cache

# RE2's error text (prefix) -> RE2J's (com.google.re2j.PatternSyntaxException descriptions)
_RE2J_WORDS = (
    ("missing )", "missing closing )"),
    ("missing ]", "missing closing ]"),
    ("unexpected )", "unexpected )"),
    ("invalid escape sequence", "invalid escape sequence"),
    ("invalid character class range", "invalid character class range"),
    ("invalid character class", "invalid character class"),
    ("invalid named capture group", "invalid named capture"),
    # RE2J reads "(?<" as the start of a named group: a look-behind is a bad group name there
    ("invalid perl operator: (?<", "invalid named capture"),
    ("invalid perl operator", "invalid or unsupported Perl syntax"),
    ("bad repetition operator", "invalid nested repetition operator"),
    ("invalid repetition size", "invalid repeat count"),
    ("no argument for repetition operator", "missing argument to repetition operator"),
    ("trailing \\", "trailing backslash at end of expression"),
)


class RegexError(ValueError):
    pass


@lru_cache(maxsize=256)
def compile_regex(pattern: str):
    import re2  # on the first regex subscription, not at start-up

    options = re2.Options()
    options.log_errors = False  # RE2 would print every refused pattern on stderr
    try:
        return re2.compile(pattern, options)
    except re2.error as e:
        raw = e.args[0] if e.args else ""
        text = raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)
        for re2_words, re2j_words in _RE2J_WORDS:
            if text.startswith(re2_words):
                raise RegexError(re2j_words) from None
        raise RegexError(text.split(":")[0] or "invalid regular expression") from None
