"""compat._overlap and compat._intervals: which bytes two views share, decided exactly."""
