"""Where prompts come from: the source readers and the raw prompt table."""
