"""compat.params: set_module_tensor and tied_parameters."""
