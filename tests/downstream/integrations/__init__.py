"""compat.integrations against the downstream libraries, in the downstream cells where they are
installed: transformers' (test_transformers.py) and the patch mechanism all three integrations
share (test_patches.py); safetensors' is in tests/compat/integrations (every cell has it), and
accelerate's routes sit beside accelerate's scenarios in tests/downstream/test_accelerate.py."""
