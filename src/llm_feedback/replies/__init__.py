"""The reply toolbox shared by every judge: fencing untrusted text into prompts, extracting
JSON from replies, the parse-status vocabulary of every output table, and the sampling every
judge asks with."""

from llm_feedback.replies import status
from llm_feedback.replies.extract import first_json_object, iter_json_objects, json_objects_in
from llm_feedback.replies.fencing import (
    fenced_block,
    is_quoted,
    neutralise,
    request_nonce,
    strip_echoed_blocks,
    unquoted_lines,
)
from llm_feedback.replies.sampling import JUDGE_SAMPLING

__all__ = [
    "JUDGE_SAMPLING",
    "fenced_block",
    "first_json_object",
    "is_quoted",
    "iter_json_objects",
    "json_objects_in",
    "neutralise",
    "request_nonce",
    "status",
    "strip_echoed_blocks",
    "unquoted_lines",
]
