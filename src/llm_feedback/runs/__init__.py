"""A run as a whole: its priced plan, its lock (local and remote), its record and lineage,
and experiment tracking."""
