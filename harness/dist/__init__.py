"""The release: compat's distributions built once and checked, and the suite run against the
installed wheel (``nox -s dist``, ``nox -s wheel``)."""
