"""compat: one meaning for PyTorch APIs on every supported torch version.

Public names are re-exported here from their modules: one import statement per module, and the
same names listed in ``__all__`` (one sorted list; each name's module is in its import).
"""

# The one place the version is written: the distribution's metadata reads it from here
# (pyproject.toml, [tool.hatch.version]).
__version__ = "0.1.0"

from compat.device import (
    DeviceLike,
    DeviceUnavailableError,
    accelerator_type,
    available_backends,
    default_device,
    ensure_available,
    for_safetensors,
    normalize_device,
)
from compat.meta import (
    MaterializeWarning,
    MetaLoadError,
    init_on_device,
    is_meta_module,
    materialize,
    meta_init_active,
    module_devices,
)
from compat.params import TensorMoveError, set_module_tensor, tied_parameters
from compat.saving import dedup_for_save, load, load_file, restore_aliases, save, save_file
from compat.sharing import find_identical_tensors, find_overlapping_tensors, find_shared_tensors

__all__ = [
    "DeviceLike",
    "DeviceUnavailableError",
    "MaterializeWarning",
    "MetaLoadError",
    "TensorMoveError",
    "accelerator_type",
    "available_backends",
    "dedup_for_save",
    "default_device",
    "ensure_available",
    "find_identical_tensors",
    "find_overlapping_tensors",
    "find_shared_tensors",
    "for_safetensors",
    "init_on_device",
    "is_meta_module",
    "load",
    "load_file",
    "materialize",
    "meta_init_active",
    "module_devices",
    "normalize_device",
    "restore_aliases",
    "save",
    "save_file",
    "set_module_tensor",
    "tied_parameters",
]
