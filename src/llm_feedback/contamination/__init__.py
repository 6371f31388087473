"""Decontamination of the prompt set against evaluation benchmarks: the benchmark files a
user points to (`benchmark_files`) and the n-gram overlap of each prompt with their items
(`overlap`)."""
