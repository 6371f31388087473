"""Human labels downloaded from the judgment viewer (the "Download labels" button).

The file is JSON Lines, `labels.jsonl`: one JSON object a line, UTF-8, in one of two shapes
(agreed with the judge-validation reader, which takes the file as it is):

pairwise, a reviewer's choice between two responses to one question:

    {"instance_id": str, "question": str, "response_a": str, "response_b": str,
     "model_a": str, "model_b": str, "label": "A" | "B" | "tie", "annotator": str}

pointwise, a reviewer's score of one response:

    {"instance_id": str, "question": str, "response": str, "model": str,
     "gold_score": number, "annotator": str}

with `"aspect": str` after `gold_score` when, on an annotate page, the reviewer rated the
completion on one aspect (left at "overall", the line has no `aspect`).

A label given on a record the index's review queue drew ends with `"selection": "uniform" |
"uncertainty", "selection_probability": number`: how the queue drew it (uniformly at random,
or with probabilities rising with the judge's uncertainty, the spread of its shuffles) and
the record's probability of being drawn, which the corrected estimates weight it by.

`instance_id` is the annotate run's `prompt_id` (the question is its instruction, the
responses two of its completions, chosen in the page) or the evaluate run's `instance_id`.
`label` "A" means `response_a` is the better one. `annotator` is the name typed in the
page's "Reviewer" box ("anonymous" when left empty). A reviewer's later choice for the same
pair (or response) replaces the earlier one; the browser keeps the labels per site until
they are downloaded and the browser's storage is cleared.

`llm_feedback.validation.formats` reads the file as gold (format `viewer`, see
`validation.viewer_labels`): mixed as downloaded, several reviewers' files concatenated.
On an annotate run, `report.labels.path` feeds it to the report pipeline, which validates
annotate's judge with it (`validation.annotate_labels`).
"""

PAIRWISE_FIELDS = (
    "instance_id",
    "question",
    "response_a",
    "response_b",
    "model_a",
    "model_b",
    "label",
    "annotator",
)
POINTWISE_FIELDS = ("instance_id", "question", "response", "model", "gold_score", "annotator")
ASPECT_FIELD = "aspect"  # a pointwise line's optional field (annotate pages)
# Optional on either shape: the review queue's probability of drawing the line's record,
# after `selection`, its design ("uniform" or "uncertainty").
SELECTION_FIELD = "selection_probability"
PAIRWISE_LABELS = ("A", "B", "tie")
