"""The harness's own tests run without torch: no cell plumbing from tests/conftest.py applies."""
