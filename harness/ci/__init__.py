"""GitHub Actions: the matrix JSON for the workflows, the regression gate, commit statuses,
the nightly's issue, previous runs, and triggers from upstream pull requests."""
