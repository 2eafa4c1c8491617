"""Which release did it: bisecting a package's releases in one cell (``nox -s bisect``)."""
