"""compat.meta: detecting meta modules, init_on_device and materialize."""
