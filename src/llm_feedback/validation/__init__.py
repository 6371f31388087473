"""Judge validation: how far a judge agrees with human (gold) labels.

`formats` reads gold-labelled samples as published (LLMBar, PandaLM, MT-Bench human
judgments, our own JSONL) into eval_samples-shaped rows with gold columns; `verdicts`
lines a judge's verdicts up with the gold; `metrics` computes LLMBar's meta-evaluation
metrics and `pointwise` the score ones, with clustered bootstrap intervals
(`llm_feedback.stats.intervals`; `metric_table` lays out their rows); `baselines` gives
the same table for always-first, always-longer and random; `agreement` measures how far
raters agree (judges, shuffles, annotators) and makes several annotators' labels one
gold; `logprobs` turns top log-probabilities into verdicts; `card` makes and shows the
judge card; `validate` runs all of it for one judge. Everything here is pure: no Kedro,
no calls.
"""
