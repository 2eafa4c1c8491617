"""compat.device: the meaning of each device form, the accelerator paths, torch's own behaviour."""
