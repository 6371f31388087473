"""Placeholder replaced by the real client in the next commit."""
