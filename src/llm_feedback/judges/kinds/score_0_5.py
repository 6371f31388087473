"""The `score_0_5` kind: a 0-5 rating of a prediction against the reference answer.

A reference-scale kind (`reference_scale.py`): template `templates/score_0_5.txt`
("Rating: N" or the JSON {"rating", "explanation"}), fields as `binary`'s: {question},
{reference} (synonym {answer}), {prediction}. A row without a usable reference is invalid,
with no call.
"""

from __future__ import annotations

from llm_feedback.judges.kinds.reference_scale import ReferenceScale

SCALE = (0, 5)
SCORE_0_5 = ReferenceScale("score_0_5", SCALE, "score_0_5")

KIND = SCORE_0_5.kind
build_score_0_5_request = SCORE_0_5.request
read_rating = SCORE_0_5.read
