"""Names from configuration (models, endpoints, validation sets, sources) as inert Markdown.

A model name is whatever a user (or a shared configuration) wrote: `<script>...`, an image
`![x](http://...)` or a `|` that splits a table row must show as the text it is, in
report.md and in a dataset card alike. `markdown_text` escapes HTML's three characters as
entities and backslash-escapes Markdown's inline punctuation, so no tag, link, emphasis or
table cell can start; `table_cell_text` is the lighter form for table cells; `code_span`
wraps text in a code span whose backtick fence no run of backticks in the text can close
(a code span shows HTML as text); `code_fence` is the same for a fenced block.
"""

from __future__ import annotations

import re

# The punctuation that can open an inline construct mid-line (code, emphasis, link or
# image, table cell, strikethrough), backslash-escaped; an underscore inside a word
# (always_first) cannot open or close emphasis and stays as it is. Without `[`, `(` and `!`
# start nothing.
_MARKDOWN_PUNCTUATION = re.compile(r"([\\`*\[\]|~]|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z]))")
_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def markdown_text(value: object) -> str:
    """`value` as text that Markdown renders literally, on one line.

    Args:
        value: any value; its `str()` is escaped.

    Returns:
        The escaped text: HTML's `&`, `<`, `>` as entities, Markdown punctuation
        backslash-escaped, line breaks as spaces.
    """
    text = "".join(_HTML.get(char, char) for char in str(value))
    text = _MARKDOWN_PUNCTUATION.sub(r"\\\1", text)
    return " ".join(text.splitlines())


def table_cell_text(text: str) -> str:
    """`text` as a Markdown table cell: HTML's `&`, `<`, `>` as entities, `|` escaped, no
    inline link or image (`](` broken), one line. Brackets stay: an interval reads
    `3.42 [3.31, 3.55]`.

    Args:
        text: the cell's text.

    Returns:
        The escaped cell text.
    """
    text = "".join(_HTML.get(char, char) for char in text)
    text = text.replace("|", "\\|").replace("](", "]\\(")
    return " ".join(text.splitlines())


def _longest_backtick_run(text: str) -> int:
    return max((len(run) for run in re.findall(r"`+", text)), default=0)


def code_span(value: object) -> str:
    """`value` in a code span that the text itself cannot close, on one line.

    Args:
        value: any value; its `str()` is shown verbatim.

    Returns:
        The code span, its fence one backtick longer than the text's longest run.
    """
    text = " ".join(str(value).splitlines())
    fence = "`" * (_longest_backtick_run(text) + 1)
    # A span that starts or ends with a backtick needs a space inside the fence.
    padded = f" {text} " if text.startswith("`") or text.endswith("`") else text
    return f"{fence}{padded}{fence}"


def code_fence(text: str, info: str = "") -> str:
    """`text` as a fenced block that no line of it can close.

    Args:
        text: the block's lines.
        info: the info string (e.g. "yaml").

    Returns:
        The block, its fence at least three backticks and longer than any run in the text.
    """
    fence = "`" * max(3, _longest_backtick_run(text) + 1)
    return f"{fence}{info}\n{text}\n{fence}"
