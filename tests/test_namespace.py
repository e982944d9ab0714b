"""The parts of the torch namespace programs touch before any layer (issue 13):
legacy constructors, ember.cuda / accelerator / backends, the default
device, ember.load's PyTorch arguments, NumPy arrays in saved objects,
ember.compile and ember.amp.GradScaler.  Pure Python over existing C entry
points; PyTorch is the oracle where installed."""

import io
import warnings

import numpy as np
import pytest

import ember

try:
    import torch
except ImportError:
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="needs PyTorch")

def _same(a, b):
    return a.shape == b.shape and np.array_equal(a.detach().numpy(), b.detach().numpy())


def _close(a, b):
    return np.allclose(np.asarray(a.detach().numpy() if isinstance(a, ember.Tensor) else a),
                       np.asarray(b.detach().numpy() if isinstance(b, ember.Tensor) else b),
                       rtol=1e-5, atol=1e-6)


LEGACY = ["BoolTensor", "ByteTensor", "CharTensor", "ShortTensor", "IntTensor",
          "LongTensor", "FloatTensor", "DoubleTensor"]


# ------------------------------------------------------------ legacy types

@pytest.mark.parametrize("name", LEGACY)
def test_legacy_type_constructs_and_checks_like_torch(name):
    cls = getattr(ember, name)
    assert ember.empty(2, dtype=cls.dtype).type() == f"ember.{name}"
    t = cls(2, 3)
    assert t.shape == (2, 3) and t.dtype == cls.dtype
    assert cls().shape == (0,)
    assert cls(ember.Size([4])).shape == (4,)
    assert isinstance(cls([1, 0]), cls)
    other = ember.int8 if cls.dtype != ember.int8 else ember.int16
    assert not isinstance(ember.zeros(1, dtype=other), cls)
    if torch is not None:
        tcls = getattr(torch, name)
        assert str(cls([1, 0]).numpy().tolist()) == str(tcls([1, 0]).numpy().tolist())


def test_legacy_type_semantics():
    t = ember.ones(2)
    assert ember.FloatTensor(t) is t      # PyTorch returns the same tensor
    with pytest.raises(TypeError, match="expected"):
        ember.LongTensor(t)
    with pytest.raises(TypeError, match=r"new\(\): data must be a sequence \(got float\)"):
        ember.FloatTensor(2.5)
    assert ember.FloatTensor(size=(3,)).shape == (3,)
    assert t.type(ember.LongTensor).dtype == ember.int64
    assert t.type("torch.IntTensor").dtype == ember.int32
    assert t.type("ember.DoubleTensor").dtype == ember.float64
    with pytest.raises(ValueError, match="invalid type"):
        t.type("torch.NoSuchTensor")
    assert repr(ember.FloatTensor) == "<class 'ember.FloatTensor'>"
    with pytest.raises(RuntimeError, match="legacy constructor expects device type: cpu"):
        ember.FloatTensor(2, device="cuda")


# -------------------------------------------- cuda, accelerator, backends

def test_cuda_namespace_without_a_device():
    assert ember.cuda.is_available() is False
    assert ember.cuda.device_count() == 0
    assert ember.cuda.is_initialized() is False
    assert ember.cuda.manual_seed(0) is None and ember.cuda.manual_seed_all(0) is None
    assert ember.cuda.memory_allocated() == 0
    ember.cuda.empty_cache()
    for needs_device in (ember.cuda.current_device, ember.cuda.synchronize,
                         ember.cuda.get_device_name, ember.cuda.initial_seed):
        with pytest.raises(RuntimeError, match="CuPy|NVIDIA driver|No CUDA GPUs"):
            needs_device()
    assert ember.accelerator.is_available() is False
    assert ember.accelerator.current_accelerator() is None


@needs_torch
def test_cuda_namespace_matches_torch_cpu_build():
    assert ember.cuda.is_available() == torch.cuda.is_available()
    assert ember.cuda.device_count() == torch.cuda.device_count()
    assert ember.accelerator.is_available() == torch.accelerator.is_available()


def test_tensor_cuda_and_pinned_memory():
    t = ember.ones(2)
    assert t.is_pinned() is False
    with pytest.raises(RuntimeError, match="Cannot access accelerator device when none "
                                           "is available."):
        t.pin_memory()
    with pytest.raises(RuntimeError, match="CuPy|NVIDIA driver|No CUDA GPUs"):
        t.cuda()


def test_backends_flags_keep_their_values():
    cudnn = ember.backends.cudnn
    assert (cudnn.enabled, cudnn.benchmark, cudnn.deterministic) == (True, False, False)
    assert cudnn.is_available() is False
    with cudnn.flags(enabled=False, benchmark=True):
        assert cudnn.benchmark is True and cudnn.enabled is False
    assert cudnn.benchmark is False and cudnn.enabled is True
    matmul = ember.backends.cuda.matmul
    assert matmul.allow_tf32 is False
    matmul.allow_tf32 = True
    try:
        assert matmul.allow_tf32 is True
    finally:
        matmul.allow_tf32 = False
    with pytest.raises(AttributeError, match="Unknown attribute allow_tf16"):
        matmul.allow_tf16 = True
    assert ember.backends.mps.is_available() is False
    assert ember.backends.cpu.get_cpu_capability() in ("AVX512", "AVX2", "DEFAULT")
    assert ember.backends.cuda.flash_sdp_enabled() is True


@needs_torch
def test_backends_defaults_match_torch():
    for name in ("enabled", "benchmark", "deterministic", "allow_tf32"):
        assert getattr(ember.backends.cudnn, name) == getattr(torch.backends.cudnn, name)
    for name in ("allow_tf32", "allow_fp16_reduced_precision_reduction",
                 "allow_bf16_reduced_precision_reduction"):
        assert getattr(ember.backends.cuda.matmul, name) == \
            getattr(torch.backends.cuda.matmul, name)


def test_default_device_and_global_flags():
    assert ember.get_default_device() == ember.device("cpu")
    ember.set_default_device("cpu")
    ember.set_default_device(None)
    with pytest.raises(RuntimeError, match="CuPy|NVIDIA driver|No CUDA GPUs"):
        ember.set_default_device("cuda")
    assert ember.get_default_device() == ember.device("cpu")
    assert ember.get_float32_matmul_precision() == "highest"
    ember.set_float32_matmul_precision("high")
    try:
        assert ember.get_float32_matmul_precision() == "high"
        with pytest.warns(UserWarning, match="is not one of"):
            ember.set_float32_matmul_precision("fastest")
        assert ember.get_float32_matmul_precision() == "high"
    finally:
        ember.set_float32_matmul_precision("highest")
    ember.use_deterministic_algorithms(True, warn_only=True)
    try:
        assert ember.are_deterministic_algorithms_enabled()
        assert ember.is_deterministic_algorithms_warn_only_enabled()
    finally:
        ember.use_deterministic_algorithms(False)


# ----------------------------------------------------------- save / load

def _round_trip(obj, **load_args):
    buffer = io.BytesIO()
    ember.save(obj, buffer)
    buffer.seek(0)
    return ember.load(buffer, **load_args)


def test_numpy_arrays_inside_saved_objects_come_back_as_arrays():
    arrays = {"f": np.linspace(0, 1, 6).reshape(2, 3), "i": np.arange(4, dtype=np.int16),
              "b": np.array([True, False]), "scalar": np.array(3.5),
              "strided": np.arange(10.0)[::3], "big_endian": np.arange(3, dtype=">i4")}
    loaded = _round_trip({"arrays": arrays, "t": ember.ones(2), "step": 3})
    for name, array in arrays.items():
        got = loaded["arrays"][name]
        assert isinstance(got, np.ndarray)
        np.testing.assert_array_equal(got, array)
        assert got.dtype == array.dtype.newbyteorder("=")
    assert loaded["step"] == 3 and isinstance(loaded["t"], ember.Tensor)
    with pytest.raises(TypeError, match="NumPy array of dtype complex128"):
        ember.save({"c": np.zeros(2, complex)}, io.BytesIO())
    with pytest.raises(TypeError, match="dtype object"):
        ember.save({"o": np.array([None])}, io.BytesIO())


def test_saving_a_module_or_optimizer_says_to_save_its_state_dict():
    model = ember.nn.Linear(2, 2)
    with pytest.raises(TypeError, match=r"cannot save a whole Linear.*state_dict\(\)"):
        ember.save(model, io.BytesIO())
    opt = ember.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(TypeError, match=r"cannot save a whole SGD at key path \['opt'\]"):
        ember.save({"opt": opt}, io.BytesIO())
    state = _round_trip({"model": model.state_dict(), "opt": opt.state_dict()})
    fresh = ember.nn.Linear(2, 2)
    fresh.load_state_dict(state["model"])
    assert _same(fresh.weight, model.weight)


def test_load_accepts_torch_arguments():
    obj = {"w": ember.arange(6.0).reshape(2, 3)}
    for map_location in (None, "cpu", ember.device("cpu"), {"cpu": "cpu"},
                         lambda storage, location: storage):
        for weights_only in (None, True, False):
            got = _round_trip(obj, map_location=map_location, weights_only=weights_only)
            assert _same(got["w"], obj["w"])
    with pytest.raises(RuntimeError, match="Attempting to deserialize object on a CUDA "
                                           "device but ember.cuda.is_available"):
        _round_trip(obj, map_location="cuda:0")
    with pytest.raises(RuntimeError, match="CUDA"):
        _round_trip(obj, map_location={"cpu": "cuda:1"})
    with pytest.raises(TypeError, match="must return the storage it was given"):
        _round_trip(obj, map_location=lambda storage, location: 7)
    with pytest.raises(TypeError, match="no pickles"):
        _round_trip(obj, pickle_module=__import__("pickle"))
    with pytest.raises(ValueError, match="must be a file path in order to use the mmap"):
        _round_trip(obj, mmap=True)


def test_load_mmap_views_the_file_copy_on_write(tmp_path):
    path = tmp_path / "weights.safetensors"
    obj = {"w": ember.arange(12.0).reshape(3, 4), "n": ember.arange(5),
           "flag": ember.tensor([True, False]), "empty": ember.zeros(0, 2),
           "meta": {"epoch": 4}}
    ember.save(obj, path)
    mapped = ember.load(path, mmap=True)
    for name in ("w", "n", "flag", "empty"):
        assert _same(mapped[name], obj[name])
        assert mapped[name].shape == obj[name].shape
    assert mapped["meta"] == {"epoch": 4}
    mapped["w"].add_(100)                 # stays in this process
    assert _same(ember.load(path)["w"], obj["w"])


def test_safe_globals_are_kept_and_restored():
    ember.serialization.clear_safe_globals()
    ember.serialization.add_safe_globals([np.dtype])
    with ember.serialization.safe_globals([np.ndarray]):
        assert ember.serialization.get_safe_globals() == [np.dtype, np.ndarray]
    assert ember.serialization.get_safe_globals() == [np.dtype]
    ember.serialization.clear_safe_globals()
    assert ember.serialization.get_safe_globals() == []


# --------------------------------------------------------------- compile

def scriptable(a, b):
    return a * b + 1.0


def not_scriptable(a):
    return {"out": a * 2}


class TwoLayer(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = ember.nn.Linear(3, 4)
        self.drop = ember.nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(self.fc(x)).relu()


def test_compile_scripts_a_function_and_matches_eager():
    compiled = ember.compile(scriptable)
    a, b = ember.randn(5), ember.randn(5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # no fallback note for a scriptable function
        assert _close(compiled(a, b), scriptable(a, b))
    assert compiled._compiler.programs[None] is not None
    assert compiled.__name__ == "scriptable"
    decorated = ember.compile(fullgraph=True, mode="max-autotune")(scriptable)
    assert _close(decorated(a, b), scriptable(a, b))
    assert ember.compile(scriptable, disable=True) is scriptable


def test_compile_falls_back_with_one_line_and_fullgraph_raises():
    compiled = ember.compile(not_scriptable)
    with pytest.warns(UserWarning, match=r"^ember.compile: running not_scriptable "
                                         r"eagerly: [^\n]+$"):
        out = compiled(ember.ones(2))
    assert _same(out["out"], ember.full((2,), 2.0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # the note is given once
        compiled(ember.ones(2))
    with pytest.raises(ember.jit.ScriptError):
        ember.compile(not_scriptable, fullgraph=True)(ember.ones(2))


def test_compile_falls_back_for_argument_types_the_script_cannot_take():
    compiled = ember.compile(scriptable)
    with pytest.warns(UserWarning, match="running scriptable eagerly"):
        assert compiled(2.0, 3.0) == 7.0


def test_compiled_module_keys_gradients_and_train_eval():
    ember.manual_seed(0)
    model = TwoLayer()
    compiled = ember.compile(model)
    assert list(compiled.state_dict()) == ["_orig_mod.fc.weight", "_orig_mod.fc.bias"]
    assert compiled.fc is model.fc
    x = ember.randn(8, 3)
    compiled.eval()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _close(compiled(x), model(x))
    compiled(x).sum().backward()
    expected = model.fc.weight.grad.clone()
    model.zero_grad()
    model(x).sum().backward()
    assert _close(model.fc.weight.grad, expected)
    compiled.train()          # a second program: dropout is live again
    out = compiled(ember.ones(64, 3))
    assert len(compiled._compiler.programs) == 2
    assert bool((out == 0).any())


@needs_torch
def test_compiled_module_state_dict_keys_match_torch():
    class TorchTwoLayer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(3, 4)
            self.drop = torch.nn.Dropout(0.5)

        def forward(self, x):
            return self.drop(self.fc(x)).relu()

    reference = torch.compile(TorchTwoLayer())
    assert list(ember.compile(TwoLayer()).state_dict()) == list(reference.state_dict())


# ------------------------------------------------------------ GradScaler

def _model_and_optimizer():
    ember.manual_seed(1)
    model = ember.nn.Linear(4, 1)
    return model, ember.optim.SGD(model.parameters(), lr=0.1)


def test_grad_scaler_scales_unscales_and_steps():
    model, opt = _model_and_optimizer()
    scaler = ember.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=2)
    x = ember.randn(8, 4)
    loss = model(x).pow(2).mean()
    scaled = scaler.scale(loss)
    assert _close(scaled, loss * 1024)
    scaled.backward()
    scaled_grad = model.weight.grad.clone()
    scaler.unscale_(opt)
    assert _close(model.weight.grad, scaled_grad / 1024)
    with pytest.raises(RuntimeError, match="unscale_\\(\\) has already been called"):
        scaler.unscale_(opt)
    before = model.weight.detach().clone()
    scaler.step(opt)
    assert not _same(model.weight, before)
    with pytest.raises(RuntimeError, match="step\\(\\) has already been called"):
        scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 1024.0 and scaler._get_growth_tracker() == 1
    opt.zero_grad()
    scaler.scale(model(x).sum()).backward()
    scaler.step(opt)
    scaler.update()      # the second clean step in a row: the scale grows
    assert scaler.get_scale() == 2048.0 and scaler._get_growth_tracker() == 0


def test_grad_scaler_skips_steps_with_inf_or_nan_and_backs_off():
    model, opt = _model_and_optimizer()
    scaler = ember.amp.GradScaler("cpu", init_scale=8.0)
    scaler.scale(model(ember.randn(2, 4)).sum()).backward()
    model.bias.grad.fill_(float("nan"))
    before = model.weight.detach().clone()
    assert scaler.step(opt) is None
    assert _same(model.weight, before)
    scaler.update()
    assert scaler.get_scale() == 4.0
    scaler.update(new_scale=64.0)
    assert scaler.get_scale() == 64.0
    with pytest.raises(AssertionError, match="new_scale should be a float"):
        scaler.update(new_scale=ember.ones(2))


def test_grad_scaler_state_dict_and_disabled_forms():
    scaler = ember.amp.GradScaler("cpu", init_scale=16.0, growth_interval=7)
    state = scaler.state_dict()
    assert state == {"scale": 16.0, "growth_factor": 2.0, "backoff_factor": 0.5,
                     "growth_interval": 7, "_growth_tracker": 0}
    other = ember.amp.GradScaler("cpu")
    other.load_state_dict(state)
    assert other.state_dict() == state
    with pytest.warns(UserWarning, match="CUDA is not available.  Disabling."):
        disabled = ember.amp.GradScaler()
    assert not disabled.is_enabled() and disabled.state_dict() == {}
    loss = ember.ones(())
    assert disabled.scale(loss) is loss and disabled.get_scale() == 1.0
    with pytest.raises(AssertionError, match="growth factor must be > 1.0"):
        ember.amp.GradScaler("cpu", growth_factor=1.0)
    with pytest.raises(RuntimeError, match="Closure use is not currently supported"):
        model, opt = _model_and_optimizer()
        ember.amp.GradScaler("cpu").step(opt, closure=lambda: 0)


@needs_torch
def test_grad_scaler_matches_torch_over_a_run_with_overflows():
    """The same gradients (with infs on some steps) give PyTorch's scales,
    growth trackers and parameters, step for step."""
    weights = np.linspace(-1, 1, 4, dtype=np.float32)
    ours_p = ember.tensor(weights, requires_grad=True)
    theirs_p = torch.tensor(weights, requires_grad=True)
    ours_opt = ember.optim.SGD([ours_p], lr=0.5)
    theirs_opt = torch.optim.SGD([theirs_p], lr=0.5)
    ours = ember.amp.GradScaler("cpu", init_scale=4.0, growth_interval=2)
    theirs = torch.amp.GradScaler("cpu", init_scale=4.0, growth_interval=2)
    for step in range(7):
        poison = float("inf") if step in (2, 5) else 1.0
        for p, opt, scaler, lib in ((ours_p, ours_opt, ours, ember),
                                    (theirs_p, theirs_opt, theirs, torch)):
            opt.zero_grad()
            loss = (p * p).sum() * poison
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        assert ours.state_dict() == theirs.state_dict()
        np.testing.assert_allclose(ours_p.detach().numpy(), theirs_p.detach().numpy(),
                                   rtol=1e-6)


@needs_torch
def test_type_as_like_torch():
    for lib in (ember, torch):
        x = lib.tensor([1.5, -2.0], requires_grad=True)
        y = x.type_as(lib.tensor([1], dtype=lib.int32))
        assert y.dtype == lib.int32 and y.tolist() == [1, -2]
        assert x.type_as(lib.zeros(1)) is x          # already the type: itself
        z = x.type_as(lib.zeros(1, dtype=lib.float64))
        z.sum().backward()
        assert x.grad.tolist() == [1.0, 1.0]
    with pytest.raises(TypeError, match=r"type_as\(\): argument 'other' \(position 1\) "
                                        r"must be Tensor, not float"):
        ember.ones(2).type_as(2.0)
