"""Completion generation: sampling models and principles per completion, and the requests
that generate them."""
