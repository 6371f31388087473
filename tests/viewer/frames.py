"""Annotate- and evaluate-shaped tables for the viewer tests, built with known contents:
known shuffle orders, fix actions, sources, models, flags, and one hostile completion."""

from __future__ import annotations

import pandas as pd

HOSTILE = '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script></div>'
# The known shuffle of prompt "p-known", aspect helpfulness, shuffle 0: completion 2 shown
# first ("Text 1"), completion 0 second, completion 1 third.
KNOWN_ORDER = [2, 0, 1]
KNOWN_MODELS = ["model-a", "model-b", "model-c"]
ASPECTS = ("helpfulness", "honesty")
# A word written in one rationale only: (prompt, aspect, shuffle, completion).
RATIONALE_ONLY_WORD = "Quixotically"
RATIONALE_ONLY_AT = ("p-0033", "honesty", 1, 2)


def feedback_frames(
    n_prompts: int = 120,
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(completions, aspect_annotations, critiques, overall_scores): "p-known" plus
    `n_prompts - 1` prompts "p-0001"...; every 10th from source "flan" (else "evol"), every
    7th with a "flipped" fix, every 5th with its shuffles disagreeing, every 11th flagged,
    every 13th with an unreadable aspect reply; scores varying by prompt and completion;
    `RATIONALE_ONLY_WORD` in one rationale (with at least 34 prompts)."""
    completions, aspects, critiques, scores = [], [], [], []
    ids = ["p-known"] + [f"p-{i:04d}" for i in range(1, n_prompts)]
    for n, prompt_id in enumerate(ids):
        source = "flan" if n % 10 == 0 else "evol"
        for idx, model in enumerate(KNOWN_MODELS):
            response = HOSTILE if (prompt_id == "p-known" and idx == 1) else f"answer {n}/{idx}"
            completions.append(
                {
                    "prompt_id": prompt_id,
                    "completion_idx": idx,
                    "source": source,
                    "instruction": f"Question number {n}: explain topic {n}",
                    "model": model,
                    "principle": "helpfulness",
                    "response": response,
                }
            )
            flagged = n % 11 == 1 and idx == 0
            critiques.append(
                {
                    "prompt_id": prompt_id,
                    "completion_idx": idx,
                    "critique": f"critique of {prompt_id}/{idx}",
                    "parse_status": "ok",
                    "suspected_injection": flagged,
                }
            )
            overall = float(1 + (n * 7 + idx * 3) % 10)
            scores.append(
                {
                    "prompt_id": prompt_id,
                    "completion_idx": idx,
                    "overall_score_original": 10.0 if n % 7 == 3 else overall,
                    "overall_score_fixed": 3.0 if n % 7 == 3 else overall,
                    "fine_grained_score": 1.0 + (n * 3 + idx) % 9 / 2,
                    "fix_action": "flipped" if n % 7 == 3 and idx == 0 else "kept",
                }
            )
        for aspect in ASPECTS:
            for shuffle in (0, 1):
                order = KNOWN_ORDER if shuffle == 0 else [0, 1, 2]
                for position, idx in enumerate(order):
                    rating = 4.0 if not (n % 5 == 2 and shuffle == 1 and idx == 0) else 2.0
                    rationale = f"rated {prompt_id}/{idx}"
                    if (prompt_id, aspect, shuffle, idx) == RATIONALE_ONLY_AT:
                        rationale += f" {RATIONALE_ONLY_WORD}"
                    if prompt_id == "p-known" and aspect == "helpfulness" and shuffle == 0:
                        rationale = "Text 1 is clearer than Text 3." if idx == 2 else rationale
                    aspects.append(
                        {
                            "prompt_id": prompt_id,
                            "completion_idx": idx,
                            "aspect": aspect,
                            "shuffle_idx": shuffle,
                            "position": position,
                            "rating": rating,
                            "is_na": False,
                            "rationale": rationale,
                            "parse_status": "ok" if n % 13 else "no_match",
                            "suspected_injection": False,
                        }
                    )
    return (
        pd.DataFrame(completions),
        pd.DataFrame(aspects),
        pd.DataFrame(critiques),
        pd.DataFrame(scores),
    )


def evaluation_frames() -> tuple[pd.DataFrame, pd.DataFrame]:
    """(answered samples, pairwise eval_judgments) for two questions, two models."""
    samples = pd.DataFrame(
        [
            {
                "instance_id": i,
                "turn": 1,
                "model": m,
                "replicate": 0,
                "question": f"Q {i}?",
                "response": f"{m} says {i}",
                "reference": f"gold {i}",
            }
            for i in ("q1", "q2")
            for m in ("alpha", "beta")
        ]
    )
    judgments = pd.DataFrame(
        [
            {
                "instance_id": "q1",
                "turn": 1,
                "replicate": 0,
                "mode": "pairwise",
                "model_a": "alpha",
                "model_b": "beta",
                "verdict_a_first": "A",
                "verdict_b_first": "B",
                "outcome": "tie",
                "consistent": False,
                "score_a": 7.0,
                "score_b": 6.0,
                "parse_status": "ok",
                "raw_response_a_first": "A wins",
                "raw_response_b_first": "B wins",
            },
            {
                "instance_id": "q2",
                "turn": 1,
                "replicate": 0,
                "mode": "pairwise",
                "model_a": "alpha",
                "model_b": "beta",
                "verdict_a_first": "A",
                "verdict_b_first": "A",
                "outcome": "A",
                "consistent": True,
                "score_a": 8.0,
                "score_b": 5.0,
                "parse_status": "ok",
                "raw_response_a_first": "A",
                "raw_response_b_first": "A",
            },
        ]
    )
    return samples, judgments
