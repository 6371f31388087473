"""Showing untrusted text (prompts, completions) to a judge without letting it steer the reply.

Two defences work together:
- every block of untrusted text sits between marker lines carrying a nonce derived from a hash
  of the whole request, so a completion cannot know (let alone contain) the marker that would
  close its own block;
- any line of untrusted text that the reply parsers would read as a section header, a labelled
  field or a marker is shown quoted ("> " prefix). The parsers ignore quoted lines, so a judge
  that echoes such a line cannot hand us a rating that came from the completion.

The line shapes below are therefore shared by the neutraliser, the parsers and the injection
detector (`llm_feedback.replies.injection`, which also reads prose, hidden channels and
verdicts written as sentences). Both the neutraliser and the detector decide on the text as a
judge reads it (`llm_feedback.replies.normalise`): lookalike letters, invisible characters,
full-width forms and exotic line breaks change nothing. Detection also knows answer-shaped
lines the parsers never read but a judge might obey: ratings labelled in other languages
(`FOREIGN_RATING_LABELS`), Markdown tables of ratings, JSON with rating keys.

What the judge is shown is the text exactly as it was written: the normalised form only
decides which lines to quote. A math or chemistry answer ("2³ = 8", "H₂O", "½") must reach the
judge as its author wrote it, so every character and every line break is kept, and a
quoted line is its original line behind "> ".
"""

from __future__ import annotations

import functools
import hashlib
import json
import re

from llm_feedback.replies.normalise import (
    FOREIGN_RATING_LABELS,
    FOREIGN_TEXT_WORDS,
    fold,
    label_pattern,
    lines_and_breaks,
    normalise,
)

# Markdown decoration a judge may put before a header or label: bullets, numbering, headings,
# bold/italic openers. A leading ">" is deliberately absent: quoted lines are never parsed.
LINE_DECORATION = r"^\s*(?:[-*+•]\s+|\d{1,2}[.)]\s+)?(?:#{1,6}\s*)?(?:[*_]{1,3}\s*)?"

# "### Text 2", "**Text 2:**", "1. Text 2 - ...", "Evaluation for Text 2", "Text #2 assessment".
SECTION_HEADER = re.compile(
    LINE_DECORATION
    + r"(?:(?:output|evaluation|assessment|rating|ratings|feedback)\s+(?:for|of)\s+)?"
    r"text\s*#?\s*(?P<number>\d+)"
    r"(?:\s+(?:evaluation|assessment|rating|feedback))?"
    r"\s*[*_]*\s*(?:(?:[:：)\-–—]|\*\*)\s*(?P<rest>.*?))?\s*$",
    re.IGNORECASE,
)

# Longer labels first, so that "Type rationale" is never read as "Type".
_LABELS = {
    "type_rationale": r"type\s+rationale|rationale\s+for\s+(?:the\s+)?types?",
    "rating_rationale": r"rating\s+rationale|rationale\s+for\s+(?:the\s+)?rating",
    "type": r"types?",
    "rationale": r"rationale|justification|explanation",
    "rating": r"ratings?|score",
}
LABELLED_FIELD = re.compile(
    LINE_DECORATION
    + "(?:"
    + "|".join(f"(?P<{name}>{pattern})" for name, pattern in _LABELS.items())
    # an optional aside such as "Rating (1-5):"
    + r")(?:\s*\([^)]*\))?\s*[*_]*\s*[:：=\-–—]\s*[*_]*\s*(?P<value>.*?)\s*$",
    re.IGNORECASE,
)
FIELD_NAMES = tuple(_LABELS)

# "Rating 4" / "Rating N/A" without a separator are common enough to accept.
BARE_RATING = re.compile(
    LINE_DECORATION + r"(?:rating|score)\s+(?P<value>(?:\d|n\s*/?\s*a\b).*?)\s*$",
    re.IGNORECASE,
)

OVERALL_SCORE_LINE = re.compile(
    LINE_DECORATION + r"(?:overall|final)\s+(?:score|rating|grade)\b", re.IGNORECASE
)

_MARKER_FRAGMENT = re.compile(r"<<<|>>>")
_FOREIGN_LABEL = label_pattern(FOREIGN_RATING_LABELS)
# The keys of every judge's JSON answer (in either quote), and MT-Bench's "[[8]]" verdicts.
_JSON_ANSWER_FRAGMENT = re.compile(
    r"[\"']\s*(?:ratings?|overall_score|feedback|scores?|score_[ab]|correct|verdict|winner"
    r"|extracted_final_answer|confidence|text_\d+|" + _FOREIGN_LABEL + r")\s*[\"']",
    re.IGNORECASE,
)
# "Bewertung: 5", "Note : 5", "评分：5": a rating labelled in another language, then a number.
_FOREIGN_RATING = re.compile(
    LINE_DECORATION
    + r"(?:"
    + _FOREIGN_LABEL
    + r")(?:\s*\([^)]*\))?\s*[*_]*\s*[:=\-–—]\s*[*_]*\s*(?:\d|n\s*/\s*a\b)",
    re.IGNORECASE,
)
# "### Texte 1", "Текст 2:" - a section header in another language.
_FOREIGN_SECTION = re.compile(
    LINE_DECORATION + r"(?:" + label_pattern(FOREIGN_TEXT_WORDS) + r")\s*#?\s*\d+\b",
    re.IGNORECASE,
)
# A Markdown table cell that names a rating or a text: "| Rating |", "| Text 2 |".
_TABLE_CELL = re.compile(
    r"^\s*[*_]*\s*(?:ratings?|scores?|grade|overall(?:\s+score)?|text\s*#?\s*\d+|"
    + _FOREIGN_LABEL
    + r")\s*[*_]*\s*(?:\([^)]*\))?\s*$",
    re.IGNORECASE,
)
_BRACKET_VERDICT = re.compile(r"\[\[\s*(?:\d|[abc]\s*\]\])", re.IGNORECASE)

# Blocks echoed back by a judge, whatever their nonce: dropped before parsing a reply.
ECHOED_BLOCK = re.compile(
    r"<<<(?P<label>[A-Z][A-Z ]*?\d*) BEGIN [0-9a-f]+>>>.*?<<<(?P=label) END [0-9a-f]+>>>",
    re.DOTALL,
)


# The annotate stages fence up to ten blocks a call, at UltraFeedback's scale: 32 bits of a
# hash over the material they fence keep it unguessable and save a fifth of each marker line.
ANNOTATION_NONCE_DIGITS = 8


def request_nonce(*parts: object, hex_digits: int = 12) -> str:
    """A short code that only someone who has seen the whole request could reproduce.

    `parts` hold every text the request fences, so no text can carry the code of its own
    block; fewer `hex_digits` make each marker line cheaper (a byte-level BPE spends about a
    token per hex digit) at no loss of that property.

    Args:
        *parts: every text the request fences.
        hex_digits: the code's length.

    Returns:
        The code, in hex.
    """
    encoded = json.dumps(parts, ensure_ascii=False, sort_keys=True, default=str)
    return hashlib.sha256(encoded.encode()).hexdigest()[:hex_digits]


def _is_rating_table_row(line: str) -> bool:
    if not line.lstrip().startswith("|") or line.count("|") < 2:
        return False
    return any(_TABLE_CELL.match(cell) for cell in line.split("|"))


def _looks_like_reply_syntax(line: str) -> bool:
    """Whether `line`, as `skeleton` writes it, imitates a reply, a header or a marker."""
    return bool(
        SECTION_HEADER.match(line)
        or LABELLED_FIELD.match(line)
        or BARE_RATING.match(line)
        or OVERALL_SCORE_LINE.match(line)
        or _MARKER_FRAGMENT.search(line)
        or _JSON_ANSWER_FRAGMENT.search(line)
        or _BRACKET_VERDICT.search(line)
        or _FOREIGN_RATING.match(line)
        or _FOREIGN_SECTION.match(line)
        or _is_rating_table_row(line)
    )


def _must_quote(line: str, seen: str) -> bool:
    """Whether a judge (reading `seen`, the line normalised) or our parsers (reading a
    judge's echo of `line` as written) could take `line` for reply syntax or a marker."""
    if line.isascii():  # its own normalised form; `fold` of ASCII is lower case
        return _looks_like_reply_syntax(line.lower())
    # Case-insensitive matching is not case folding: the parsers read "Ratİng: 5" as a
    # rating, its folded form "rati̇ng: 5" is none.
    return _looks_like_reply_syntax(fold(seen)) or _looks_like_reply_syntax(line)


# One prompt's instruction and completions are fenced in each of its aspect calls and its
# critiques: the most recent texts are kept so that each is neutralised once.
@functools.lru_cache(maxsize=1024)
def neutralise(text: str) -> str:
    """`text` exactly as written, with every line quoted ("> " before it) that a reply
    parser, a judge or a block marker could mistake for ours.

    Lines are cut where the judge would break them (every Unicode line break) and tested
    in their normalised form; each is shown as written, with the break that ended it.

    Args:
        text: the text.

    Returns:
        The text with those lines quoted.
    """
    parts = lines_and_breaks(text)
    written = parts[::2]
    # ASCII text is its own normalised form (and `_must_quote` does not read it).
    seen = written if text.isascii() else normalise(text).split("\n")
    if len(seen) != len(written):  # an invisible character alone between CR and LF
        seen = [normalise(line) for line in written]
    parts[::2] = [
        f"> {line}" if _must_quote(line, normalised) else line
        for line, normalised in zip(written, seen, strict=True)
    ]
    return "".join(parts)


def fenced_block(label: str, text: str, nonce: str) -> str:
    """`text` between marker lines that only this request's nonce can open and close.

    Args:
        label: the block's label (QUESTION, RESPONSE, ...).
        text: the untrusted text.
        nonce: the request's nonce.

    Returns:
        The block.
    """
    return f"<<<{label} BEGIN {nonce}>>>\n{neutralise(text)}\n<<<{label} END {nonce}>>>"


def strip_echoed_blocks(reply: str) -> str:
    """The reply without the material blocks it echoed.

    Args:
        reply: the judge's reply.

    Returns:
        The reply.
    """
    return ECHOED_BLOCK.sub("", reply)


def is_quoted(line: str) -> bool:
    """Whether a line is quoted (starts with ">" after any indent).

    Args:
        line: one line.

    Returns:
        True when quoted.
    """
    return line.lstrip().startswith(">")


def unquoted_lines(reply: str) -> list[str]:
    """The reply's own lines: echoed material blocks and quoted lines removed.

    Args:
        reply: the judge's reply.

    Returns:
        The lines.
    """
    return [line for line in strip_echoed_blocks(reply).splitlines() if not is_quoted(line)]
