"""What every layer shares: the project's error classes and lazy imports of optional extras."""
