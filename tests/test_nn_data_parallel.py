"""nn.DataParallel against PyTorch on a machine without CUDA: the module is
called directly, state_dict keys carry the `module.` prefix and load in
both directions, repr, attributes, training gives the same gradients; and
ember's one-device rule: several CUDA devices asked for raise a clear
error (checked with ember.cuda's answers replaced, before any GPU use).
Pure Python."""

import numpy as np
import pytest

import ember
import ember.nn as nn

torch = pytest.importorskip("torch")


def close(a, b, rtol=1e-10, atol=1e-12):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=rtol, atol=atol)


def make(lib):
    return lib.nn.Sequential(lib.nn.Linear(4, 5), lib.nn.ReLU(), lib.nn.BatchNorm1d(5), lib.nn.Linear(5, 2))


@pytest.mark.skipif(ember.cuda.is_available() or torch.cuda.is_available(), reason="the CPU behaviour")
def test_data_parallel_without_cuda_matches_torch():
    torch.manual_seed(0)
    theirs = torch.nn.DataParallel(make(torch).double())
    ours = nn.DataParallel(make(ember).double())
    assert ours.device_ids == theirs.device_ids == []
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert list(ours.state_dict())[0] == "module.0.weight"
    ours.load_state_dict({k: ember.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    opt, opt_t = ember.optim.SGD(ours.parameters(), lr=0.1), torch.optim.SGD(theirs.parameters(), lr=0.1)
    rng = np.random.default_rng(1)
    for _ in range(3):
        x = rng.standard_normal((6, 4))
        out, out_t = ours(ember.tensor(x)), theirs(torch.tensor(x))
        close(out, out_t)
        out.pow(2).sum().backward()
        out_t.pow(2).sum().backward()
        for (name, p), (name_t, q) in zip(ours.named_parameters(), theirs.named_parameters()):
            assert name == name_t
            close(p.grad, q.grad)
        opt.step(), opt_t.step(), opt.zero_grad(), opt_t.zero_grad()
    # The wrapped module's own state_dict (no prefix) loads into a bare model.
    bare = make(ember).double()
    bare.load_state_dict(ours.module.state_dict())
    ours.eval(), bare.eval()
    x = ember.tensor(rng.standard_normal((3, 4)))
    close(ours(x), bare(x))


@pytest.mark.skipif(ember.cuda.is_available() or torch.cuda.is_available(), reason="the CPU behaviour")
def test_data_parallel_kwargs_and_functional_form():
    class TwoInputs(nn.Module):
        def forward(self, a, b=1.0):
            return a * b

    wrapped = nn.DataParallel(TwoInputs())
    assert wrapped(ember.ones(2), b=3.0).tolist() == [3.0, 3.0]
    for lib in (nn, torch.nn):
        with pytest.raises(RuntimeError) as info:
            lib.parallel.data_parallel(lib.Linear(2, 2), torch.ones(2) if lib is torch.nn else ember.ones(2))
        assert str(info.value) == "device type could not be determined"


def test_several_cuda_devices_raise(monkeypatch):
    """ember's DataParallel refuses device_ids naming several GPUs; the
    check runs before anything touches a device, so the answers of
    ember.cuda are replaced to reach it on any machine."""
    monkeypatch.setattr(ember.cuda, "is_available", lambda: True)
    monkeypatch.setattr(ember.cuda, "device_count", lambda: 2)
    with pytest.raises(RuntimeError) as info:
        nn.DataParallel(nn.Linear(2, 2), device_ids=[0, 1])
    assert str(info.value) == (
        "ember's DataParallel runs on one device, but device_ids=[0, 1] asks for 2 devices; "
        "pass one device (e.g. device_ids=[0]) or use ember.nn.parallel.DistributedDataParallel "
        "with one process per GPU")
    with pytest.raises(RuntimeError, match="asks for 2 devices"):
        nn.DataParallel(nn.Linear(2, 2), device_ids=["cuda:0", ember.device("cuda", 1)])
    with pytest.raises(ValueError, match="Expected a cuda device, but got: cpu"):
        nn.DataParallel(nn.Linear(2, 2), device_ids=["cpu"])


@pytest.mark.skipif(not ember.cuda.is_available(), reason="needs a CUDA device")
def test_data_parallel_on_one_gpu():
    model = make(ember).double()
    reference = make(ember).double()
    reference.load_state_dict(model.state_dict())
    wrapped = nn.DataParallel(model)
    assert wrapped.device_ids == [0] and wrapped.output_device == 0
    assert all(p.device.type == "cuda" for p in wrapped.parameters())
    x = np.random.default_rng(0).standard_normal((6, 4))
    out = wrapped(ember.tensor(x))    # a CPU input is moved to the device
    assert out.device.type == "cuda"
    close(out.cpu(), reference(ember.tensor(x)), rtol=1e-9)
    wrapped.module.cpu()
    with pytest.raises(RuntimeError, match=r"module must have its parameters and buffers on device cuda:0"):
        wrapped(ember.tensor(x))
