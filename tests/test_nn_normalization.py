"""BatchNorm, InstanceNorm, GroupNorm and RMSNorm (issue 12) against PyTorch:
outputs, every gradient and the running statistics over several training
steps, then eval; gradchecks of the functional forms; errors.  Pure
Python composites over existing C operators."""

import warnings

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.autograd import gradcheck

torch = pytest.importorskip("torch")


def copy_state(ours, theirs):
    ours.load_state_dict({k: ember.tensor(v.detach().numpy().copy())
                          for k, v in theirs.state_dict().items()})


def check_same(ours, theirs, rtol=1e-9, atol=1e-11):
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(),
                               rtol=rtol, atol=atol)


def run_steps(ours, theirs, shape, steps=3, seed=0):
    """Training steps on the same data, then one in eval: outputs, input and
    parameter gradients, and buffers agree after every step."""
    rng = np.random.default_rng(seed)
    for step in range(steps + 1):
        if step == steps:
            ours.eval()
            theirs.eval()
        x = rng.standard_normal(shape) * 2 + 0.5
        upstream = rng.standard_normal(shape)
        ours_x = ember.tensor(x, requires_grad=True)
        theirs_x = torch.tensor(x, requires_grad=True)
        ours_out, theirs_out = ours(ours_x), theirs(theirs_x)
        check_same(ours_out, theirs_out)
        (ours_out * ember.tensor(upstream)).sum().backward()
        (theirs_out * torch.tensor(upstream)).sum().backward()
        check_same(ours_x.grad, theirs_x.grad)
        for (name, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):
            check_same(p.grad, q.grad)
            p.grad = None
            q.grad = None
        for (name, b), (_, c) in zip(ours.named_buffers(), theirs.named_buffers()):
            check_same(b, c)


CASES = [
    ("BatchNorm1d", (4,), {}, (6, 4)),
    ("BatchNorm1d", (4,), {"momentum": None}, (5, 4, 3)),
    ("BatchNorm1d", (4,), {"affine": False}, (6, 4)),
    ("BatchNorm2d", (3,), {}, (2, 3, 4, 5)),
    ("BatchNorm2d", (3,), {"track_running_stats": False}, (2, 3, 2, 2)),
    ("BatchNorm2d", (3,), {"bias": False, "momentum": 0.3}, (2, 3, 1, 1)),
    ("BatchNorm3d", (2,), {}, (2, 2, 2, 3, 2)),
    ("InstanceNorm1d", (3,), {}, (2, 3, 5)),
    ("InstanceNorm1d", (3,), {"affine": True, "track_running_stats": True}, (2, 3, 5)),
    ("InstanceNorm2d", (3,), {"affine": True}, (2, 3, 4, 4)),
    ("InstanceNorm2d", (3,), {}, (3, 4, 4)),            # unbatched
    ("GroupNorm", (2, 4), {}, (3, 4, 5)),
    ("GroupNorm", (1, 4), {"affine": False}, (2, 4, 2, 3)),
    ("GroupNorm", (4, 4), {"bias": False}, (2, 4)),
    ("RMSNorm", (5,), {}, (3, 4, 5)),
    ("RMSNorm", ([4, 5],), {"eps": 1e-3}, (3, 4, 5)),
    ("RMSNorm", (5,), {"elementwise_affine": False}, (2, 5)),
]


@pytest.mark.parametrize("name, args, kwargs, shape", CASES)
def test_layer_matches_torch_over_training_and_eval(name, args, kwargs, shape):
    theirs = getattr(torch.nn, name)(*args, **kwargs).double()
    ours = getattr(nn, name)(*args, **kwargs).double()
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    with torch.no_grad():                          # parameters off their init values
        for p in theirs.parameters():
            p.add_(torch.linspace(-0.5, 0.5, p.numel(), dtype=p.dtype).reshape(p.shape))
    copy_state(ours, theirs)
    run_steps(ours, theirs, shape)


def test_batch_norm_cumulative_average_and_batches_tracked():
    ours, theirs = nn.BatchNorm1d(2, momentum=None), torch.nn.BatchNorm1d(2, momentum=None)
    run_steps(ours.double(), theirs.double(), (4, 2), steps=5)
    assert ours.num_batches_tracked.item() == theirs.num_batches_tracked.item() == 5


FUNCTIONAL = [
    lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
    lambda x, w, b: F.batch_norm(x, ember.linspace(-1, 1, 3, dtype=ember.float64),
                                 ember.linspace(0.5, 2, 3, dtype=ember.float64), w, b),
    lambda x, w, b: F.instance_norm(x, weight=w, bias=b),
    lambda x, w, b: F.group_norm(x, 3, w, b),
    lambda x, w, b: F.rms_norm(x, [4], None) * 1.0,
]


@pytest.mark.parametrize("index", range(len(FUNCTIONAL)))
def test_functional_gradcheck(index):
    rng = np.random.default_rng(index)
    x = ember.tensor(rng.standard_normal((2, 3, 4)), requires_grad=True)
    w = ember.tensor(rng.standard_normal(3), requires_grad=True)
    b = ember.tensor(rng.standard_normal(3), requires_grad=True)
    assert gradcheck(FUNCTIONAL[index], (x, w, b))


def test_functional_forms_match_torch():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 3, 5))
    for ours_fn, theirs_fn in [
        (lambda m: F.batch_norm(ember.tensor(x), m[0], m[1], training=True, momentum=0.2),
         lambda m: torch.nn.functional.batch_norm(torch.tensor(x), m[0], m[1], training=True,
                                                  momentum=0.2)),
        (lambda m: F.instance_norm(ember.tensor(x), m[0], m[1], momentum=0.3),
         lambda m: torch.nn.functional.instance_norm(torch.tensor(x), m[0], m[1],
                                                     momentum=0.3)),
    ]:
        ours_stats = [ember.zeros(3, dtype=ember.float64), ember.ones(3, dtype=ember.float64)]
        theirs_stats = [torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)]
        check_same(ours_fn(ours_stats), theirs_fn(theirs_stats))
        for ours_s, theirs_s in zip(ours_stats, theirs_stats):
            check_same(ours_s, theirs_s)
    check_same(F.rms_norm(ember.tensor(x), (5,)),
               torch.nn.functional.rms_norm(torch.tensor(x), (5,)))
    check_same(F.group_norm(ember.tensor(x), 1), torch.nn.functional.group_norm(torch.tensor(x), 1))


def test_float32_layers_match_torch():
    for name, args, shape in [("BatchNorm2d", (3,), (2, 3, 4, 4)), ("GroupNorm", (3, 3), (2, 3, 4)),
                              ("RMSNorm", (4,), (2, 3, 4))]:
        theirs, ours = getattr(torch.nn, name)(*args), getattr(nn, name)(*args)
        x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(ours(ember.tensor(x)).detach().numpy(),
                                   theirs(torch.tensor(x)).detach().numpy(), rtol=1e-5,
                                   atol=1e-5)


def _same_error(ours_call, theirs_call):
    with pytest.raises(Exception) as theirs_info:
        theirs_call()
    with pytest.raises(type(theirs_info.value)) as ours_info:
        ours_call()
    assert str(ours_info.value) == str(theirs_info.value).replace("torch.", "ember.")


def test_errors_match_torch():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _same_error(lambda: nn.BatchNorm2d(3)(ember.ones(2, 3)),
                    lambda: torch.nn.BatchNorm2d(3)(torch.ones(2, 3)))
        _same_error(lambda: nn.BatchNorm1d(3)(ember.ones(1, 3)),
                    lambda: torch.nn.BatchNorm1d(3)(torch.ones(1, 3)))
        _same_error(lambda: nn.GroupNorm(3, 4), lambda: torch.nn.GroupNorm(3, 4))
        _same_error(lambda: F.group_norm(ember.ones(2, 3, 4), 2),
                    lambda: torch.nn.functional.group_norm(torch.ones(2, 3, 4), 2))
        _same_error(lambda: nn.InstanceNorm1d(3)(ember.ones(3)),
                    lambda: torch.nn.InstanceNorm1d(3)(torch.ones(3)))
        _same_error(lambda: nn.RMSNorm(4)(ember.ones(2, 3)),
                    lambda: torch.nn.RMSNorm(4)(torch.ones(2, 3)))
