"""compat.sharing: the three finders and the saved round trip, judged by the byte-set oracle."""
