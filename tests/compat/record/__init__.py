"""compat._record: the alias record a saved file carries, read as untrusted input."""
