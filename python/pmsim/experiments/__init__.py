"""One-command reproductions of the papers' evaluations."""
