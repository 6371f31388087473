"""Answers whose every character a judge must see as written. Each one beyond ASCII is
changed by the normalisation that injection detection uses (NFKC, invisible characters
dropped, line breaks unified); none holds a line that looks like a reply."""

from __future__ import annotations

# name -> text; the names say what each text carries.
EXACT_TEXTS: dict[str, str] = {
    "superscripts_subscripts_ligature": "2³ = 8, and H₂O is water; ﬁne.",
    "circle": "x² + y² = r², so 10⁻³ m is a millimetre.",
    "fractions": "Add 2 ½ cups, then ¾ more: 3 ¼ in all (⅛ spare).",
    "chemistry": "CaCO₃ → CaO + CO₂ when heated.",
    "full_width_and_math_letters": (
        "Ｆｕｌｌ ｗｉｄｔｈ ｔｅｘｔ, 𝐛𝐨𝐥𝐝 𝑖𝑡𝑎𝑙𝑖𝑐 and 𝔉𝔯𝔞𝔨𝔱𝔲𝔯; ℌ ℝ ℕ ℵ."
    ),
    "combining_marks": (
        "Cafe\u0301 and man\u0303ana, a\u0308 and o\u0302, Z\u0335a\u0336l\u0337g\u0338o."
    ),
    "non_breaking_spaces": "It costs 100\u00a0€ for 5\u202fkg, 20\u2009°C\u00a0— fine.",
    "right_to_left": (
        "In Hebrew \u200fשָׁלוֹם\u200f means peace; Arabic \u202bمرحبا بالعالم\u202c greets."
    ),
    "tabs_and_indentation": "def f(x):\n\treturn x ** 2\n\t\t# nested\n    four spaces\t end",
    "line_breaks": "First line\r\nsecond\rthird\u2028fourth\u2029fifth\x0csixth\x85seventh\n",
    "invisible_characters": (
        "zero\u200bwidth, soft\u00adhyphen, join\u2060ed, \ufeffBOM, 👩\u200d💻."
    ),
    "compatibility_forms": "Ⅻ chapters, ㎏ and ㎞, ™ and ℃, µ (micro) and Å (angstrom), ﬀ ﬃ ﬆ.",
    "surrounding_whitespace": "  \n  leading and trailing blanks stay\t \n\n",
}
