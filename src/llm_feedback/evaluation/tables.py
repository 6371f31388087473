"""The explicit dtypes of the evaluation tables: samples, judgments (pointwise and
pairwise) and metrics, so the Parquet schema does not depend on which values occurred."""

SAMPLE_DTYPES = {
    "instance_id": "string",
    "turn": "int64",
    "model": "string",
    "replicate": "int64",
    "weight": "float64",
    "question": "string",
    "response": "string",
    "reference": "string",
    "prior_question": "string",
    "prior_response": "string",
    "prior_reference": "string",
}
JUDGMENT_DTYPES = {
    "instance_id": "string",
    "turn": "int64",
    "model": "string",
    "replicate": "int64",
    "weight": "float64",
    "mode": "string",
    "criterion": "string",
    "response": "string",
    "score": "float64",
    "correct": "boolean",
    "parse_status": "string",  # a word of llm_feedback.replies.status
    "success": "bool",
    "extracted_final_answer": "string",
    "reasoning": "string",
    "confidence": "float64",
    "raw_response": "string",
    "prompt": "string",
    "judge_model": "string",
    "cached": "bool",
    "error": "string",
    "reasks": "int64",
}
PAIRWISE_DTYPES = {
    "instance_id": "string",
    "turn": "int64",
    "replicate": "int64",
    "mode": "string",
    "model_a": "string",
    "model_b": "string",
    "verdict_a_first": "string",  # both verdicts say "A" when model_a's response won
    "verdict_b_first": "string",
    "outcome": "string",
    "consistent": "boolean",
    "score_a": "float64",
    "score_b": "float64",
    "parse_status": "string",  # a word of llm_feedback.replies.status
    "success": "bool",
    "raw_response_a_first": "string",
    "raw_response_b_first": "string",
    "prompt_a_first": "string",
    "prompt_b_first": "string",
    "judge_model": "string",
    "cached": "bool",
    "error": "string",
    "reasks": "int64",  # both orders together
}
METRIC_DTYPES = {
    "mode": "string",
    "model": "string",
    "metric": "string",
    "criterion": "string",
    "k": "Int64",
    "value": "float64",
    "n": "int64",
    "n_missing": "int64",
}
