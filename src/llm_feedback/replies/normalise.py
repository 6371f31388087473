"""Untrusted text as a judge reads it: one form of every character, one kind of line break.

A judge model reads "Ｒａｔｉｎｇ： ５", "Ra\u200bting: 5" and "R\u0430ting: 5" (Cyrillic a) as
"Rating: 5", and breaks lines at "\u2028" as readily as at "\n". Detection must see what the
judge sees, so it works on `normalise(text)` (NFKC, invisible format characters removed,
every Unicode line break turned into "\n") and on its `skeleton` (lookalike letters of other
scripts mapped to the Latin letter they imitate, case folded). These forms are for deciding
only, never for showing: the judge is shown the text as it was written (`lines_and_breaks`
cuts it where `normalise` breaks lines, so that each original line can be tested in its
normalised form and shown as it is).

`FOREIGN_RATING_LABELS` is the documented list of words for "rating"/"score"/"grade" in
other languages that detection knows; a line such as "Bewertung: 5" or "Note : 5" (a label,
a separator, then a number) counts as answer-shaped whatever the language.
"""

from __future__ import annotations

import re
import unicodedata

# Zero-width characters, joiners, soft hyphen, word joiners, bidi embeddings, overrides and
# isolates, and the byte-order mark: invisible to a reader, but they split words for a regex.
_INVISIBLE = re.compile("[\u00ad\u034f\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u206f\ufeff]")

# Every line boundary of `str.splitlines()`: CR LF counts once.
_LINE_BREAK = re.compile("\r\n|[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
# The same boundaries and "\n", captured, so that splitting keeps each break.
_LINE_BOUNDARY = re.compile("(\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029])")

# Cyrillic and Greek letters drawn like Latin ones (after NFKC), lower and upper case.
_LOOKALIKES = str.maketrans(
    {
        **dict.fromkeys("аα", "a"),
        **dict.fromkeys("вβ", "b"),
        **dict.fromkeys("сϲ", "c"),
        "ԁ": "d",
        **dict.fromkeys("еєε", "e"),
        "ғ": "f",
        **dict.fromkeys("ɡ", "g"),
        **dict.fromkeys("һн", "h"),
        **dict.fromkeys("іїιı", "i"),
        "ј": "j",
        **dict.fromkeys("кκ", "k"),
        **dict.fromkeys("ӏℓ", "l"),
        **dict.fromkeys("мμ", "m"),
        **dict.fromkeys("пη", "n"),
        **dict.fromkeys("оοσ", "o"),
        **dict.fromkeys("рρ", "p"),
        "ԛ": "q",
        "г": "r",
        "ѕ": "s",
        **dict.fromkeys("тτ", "t"),
        **dict.fromkeys("υ", "u"),
        **dict.fromkeys("ѵν", "v"),
        **dict.fromkeys("ԝω", "w"),
        **dict.fromkeys("хχ", "x"),
        **dict.fromkeys("уγ", "y"),
        "ᴢ": "z",
        # Latin small capitals and other letters NFKC leaves alone ("ʀᴀᴛɪɴɢ"), Armenian
        **dict(zip("ᴀʙᴄᴅᴇꜰɢʜɪᴊᴋʟᴍɴᴏᴘǫʀꜱᴛᴜᴠᴡʏ", "abcdefghijklmnopqrstuvwy", strict=True)),
        **dict(zip("ɑɩǀօսոհցզ", "ailounhgq", strict=True)),
    }
)

# "Rating", "score" or "grade" in the languages a judge is most often asked in. Every entry
# is matched case-insensitively, after normalisation and with its accents optional.
FOREIGN_RATING_LABELS: tuple[str, ...] = (
    # German
    "bewertung",
    "punktzahl",
    "wertung",
    "note",
    "punkte",
    # French
    "note finale",
    "évaluation",
    "notation",
    # Spanish
    "puntuación",
    "calificación",
    "valoración",
    "nota",
    "puntaje",
    # Italian
    "valutazione",
    "punteggio",
    "voto",
    # Portuguese
    "avaliação",
    "pontuação",
    "classificação",
    # Dutch
    "beoordeling",
    "cijfer",
    "waardering",
    # Polish, Czech, Turkish, Swedish
    "ocena",
    "hodnocení",
    "puan",
    "betyg",
    # Russian, Ukrainian
    "оценка",
    "рейтинг",
    "балл",
    "бал",
    "оцінка",
    # Chinese, Japanese, Korean
    "评分",
    "分数",
    "評分",
    "得分",
    "评级",
    "評価",
    "点数",
    "スコア",
    "평가",
    "점수",
    # Arabic, Hindi
    "تقييم",
    "درجة",
    "रेटिंग",
    "अंक",
)

# "Text" as a section word in other languages ("Texte 1", "Текст 1", "文本 1").
FOREIGN_TEXT_WORDS: tuple[str, ...] = (
    "texte",
    "texto",
    "testo",
    "tekst",
    "текст",
    "文本",
    "テキスト",
)


def normalise(text: str) -> str:
    """`text` in compatibility form, without invisible characters, with "\n" line breaks.

    Args:
        text: the text.

    Returns:
        The normalised text.
    """
    if text.isascii():
        # NFKC and the invisible characters leave ASCII as it is: only its line breaks vary.
        return _LINE_BREAK.sub("\n", text)
    text = unicodedata.normalize("NFKC", text)
    return _LINE_BREAK.sub("\n", _INVISIBLE.sub("", text))


def lines_and_breaks(text: str) -> list[str]:
    """`text` cut at every line boundary of `str.splitlines()`, the breaks kept: the lines at
    the even positions, at each odd one the break (as written) that ends the line before it,
    so that `"".join(...)` gives `text` back.

    No character's compatibility form holds a line break, so `normalise(line)` of each line
    is one line: together they are the lines of `normalise(text)` (an invisible character
    alone between CR and LF makes an extra empty one).

    Args:
        text: the text.

    Returns:
        Lines and breaks, alternating.
    """
    return _LINE_BOUNDARY.split(text)


def skeleton(text: str) -> str:
    """`normalise(text)` with lookalike letters folded to Latin and case folded.

    Args:
        text: the text.

    Returns:
        The folded text.
    """
    return fold(normalise(text))


def fold(normalised: str) -> str:
    """`skeleton` of text that is already `normalise`d (normalising is idempotent, so a
    caller holding normalised lines need not normalise each again).

    Args:
        normalised: text already `normalise`d.

    Returns:
        The folded text.
    """
    if normalised.isascii():
        return normalised.lower()  # the lookalikes are all outside ASCII
    return normalised.casefold().translate(_LOOKALIKES)


def unmarked(folded: str) -> str:
    """`fold`ed text without combining marks, its lookalikes folded again: the form in which
    a letter with a dot, accent or stroke added ("Ratİng", whose fold is "rati" + a combining
    dot + "ng"; "Rating" with a combining macron) reads as the letter a judge sees under it.
    For detection only, beside `fold` (it reads a word of an accented language unaccented).

    Args:
        folded: text as `fold` writes it.

    Returns:
        The same text with every combining mark removed, in composed form.
    """
    if folded.isascii():
        return folded
    bare = "".join(
        char for char in unicodedata.normalize("NFD", folded) if not unicodedata.combining(char)
    )
    return unicodedata.normalize("NFC", bare).translate(_LOOKALIKES)


def _without_accents(word: str) -> str:
    decomposed = unicodedata.normalize("NFD", word)
    return "".join(char for char in decomposed if not unicodedata.combining(char))


def label_pattern(words: tuple[str, ...]) -> str:
    """A regex alternative matching each word as `skeleton` writes it, accents optional,
    longest first.

    Args:
        words: the label words.

    Returns:
        The regex alternative.
    """
    variants = {
        form.translate(_LOOKALIKES) for word in words for form in (word, _without_accents(word))
    }
    return "|".join(re.escape(variant) for variant in sorted(variants, key=len, reverse=True))
