"""compat.materialize: the paths between the plan and the installed module.

Pins, with small hand-built modules:

- which names materialize knows: every path of a shared submodule, tensors registered after a
  ``None`` slot, one tensor under two names of the same module (all of them updated), buffers
  kept as buffers and parameters kept in the parameter registry even when the swap is refused;
- the stand-ins an initialiser sees for the tensors it must not write (meta, same shape, dtype,
  class and ``requires_grad``), and the ties kept when an initialiser registers new objects;
- the whole text of each error materialize raises (bad device, bad state dicts, unknown keys with
  their listings, meta wrapper subclasses, failing initialisers, failing moves and rebuilds);
- that materialize allocates on the requested device even inside ``with torch.device("meta")``;
- what it reports of a partial state dict (a MaterializeWarning naming what was loaded and what
  was initialised or left uninitialised instead), and that it reports nothing else.
"""

from __future__ import annotations

import warnings
import weakref
from typing import Any

import pytest
import torch
from torch import nn

import compat
from tests.common.compat import messages

# --- which names and registries materialize works on ----------------------------------------------


def test_every_path_of_a_shared_submodule_is_a_known_name() -> None:
    with compat.init_on_device("meta"):
        shared = nn.Linear(3, 2)
    m = nn.Sequential(shared, shared)
    weight, bias = torch.randn(2, 3), torch.randn(2)
    compat.materialize(m, "cpu", {"1.weight": weight, "1.bias": bias})  # strict: names known
    assert m[0] is m[1]
    assert torch.equal(m[0].weight, weight) and torch.equal(m[0].bias, bias)
    assert m[0].weight.data_ptr() == weight.data_ptr()


class HolesFirst(nn.Module):
    """Registers an empty (None) slot before each real tensor, as optional weights do."""

    def __init__(self) -> None:
        super().__init__()
        self.register_parameter("absent", None)
        self.weight = nn.Parameter(torch.empty(3))
        self.register_buffer("no_stats", None)
        self.register_buffer("scale", torch.empty(3))

    def reset_parameters(self) -> None:
        self.weight.fill_(2.0)
        self.scale.fill_(3.0)


def test_tensors_registered_after_a_none_slot_are_materialized() -> None:
    with compat.init_on_device("meta", include_buffers=True):
        m = HolesFirst()
    assert compat.module_devices(m) == {torch.device("meta")}
    compat.materialize(m, "cpu")
    assert compat.module_devices(m) == {torch.device("cpu")}
    assert torch.equal(m.weight, torch.full((3,), 2.0))
    assert torch.equal(m.scale, torch.full((3,), 3.0))
    assert m.absent is None and m.no_stats is None
    compat.materialize(m, "cpu", {"weight": torch.ones(3)})  # a known name, strict
    assert torch.equal(m.weight, torch.ones(3))


class AliasedBuffer(nn.Module):
    """One meta buffer object under two names of the same module."""

    def __init__(self) -> None:
        super().__init__()
        table = torch.empty(4, device="meta")
        self.register_buffer("table", table)
        self.register_buffer("table_alias", table)

    def reset_parameters(self) -> None:
        self.table.fill_(5.0)


def test_a_tensor_under_two_names_of_one_module_is_replaced_under_both() -> None:
    m = AliasedBuffer()
    assert m.table is m.table_alias and m.table.device.type == "meta"
    compat.materialize(m, "cpu")
    assert m.table is m.table_alias  # buffers are replaced, never swapped: both names updated
    assert m.table.device.type == "cpu" and torch.equal(m.table, torch.full((4,), 5.0))
    assert compat.module_devices(m) == {torch.device("cpu")}


def test_a_value_that_is_another_names_old_buffer_is_installed_under_its_own_name_only() -> None:
    """materialize updates, for each tensor, exactly the names that held it when the plan was
    made: a state-dict value that is the object another name still holds (``a`` gets ``b``'s old
    buffer while ``b`` gets a new one) ends up under its own key only, not replaced again by the
    value of the name it came from."""
    m = nn.Module()
    m.register_buffer("a", torch.tensor([1.0, 2.0]))
    m.register_buffer("b", torch.tensor([3.0, 4.0]))
    old_b, new_b = m.b, torch.tensor([5.0, 6.0])
    compat.materialize(m, "cpu", {"a": old_b, "b": new_b})
    assert m.a is old_b and m.a.tolist() == [3.0, 4.0]
    assert m.b is new_b and m.b.tolist() == [5.0, 6.0]
    assert dict(m.named_buffers()).keys() == {"a", "b"}


def test_buffers_stay_plain_buffers() -> None:
    with compat.init_on_device("meta", include_buffers=True):
        m = nn.BatchNorm1d(4)
    compat.materialize(m, "cpu", {"running_mean": torch.full((4,), 0.5)})
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        assert type(m.get_buffer(name)) is torch.Tensor, name
    assert [n for n, _ in m.named_buffers()] == [
        "running_mean",
        "running_var",
        "num_batches_tracked",
    ]
    assert torch.equal(m.running_mean, torch.full((4,), 0.5))
    assert torch.equal(m.running_var, torch.ones(4))
    with compat.init_on_device("meta", include_buffers=True):
        m = nn.BatchNorm1d(4)
    with pytest.raises(ValueError) as info:
        compat.materialize(m, "cpu", {"running_mean": torch.zeros(3)})
    assert str(info.value) == (
        "state_dict['running_mean'] has shape (3,), but the buffer has shape (4,); accepted: a "
        "tensor of shape (4,)"
    )


def test_a_real_buffer_is_kept_as_it_is() -> None:
    with compat.init_on_device("meta"):  # buffers stay real by default
        m = nn.BatchNorm1d(3)
    running_mean = m.running_mean
    compat.materialize(m, "cpu")
    assert m.running_mean is running_mean and type(m.running_mean) is torch.Tensor
    assert dict(m.named_parameters()).keys() == {"weight", "bias"}


def test_a_parameter_whose_swap_is_refused_is_replaced_in_the_parameter_registry() -> None:
    with compat.init_on_device("meta"):
        lin = nn.Linear(3, 2)
    old = lin.weight
    ref = weakref.ref(old)  # a weak reference blocks torch.utils.swap_tensors
    weight = torch.randn(2, 3)
    compat.materialize(lin, "cpu", {"weight": weight})
    assert ref() is old and old.device.type == "meta"  # not swapped: a new object was registered
    assert lin.weight is not old and isinstance(lin.weight, nn.Parameter)
    assert lin.weight.device.type == "cpu" and lin.weight.data_ptr() == weight.data_ptr()
    assert list(lin.named_buffers()) == []
    assert [n for n, _ in lin.named_parameters()] == ["weight", "bias"]
    assert compat.module_devices(lin) == {torch.device("cpu")}


def test_materialize_allocates_on_the_device_inside_a_meta_default_device() -> None:
    with torch.device("meta"):
        lin = nn.Linear(4, 3)
        assert lin.weight.device.type == "meta"
        compat.materialize(lin, "cpu")
    assert compat.module_devices(lin) == {torch.device("cpu")}
    assert lin.bias.abs().max() <= 0.5 and lin.weight.unique().numel() == 12


# --- what an initialiser sees ----------------------------------------------------------------


class Probe(nn.Module):
    """Records how the tensors it must not write look while its initialiser runs."""

    def __init__(self) -> None:
        super().__init__()
        self.loaded = nn.Parameter(torch.ones(2, 3, dtype=torch.bfloat16), requires_grad=False)
        self.register_buffer("counts", torch.ones(4, dtype=torch.int64))
        self.fresh = nn.Parameter(torch.empty(3))
        self.seen: dict[str, tuple[Any, ...]] = {}

    def reset_parameters(self) -> None:
        for name in ("loaded", "counts", "fresh"):
            t = getattr(self, name)
            self.seen[name] = (type(t), t.device.type, t.dtype, tuple(t.shape), t.requires_grad)
        self.fresh.fill_(1.0)


def test_protected_tensors_are_meta_stand_ins_of_the_same_kind() -> None:
    with compat.init_on_device("meta", include_buffers=True):
        m = Probe()
    loaded = torch.full((2, 3), 4.0, dtype=torch.bfloat16)
    counts = torch.arange(4)
    compat.materialize(m, "cpu", {"loaded": loaded, "counts": counts})
    assert m.seen == {
        "loaded": (nn.Parameter, "meta", torch.bfloat16, (2, 3), False),
        "counts": (torch.Tensor, "meta", torch.int64, (4,), False),
        "fresh": (nn.Parameter, "cpu", torch.float32, (3,), True),
    }
    assert torch.equal(m.loaded, loaded) and m.loaded.requires_grad is False
    assert torch.equal(m.counts, counts) and type(m.counts) is torch.Tensor
    assert torch.equal(m.fresh, torch.ones(3))


class Rebinds(nn.Module):
    """An initialiser that registers new parameters instead of writing in place."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.empty(3))
        self.v = nn.Parameter(torch.empty(2))
        self.v_alias = self.v
        self.u = nn.Parameter(torch.empty(2))
        self.u_alias = self.u

    def reset_parameters(self) -> None:
        self.w = nn.Parameter(torch.full((3,), 1.0))
        self.v = nn.Parameter(torch.full((2,), 2.0))
        self.u_alias = nn.Parameter(torch.full((2,), 3.0))  # the second name only


def test_ties_survive_an_initialiser_that_registers_new_objects() -> None:
    with compat.init_on_device("meta"):
        m = Rebinds()
    compat.materialize(m, "cpu")
    assert torch.equal(m.w, torch.full((3,), 1.0))
    assert m.v is m.v_alias and torch.equal(m.v, torch.full((2,), 2.0))
    assert m.u is m.u_alias and torch.equal(m.u, torch.full((2,), 3.0))
    assert compat.tied_parameters(m) == [["v", "v_alias"], ["u", "u_alias"]]
    assert compat.module_devices(m) == {torch.device("cpu")}


class Fails(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Parameter(torch.empty(2))
        self.b = nn.Parameter(torch.empty(2))
        self.c = nn.Parameter(torch.empty(2))

    def reset_parameters(self) -> None:
        raise ValueError("no config for 'a'")


def test_a_failing_initialiser_is_named_with_what_it_was_initialising() -> None:
    with compat.init_on_device("meta"):
        m = Fails()
    c = torch.full((2,), 9.0)
    with pytest.raises(RuntimeError) as info:
        compat.materialize(m, "cpu", {"c": c})
    assert str(info.value) == (
        "Fails.reset_parameters() failed while materializing 'a', 'b': ValueError: no config "
        "for 'a'"
    )
    assert type(info.value.__cause__) is ValueError
    assert compat.module_devices(m) == {torch.device("cpu")}  # materialised, partly uninitialised
    assert torch.equal(m.c, c) and type(m.c) is nn.Parameter  # the loaded one is put back


# --- error messages ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("device", "shown"), [("meta", "'meta'"), (torch.device("meta"), "device(type='meta')")]
)
def test_meta_target_message(device: Any, shown: str) -> None:
    with pytest.raises(ValueError) as info:
        compat.materialize(nn.Linear(2, 2), device)
    assert str(info.value) == (
        f"materialize needs a real device; got {shown}; accepted: a device with storage such as "
        "'cpu', 'cuda:0' or an accelerator index"
    )


def test_bad_state_dict_messages() -> None:
    m = nn.Linear(2, 2)
    with pytest.raises(TypeError) as info:
        compat.materialize(m, "cpu", [("weight", torch.zeros(2, 2))])  # type: ignore[arg-type]
    assert str(info.value) == (
        "state_dict must be a mapping of names to tensors (or None); got list"
    )
    with pytest.raises(TypeError) as info:
        compat.materialize(m, "cpu", {"weight": [0.0]})  # type: ignore[dict-item]
    assert (
        str(info.value) == "state_dict entries must map str names to tensors; got 'weight' -> list"
    )


class Pair(nn.Module):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(1, 1) for _ in range(n))


def test_unexpected_keys_listing_is_cut_after_eight_and_names_four_known() -> None:
    m = Pair(2)  # exactly four known names: listed without "more"
    extra = {f"k{i}": torch.zeros(1) for i in range(9)}
    with pytest.raises(ValueError) as info:
        compat.materialize(m, "cpu", extra)
    assert str(info.value) == (
        "state_dict has keys that name no parameter or buffer of Pair: 'k0', 'k1', 'k2', 'k3', "
        "'k4', 'k5', 'k6', 'k7' and 1 more; accepted: names such as 'layers.0.bias', "
        "'layers.0.weight', 'layers.1.bias', 'layers.1.weight' (or pass strict=False to ignore "
        "them)"
    )
    compat.materialize(m, "cpu", extra, strict=False)  # ignored


def test_unexpected_keys_listing_of_known_names_is_cut_after_four() -> None:
    m = Pair(3)
    with pytest.raises(ValueError) as info:
        compat.materialize(m, "cpu", {"layer.0.weight": torch.zeros(1, 1)})
    assert str(info.value) == (
        "state_dict has keys that name no parameter or buffer of Pair: 'layer.0.weight'; "
        "accepted: names such as 'layers.0.bias', 'layers.0.weight', 'layers.1.bias', "
        "'layers.1.weight' and 2 more (or pass strict=False to ignore them)"
    )


class NoInit(nn.Module):
    def __init__(self, n: int) -> None:
        super().__init__()
        for i in range(n):
            self.register_parameter(f"w{i}", nn.Parameter(torch.empty(1)))


@pytest.mark.parametrize(
    ("n", "listed"),
    [
        (8, "'w0', 'w1', 'w2', 'w3', 'w4', 'w5', 'w6', 'w7'"),
        (10, "'w0', 'w1', 'w2', 'w3', 'w4', 'w5', 'w6', 'w7' and 2 more"),
    ],
)
def test_uninitialisable_listing(n: int, listed: str) -> None:
    with compat.init_on_device("meta"):
        m = NoInit(n)
    with pytest.raises(ValueError) as info:
        compat.materialize(m, "cpu")
    assert str(info.value) == messages.cannot_initialise(listed)


class Tagged(torch.Tensor):
    """A tensor subclass that is not an nn.Parameter subclass: its layout is its own."""


def test_meta_wrapper_subclass_message() -> None:
    m = nn.Module()
    m.register_buffer("codes", torch.empty(3, device="meta").as_subclass(Tagged))
    with pytest.raises(ValueError) as info:
        compat.materialize(m, "cpu")
    assert str(info.value) == (
        f"buffer 'codes' is a meta {Tagged.__module__}.Tagged, which cannot be given fresh "
        "storage (a wrapper subclass has its own layout); accepted: its real value in state_dict"
    )
    real = torch.arange(3.0).as_subclass(Tagged)
    compat.materialize(m, "cpu", {"codes": real})
    assert m.codes is real


def test_an_integer_value_for_a_parameter_that_requires_grad_names_it() -> None:
    with compat.init_on_device("meta"):
        lin = nn.Linear(3, 2)
    with pytest.raises(ValueError) as info:
        compat.materialize(lin, "cpu", {"weight": torch.zeros(2, 3, dtype=torch.int64)})
    assert str(info.value) == (
        "parameter 'weight' requires grad, but its new dtype torch.int64 cannot: only floating "
        "and complex tensors can require gradients; call requires_grad_(False) on the parameter "
        "first, or pass a floating or complex value"
    )
    assert compat.module_devices(lin) == {torch.device("meta")}  # untouched


def test_a_meta_value_is_moved_to_the_device_and_so_refused() -> None:
    with compat.init_on_device("meta"):
        lin = nn.Linear(3, 2)
    with pytest.raises(compat.TensorMoveError) as info:
        compat.materialize(lin, "cpu", {"weight": torch.empty(2, 3, device="meta")})
    cause = info.value.__cause__
    assert cause is not None
    assert str(info.value) == (
        "cannot move parameter 'weight' of class torch.Tensor (torch.float32 on meta) to device "
        f"'cpu': {type(cause).__name__}: {cause}; a meta tensor has no data to copy: pass value= "
        "with the real tensor, or use compat.materialize(); the module was left unchanged"
    )
    assert compat.module_devices(lin) == {torch.device("meta")}


class ScaledParameter(nn.Parameter):
    """An nn.Parameter subclass whose constructor does not take ``requires_grad``."""

    def __new__(cls, data: torch.Tensor, scale: float) -> ScaledParameter:
        p = torch.Tensor._make_subclass(cls, data, True)
        p.scale = scale  # type: ignore[attr-defined]
        return p  # type: ignore[return-value]


class Scaled(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.p = ScaledParameter(torch.empty(2, device="meta"), 0.5)

    def reset_parameters(self) -> None:
        self.p.fill_(1.0)


def test_a_parameter_subclass_that_cannot_be_rebuilt_is_named() -> None:
    m = Scaled()
    old = m.p
    with pytest.raises(compat.TensorMoveError) as info:
        compat.materialize(m, "cpu")
    cause = info.value.__cause__
    assert type(cause) is TypeError
    assert str(info.value) == (
        f"cannot rebuild parameter 'p' through its class {__name__}.ScaledParameter: "
        f"ScaledParameter(data, requires_grad=..., scale=...) raised TypeError: {cause}; an "
        "nn.Parameter subclass must accept (data, requires_grad) like nn.Parameter, or return "
        "its own class from .to(); the module was left unchanged"
    )
    assert m.p is old and m.p.device.type == "meta"


class Anchored(nn.Parameter):
    """A real parameter whose ``.to()`` refuses every move, as a tensor pinned to its device does."""

    def to(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("Anchored stays put")


def test_a_real_tensor_that_refuses_its_move_is_named_and_nothing_is_touched() -> None:
    with compat.init_on_device("meta"):
        lin = nn.Linear(3, 2)
    lin.weight = Anchored(torch.ones(2, 3))
    old_weight, old_bias = lin.weight, lin.bias
    with pytest.raises(compat.TensorMoveError) as info:
        compat.materialize(lin, "cpu", {"bias": torch.zeros(2)})
    assert str(info.value) == (
        f"cannot move parameter 'weight' of class {__name__}.Anchored (torch.float32 on cpu) to "
        "device 'cpu': RuntimeError: Anchored stays put; the module was left unchanged"
    )
    assert lin.weight is old_weight and lin.bias is old_bias
    assert lin.bias.device.type == "meta"


class Holder(nn.Module):
    """Registers a tensor it is given as a buffer (a parameter of another module, shared)."""

    def __init__(self, tensor: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("shared", tensor)


@pytest.mark.parametrize("swap", ["possible", "refused"])
def test_a_parameter_that_is_also_another_modules_buffer_stays_one_object(swap: str) -> None:
    with compat.init_on_device("meta"):
        lin = nn.Linear(3, 2)
    m = nn.Sequential(lin, Holder(lin.weight))
    old = lin.weight
    ref = weakref.ref(old) if swap == "refused" else None  # a weak reference blocks the swap
    weight = torch.randn(2, 3)
    compat.materialize(m, "cpu", {"0.weight": weight})
    assert m[1].shared is m[0].weight  # the tie is kept, and kept a buffer
    assert list(m[1]._parameters) == [] and list(m[1]._buffers) == ["shared"]
    assert torch.equal(m[0].weight, weight)
    assert (m[0].weight is old) == (swap == "possible")
    assert ref is None or ref() is old
    assert compat.module_devices(m) == {torch.device("cpu")}


# --- what materialize tells of what it did not load ---------------------------------------------


class _Bare(nn.Module):
    """A module whose parameter nothing initialises (no reset_parameters())."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(2))


def _model() -> nn.Module:
    with compat.init_on_device("meta"):
        return nn.ModuleDict({"a": nn.Linear(2, 3), "b": nn.Linear(3, 1), "c": _Bare()})


def test_a_partial_state_dict_is_reported_naming_what_was_initialised_instead() -> None:
    """It initialised what the state dict lacked with reset_parameters() and said nothing, where
    transformers names the missing keys: now a MaterializeWarning names them."""
    source = nn.Linear(2, 3)
    partial = {"a.weight": source.weight.detach(), "a.bias": source.bias.detach()}
    partial["c.scale"] = torch.full((2,), 3.0)
    with pytest.warns(compat.MaterializeWarning) as caught:
        model = compat.materialize(_model(), "cpu", state_dict=partial)
    (found,) = [w.message for w in caught if isinstance(w.message, compat.MaterializeWarning)]
    assert found.loaded == ("a.weight", "a.bias", "c.scale")
    assert found.initialised == ("b.weight", "b.bias") and found.uninitialised == ()
    assert str(found) == (
        "materialize: tensors absent from state_dict were not loaded; 3 loaded from state_dict;"
        " initialised by reset_parameters(): 'b.weight', 'b.bias'"
    )
    assert torch.equal(model["a"].weight, source.weight)  # loaded, as reported
    assert caught[0].filename == __file__  # pointed at the caller


def test_tensors_left_uninitialised_are_reported_too() -> None:
    with pytest.warns(compat.MaterializeWarning) as caught:
        compat.materialize(_model(), "cpu", state_dict={}, strict=False)
    (found,) = [w.message for w in caught if isinstance(w.message, compat.MaterializeWarning)]
    assert found.loaded == () and found.uninitialised == ("c.scale",)
    assert found.initialised == ("a.weight", "a.bias", "b.weight", "b.bias")
    assert "left uninitialised (strict=False): 'c.scale'" in str(found)


def test_nothing_is_reported_when_everything_was_loaded_or_nothing_was_given() -> None:
    full = {k: torch.zeros_like(v, device="cpu") for k, v in _model().state_dict().items()}
    with warnings.catch_warnings():
        warnings.simplefilter("error", compat.MaterializeWarning)
        compat.materialize(_model(), "cpu", state_dict=full)
        with compat.init_on_device("meta"):
            plain = nn.Linear(2, 3)
        compat.materialize(plain, "cpu")  # no state dict: initialising is what was asked
