"""compat.integrations against the libraries installed in every cell (safetensors)."""
