"""Statistics with their uncertainty: clustered bootstrap and Wilson intervals, pairwise
model comparison and Bradley-Terry rankings, length/style control, judge-bias diagnostics.

Pure numpy/pandas/statsmodels/scikit-learn on plain DataFrames (no Kedro): the report and
evaluate pipelines call these functions.
"""
