"""ember.Generator, generator= on the random functions, and the samplers
(issue 13, "Random numbers").

ember's bit generator is xoshiro256** (c/th/THRandom.h), not PyTorch's
Mersenne Twister, so a seed cannot give PyTorch's numbers bit for bit, and
get_state() is ember's own 40 bytes.  What is tested instead: the same seed
gives the same numbers, a generator's stream is independent of the default
one, the distributions are right (moments and chi-square with fixed seeds,
bounds several standard errors wide, which a biased sampler fails), and the
shapes, dtypes, defaults and error messages are PyTorch's.
"""

import math

import numpy as np
import pytest

import ember


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def default_state_restored():
    """Each test leaves the default generator as it found it."""
    state = ember.get_rng_state()
    yield
    ember.set_rng_state(state)


def gen(seed=0):
    return ember.Generator().manual_seed(seed)


# ---- the Generator object ---------------------------------------------------------------


def test_generator_object(torch):
    g = ember.Generator()
    assert isinstance(g, ember.Generator)
    assert g.initial_seed() == torch.Generator().initial_seed() == 67280421310721
    assert g.device == ember.device("cpu")
    assert ember.Generator("cpu").device.type == "cpu"
    assert ember.Generator(device=ember.device("cpu")).initial_seed() == 67280421310721
    assert g.manual_seed(5) is g and g.initial_seed() == 5
    g.manual_seed(-1)  # wraps to 64 bits, as in torch
    assert g.initial_seed() == torch.Generator().manual_seed(-1).initial_seed() == 2**64 - 1
    s = g.seed()
    assert isinstance(s, int) and 0 <= s < 2**64 and g.initial_seed() == s
    with pytest.raises(TypeError, match="manual_seed expected an int"):
        g.manual_seed(1.5)
    with pytest.raises((RuntimeError, ValueError, TypeError)):
        ember.Generator(device="cuda")

    assert ember.manual_seed(3) is ember.default_generator
    assert ember.initial_seed() == ember.default_generator.initial_seed() == 3
    assert ember.random.default_generator is ember.default_generator
    s = ember.seed()
    assert ember.initial_seed() == s


def test_state_roundtrip_and_validation(torch):
    g = gen(11)
    state = g.get_state()
    assert state.dtype == ember.uint8 and state.shape == (40,)
    first = ember.rand(5, generator=g)
    assert g.set_state(state) is g
    assert ember.rand(5, generator=g).tolist() == first.tolist()
    assert g.initial_seed() == 11

    # torch's kinds of error: TypeError for a non-byte tensor, RuntimeError
    # for a bad size
    with pytest.raises(TypeError, match="RNG state must be an ember.ByteTensor"):
        g.set_state(ember.zeros(40))
    with pytest.raises(TypeError):
        torch.Generator().set_state(torch.zeros(40))
    with pytest.raises(RuntimeError, match="Expected an RNG state of size 40 but found "
                                           "the input RNG state size to be 3"):
        g.set_state(ember.zeros(3, dtype=ember.uint8))
    with pytest.raises(RuntimeError, match="all zero"):
        g.set_state(ember.zeros(40, dtype=ember.uint8))
    with pytest.raises(TypeError):
        g.set_state([0] * 40)
    assert ember.rand(5, generator=g.set_state(state)).tolist() == first.tolist()

    # a strided view of a state works too (it is read in logical order)
    doubled = ember.zeros(80, dtype=ember.uint8)
    doubled[::2] = state
    g.set_state(doubled[::2])
    assert ember.rand(5, generator=g).tolist() == first.tolist()

    # the default generator through get_rng_state/set_rng_state
    saved = ember.get_rng_state()
    a = ember.randn(4)
    ember.set_rng_state(saved)
    assert ember.randn(4).tolist() == a.tolist()


# ---- reproducibility and independence ---------------------------------------------------

SAMPLERS = {
    "rand": lambda g: ember.rand(3, 4, generator=g),
    "randn": lambda g: ember.randn(7, generator=g, dtype=ember.float64),
    "rand_like": lambda g: ember.rand_like(ember.zeros(5), generator=g),
    "randn_like": lambda g: ember.randn_like(ember.zeros(5), generator=g),
    "randint": lambda g: ember.randint(0, 100, (9,), generator=g),
    "randint_like": lambda g: ember.randint_like(ember.zeros(6), 50, generator=g),
    "randperm": lambda g: ember.randperm(20, generator=g),
    "multinomial": lambda g: ember.multinomial(ember.arange(1.0, 31.0), 10, generator=g),
    "multinomial_replacement":
        lambda g: ember.multinomial(ember.ones(2, 30), 40, True, generator=g),
    "bernoulli": lambda g: ember.bernoulli(ember.full((20,), 0.5), generator=g),
    "bernoulli_p": lambda g: ember.zeros(20).bernoulli(0.5, generator=g),
    "poisson": lambda g: ember.poisson(ember.full((10,), 20.0), g),
    "normal_tensors": lambda g: ember.normal(ember.zeros(6), ember.ones(6), generator=g),
    "normal_numbers": lambda g: ember.normal(1.0, 2.0, (6,), generator=g),
    "uniform_": lambda g: ember.zeros(8).uniform_(-2, 2, generator=g),
    "normal_": lambda g: ember.zeros(8).normal_(1, 3, generator=g),
    "random_": lambda g: ember.zeros(8, dtype=ember.int64).random_(generator=g),
    "exponential_": lambda g: ember.zeros(8).exponential_(2.0, generator=g),
    "bernoulli_": lambda g: ember.zeros(8).bernoulli_(0.3, generator=g),
    "bernoulli_tensor": lambda g: ember.zeros(8).bernoulli_(ember.full((8,), 0.5), generator=g),
}


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_same_seed_same_numbers_and_independent_generators(name):
    draw = SAMPLERS[name]
    first = draw(gen(42)).tolist()
    assert draw(gen(42)).tolist() == first
    g = gen(42)
    draw(g)
    assert any(draw(g).tolist() != first for _ in range(3))  # the stream moves on
    # a Generator's draws leave the default generator's stream alone
    ember.manual_seed(7)
    expected = ember.rand(4).tolist()
    ember.manual_seed(7)
    draw(gen(1))
    assert ember.rand(4).tolist() == expected
    # and the default generator is what generator=None means
    ember.manual_seed(42)
    assert draw(None).tolist() == first


def test_generator_argument_errors():
    for call in [lambda: ember.rand(2, generator=3), lambda: ember.randperm(3, generator="x"),
                 lambda: ember.zeros(2).uniform_(generator=1.5),
                 lambda: ember.multinomial(ember.ones(3), 1, generator=object())]:
        with pytest.raises(TypeError, match="argument 'generator' must be ember.Generator"):
            call()
    with pytest.raises(TypeError, match="unexpected keyword argument 'generator'"):
        ember.zeros(2, generator=gen())
    with pytest.raises(TypeError, match="unexpected keyword argument 'generator'"):
        ember.ones_like(ember.zeros(2), generator=gen())


# ---- the distributions -------------------------------------------------------------------


def chi_square(counts, weights):
    counts = np.asarray(counts, dtype=np.float64)
    expected = counts.sum() * np.asarray(weights, dtype=np.float64) / np.sum(weights)
    keep = expected > 0
    return float((((counts - expected) ** 2)[keep] / expected[keep]).sum())


def test_inplace_samplers_moments():
    g = gen(2024)
    x = ember.empty(20000, dtype=ember.float64)
    a = x.uniform_(-1.0, 3.0, generator=g).numpy()
    assert a.min() >= -1 and a.max() < 3
    assert abs(a.mean() - 1.0) < 0.05 and abs(a.var() - 16 / 12) < 0.06
    a = x.normal_(2.0, 0.5, generator=g).numpy()
    assert abs(a.mean() - 2.0) < 0.02 and abs(a.std() - 0.5) < 0.015
    a = x.exponential_(4.0, generator=g).numpy()
    assert a.min() >= 0 and abs(a.mean() - 0.25) < 0.01 and abs(a.std() - 0.25) < 0.015
    a = x.bernoulli_(0.2, generator=g).numpy()
    # (not np.unique: it leaks a reference per call in the debug build)
    assert np.all((a == 0) | (a == 1)) and abs(a.mean() - 0.2) < 0.015
    a = x.random_(3, 8, generator=g).numpy()
    assert chi_square(np.bincount(a.astype(int), minlength=8), [0, 0, 0, 1, 1, 1, 1, 1]) < 25
    assert a.min() == 3 and a.max() == 7


def test_random_defaults_follow_the_dtype(torch):
    g = gen(5)
    # random_(to) is [0, to); random_() spans the dtype's exact integers
    assert ember.zeros(200, dtype=ember.int64).random_(4, generator=g).max().item() == 3
    for dtype, high in [(ember.uint8, 256), (ember.int8, 128), (ember.bool, 2),
                        (ember.float32, 2**24 + 1)]:
        a = ember.zeros(2000, dtype=dtype).random_(generator=g).numpy().astype(np.float64)
        assert a.min() >= 0 and a.max() < high and a.max() >= (high - 1) * 0.9
        assert np.all(a == np.floor(a))
    t = torch.zeros(1000, dtype=torch.uint8).random_()
    assert int(t.max()) < 256  # the same ranges in torch
    big = ember.zeros(1000, dtype=ember.int64).random_(generator=g).numpy()
    assert big.min() >= 0 and big.max() > 2**62
    # random_(from, None) draws from [from, dtype's bound)
    a = ember.zeros(500, dtype=ember.int16).random_(30000, None, generator=g).numpy()
    assert a.min() >= 30000


@pytest.mark.parametrize("dtype, digits", [(ember.float16, 11), (ember.bfloat16, 8)])
def test_16_bit_samplers_fill_their_own_format(dtype, digits):
    """The samplers wrote 8-byte doubles into 2-byte elements (a heap
    overflow under ASan, garbage values): each draw is rounded once to the
    format.  uniform's u has the format's significant bits, as torch's."""
    g = gen(9)
    n = 20000
    u = ember.rand(n, dtype=dtype, generator=g)
    assert u.dtype == dtype and u.shape == (n,)
    values = u.float().numpy()
    assert values.min() >= 0 and values.max() < 1
    assert np.all(values * 2**digits == np.floor(values * 2**digits))
    assert abs(values.mean() - 0.5) < 0.02
    # a value that rounds up to `to` steps down one step of the format
    wide = ember.empty(n, dtype=dtype).uniform_(1, 2, generator=g).float().numpy()
    assert wide.min() >= 1 and wide.max() < 2 and wide.max() >= 2 - 2.0**(2 - digits)
    normal = ember.randn(n, dtype=dtype, generator=g).float().numpy()
    assert np.all(np.isfinite(normal))
    assert abs(normal.mean()) < 0.05 and abs(normal.std() - 1) < 0.05
    exponential = ember.empty(n, dtype=dtype).exponential_(2.0, generator=g).float().numpy()
    assert exponential.min() >= 0 and abs(exponential.mean() - 0.5) < 0.03
    counts = ember.poisson(ember.full((n,), 3.0, dtype=dtype), generator=g)
    assert counts.dtype == dtype and abs(counts.float().numpy().mean() - 3) < 0.1
    # random_() spans the format's exact integers, [0, 2**digits]
    whole = ember.zeros(n, dtype=dtype).random_(generator=g).float().numpy()
    assert whole.min() >= 0 and whole.max() <= 2**digits and whole.max() >= 2**digits * 0.9
    # a strided view is drawn densely, then copied in
    base = ember.zeros(4, 6, dtype=dtype)
    base[:, ::2].normal_(5.0, 0.1, generator=g)
    assert np.all(base[:, 1::2].float().numpy() == 0)
    assert np.all(np.abs(base[:, ::2].float().numpy() - 5) < 1)


def test_bernoulli_and_poisson():
    g = gen(8)
    p = ember.tensor([0.0, 0.3, 1.0]).expand(5000, 3)
    draws = ember.bernoulli(p, generator=g).numpy()
    assert draws.dtype == np.float32 and draws.shape == (5000, 3)
    assert draws[:, 0].sum() == 0 and draws[:, 2].sum() == 5000
    assert abs(draws[:, 1].mean() - 0.3) < 0.025
    # bernoulli_(tensor p) broadcasts p
    x = ember.zeros(4000, 2, dtype=ember.float64).bernoulli_(ember.tensor([0.9, 0.1]), generator=g)
    assert abs(x.numpy()[:, 0].mean() - 0.9) < 0.03 and abs(x.numpy()[:, 1].mean() - 0.1) < 0.03

    rates = ember.tensor([0.0, 2.5, 40.0]).expand(5000, 3)
    counts = ember.poisson(rates, generator=g).numpy()
    assert counts.dtype == np.float32 and np.all(counts == np.floor(counts))
    assert counts[:, 0].sum() == 0
    for column, rate in [(1, 2.5), (2, 40.0)]:
        assert abs(counts[:, column].mean() - rate) < 6 * math.sqrt(rate / 5000)
        assert abs(counts[:, column].var() / rate - 1) < 0.1


def test_multinomial_distribution():
    g = gen(99)
    weights = [1.0, 0.0, 2.0, 3.0, 4.0]  # unnormalised, one zero
    w = ember.tensor(weights)
    many = ember.multinomial(w, 20000, replacement=True, generator=g).numpy()
    counts = np.bincount(many, minlength=5)
    assert counts[1] == 0 and chi_square(counts, weights) < 20
    few = np.concatenate([ember.multinomial(w.expand(50, 5), 2, True, generator=g).numpy().ravel()
                          for _ in range(40)])
    assert chi_square(np.bincount(few, minlength=5), weights) < 20

    # without replacement: distinct, never a zero weight, first draw by the weights
    draws = ember.multinomial(w.expand(4000, 5), 3, generator=g).numpy()
    assert all(len(set(row)) == 3 for row in draws.tolist())
    assert not np.any(draws == 1)
    assert chi_square(np.bincount(draws[:, 0], minlength=5), weights) < 20
    assert sorted(ember.multinomial(w, 4, generator=g).tolist()) == [0, 2, 3, 4]


def test_randperm_is_a_uniform_permutation(torch):
    g = gen(3)
    p = ember.randperm(1000, generator=g)
    assert p.dtype == ember.int64 and sorted(p.tolist()) == list(range(1000))
    first = [ember.randperm(4, generator=g).tolist().index(0) for _ in range(2000)]
    assert chi_square(np.bincount(first, minlength=4), [1, 1, 1, 1]) < 20
    for dtype in [ember.float32, ember.int16, ember.uint8]:
        q = ember.randperm(200, dtype=dtype, generator=g)
        assert q.dtype == dtype and sorted(q.tolist()) == list(range(200))
        assert torch.randperm(200, dtype=getattr(torch, str(dtype).split(".")[1])).dtype
    assert ember.randperm(0).shape == torch.randperm(0).shape == (0,)
    assert ember.randperm(3, requires_grad=False).requires_grad is False
    with pytest.raises(RuntimeError, match="n is too large for result tensor type"):
        ember.randperm(300, dtype=ember.uint8)
    with pytest.raises(RuntimeError, match="negative dimension"):
        ember.randperm(-1)
    with pytest.raises(RuntimeError, match="negative dimension"):
        torch.randperm(-1)


# ---- shapes, dtypes, defaults, messages against torch ---------------------------------------


def test_shapes_and_dtypes_match_torch(torch):
    def same(make):
        e, t = make(ember), make(torch)
        assert tuple(e.shape) == tuple(t.shape)
        assert str(e.dtype).split(".")[1] == str(t.dtype).split(".")[1]

    same(lambda lib: lib.randint(10, (2, 3)))
    same(lambda lib: lib.randint(-5, 5, (4,), dtype=lib.int16))
    same(lambda lib: lib.randint(3, 10, size=(2,)))
    same(lambda lib: lib.randint_like(lib.zeros(2, 3), 5))
    same(lambda lib: lib.randint_like(lib.zeros(2, 3, dtype=lib.float64), 2, 5))
    same(lambda lib: lib.randint_like(lib.zeros(3), 7, dtype=lib.int32))
    same(lambda lib: lib.randperm(6))
    same(lambda lib: lib.randperm(6, dtype=lib.float64))
    same(lambda lib: lib.multinomial(lib.ones(7), 3))
    same(lambda lib: lib.multinomial(lib.ones(2, 7, dtype=lib.float64), 9, True))
    same(lambda lib: lib.ones(2, 7).multinomial(2))
    same(lambda lib: lib.bernoulli(lib.full((3, 2), 0.5, dtype=lib.float64)))
    same(lambda lib: lib.zeros(3, 2).bernoulli(0.5))
    same(lambda lib: lib.poisson(lib.ones(4, dtype=lib.float64)))
    same(lambda lib: lib.normal(lib.zeros(3), lib.ones(2, 1)))
    same(lambda lib: lib.normal(lib.zeros(3, dtype=lib.float64), 2.0))
    same(lambda lib: lib.normal(1.0, lib.ones(4)))
    same(lambda lib: lib.normal(0.0, 1.0, (2, 5)))
    same(lambda lib: lib.normal(0.0, 1.0, size=(3,), dtype=lib.float64))
    same(lambda lib: lib.rand_like(lib.zeros(2, dtype=lib.float64)))
    for name in ["uniform_", "normal_", "exponential_", "bernoulli_", "random_"]:
        same(lambda lib: getattr(lib.zeros(2, 3, dtype=lib.float64), name)())


def _message(call):
    try:
        call()
    except (RuntimeError, ValueError, TypeError) as error:
        return type(error), str(error)
    return None


_PROBABILITIES = "probability tensor contains either `inf`, `nan` or element < 0"
_BAD_INPUT = [  # (call, PyTorch's message); all RuntimeError
    (lambda lib: lib.multinomial(lib.tensor([-1.0, 2.0]), 1), _PROBABILITIES),
    (lambda lib: lib.multinomial(lib.tensor([1.0, float("nan")]), 1, True), _PROBABILITIES),
    (lambda lib: lib.multinomial(lib.tensor([1.0, float("inf")]), 1), _PROBABILITIES),
    (lambda lib: lib.multinomial(lib.tensor([0.0, 0.0]), 1),
     "invalid multinomial distribution (sum of probabilities <= 0)"),
    (lambda lib: lib.multinomial(lib.tensor([[1.0, 1.0], [0.0, 0.0]]), 1, True),
     "invalid multinomial distribution (sum of probabilities <= 0)"),
    (lambda lib: lib.multinomial(lib.ones(3), 4),
     "cannot sample n_sample > prob_dist.size(-1) samples without replacement"),
    (lambda lib: lib.multinomial(lib.ones(3), 0), "cannot sample n_sample <= 0 samples"),
    (lambda lib: lib.multinomial(lib.ones(1, 1, 1), 1), "prob_dist must be 1 or 2 dim"),
    (lambda lib: lib.zeros(3).exponential_(-1.0),
     "exponential_ expects lambda > 0.0, but found lambda=-1"),
    (lambda lib: lib.zeros(3).exponential_(0.0),
     "exponential_ expects lambda > 0.0, but found lambda=0"),
    (lambda lib: lib.zeros(3).bernoulli_(1.5),
     "bernoulli_ expects p to be in [0, 1], but got p=1.5"),
    (lambda lib: lib.zeros(3).uniform_(2, 1),
     "uniform_ expects to return a [from, to) range, but found from=2 > to=1"),
    (lambda lib: lib.zeros(3).normal_(0, -1), "normal expects std >= 0.0, but found std -1"),
    (lambda lib: lib.zeros(3).random_(5, 5),
     "random_ expects 'from' to be less than 'to', but got from=5 >= to=5"),
    (lambda lib: lib.normal(0.0, -1.0, (2,)), "normal expects std >= 0.0, but found std -1"),
    (lambda lib: lib.normal(lib.zeros(2), -1.0), "normal expects std >= 0.0, but found std -1"),
    (lambda lib: lib.normal(lib.zeros(2), lib.tensor([1.0, -1.0])),
     "normal expects all elements of std >= 0.0"),
    (lambda lib: lib.poisson(lib.tensor([-1.0])),
     "invalid Poisson rate, expected rate to be non-negative"),
    (lambda lib: lib.bernoulli(lib.tensor([1.5])),
     "Expected p_in >= 0 && p_in <= 1 to be true, but got false."),
]


@pytest.mark.parametrize("index", range(len(_BAD_INPUT)))
def test_bad_input_gets_torchs_message(index):
    call, message = _BAD_INPUT[index]
    assert _message(lambda: call(ember)) == (RuntimeError, message)


@pytest.mark.parametrize("index", range(len(_BAD_INPUT)))
def test_the_messages_are_torchs(index, torch):
    call, message = _BAD_INPUT[index]
    kind, text = _message(lambda: call(torch))
    assert kind is RuntimeError and text.startswith(message)


def test_multinomial_bad_dtype_and_not_enough_categories():
    with pytest.raises(RuntimeError, match="multinomial only supports floating-point dtypes "
                                           "for input, got: int64"):
        ember.multinomial(ember.tensor([1, 2]), 1)
    with pytest.raises(RuntimeError, match="not enough non-negative category to sample"):
        ember.multinomial(ember.tensor([1.0, 0.0, 0.0]), 2)


# ---- in place: versions, views, autograd ------------------------------------------------------


def test_inplace_bumps_the_version_and_fills_views():
    x = ember.zeros(4, 6)
    for name, args in [("uniform_", ()), ("normal_", ()), ("random_", (5,)),
                       ("exponential_", ()), ("bernoulli_", (0.5,)),
                       ("bernoulli_", (ember.full((6,), 0.5),))]:
        before = x._version
        assert getattr(x, name)(*args, generator=gen()) is x
        assert x._version > before, name
    x.fill_(-7.0)
    view = x[:, ::2]
    before = x._version
    view.uniform_(generator=gen())
    assert x._version > before
    a = x.numpy()
    assert np.all(a[:, 1::2] == -7.0)
    assert np.all((a[:, ::2] >= 0) & (a[:, ::2] < 1))
    with pytest.raises(RuntimeError):
        ember.zeros(1).expand(3).uniform_()  # overlapping elements


def test_inplace_autograd():
    leaf = ember.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        leaf.uniform_()
    with ember.no_grad():
        leaf.normal_(generator=gen())
    y = leaf * 2
    y.exponential_(generator=gen())
    assert type(y.grad_fn).__name__ == "ExponentialBackward0"
    y.sum().backward()
    assert leaf.grad.tolist() == [0.0, 0.0, 0.0]
    p = ember.full((3,), 0.5, requires_grad=True)
    drawn = ember.bernoulli(p, generator=gen())
    assert type(drawn.grad_fn).__name__ == "BernoulliBackward0"
    drawn.sum().backward()
    assert p.grad.tolist() == [0.0, 0.0, 0.0]
    assert ember.multinomial(p, 2).requires_grad is False


def test_normal_gradcheck():
    mean = ember.tensor([0.5, -1.0, 2.0], dtype=ember.float64, requires_grad=True)
    std = ember.tensor([1.0, 0.5, 2.0], dtype=ember.float64, requires_grad=True)
    # the same noise on every evaluation: a fresh generator with one seed
    assert ember.autograd.gradcheck(lambda m, s: ember.normal(m, s, generator=gen(4)),
                                    (mean, std))
    assert ember.autograd.gradcheck(lambda m: ember.normal(m, 2.0, generator=gen(4)), (mean,))


# ---- nn.init and dropout ---------------------------------------------------------------------------


def test_nn_init_takes_a_generator():
    init = ember.nn.init
    for fn, args in [(init.uniform_, (-1.0, 1.0)), (init.normal_, (0.0, 2.0)),
                     (init.xavier_uniform_, ()), (init.xavier_normal_, ()),
                     (init.kaiming_uniform_, ()), (init.kaiming_normal_, ())]:
        a = fn(ember.empty(4, 5), *args, generator=gen(12))
        b = fn(ember.empty(4, 5), *args, generator=gen(12))
        assert a.tolist() == b.tolist(), fn.__name__
        ember.manual_seed(1)
        expected = ember.rand(3).tolist()
        ember.manual_seed(1)
        fn(ember.empty(4, 5), *args, generator=gen(13))
        assert ember.rand(3).tolist() == expected  # the default stream is untouched
    w = ember.nn.Parameter(ember.zeros(3, 3))
    init.uniform_(w, generator=gen())
    assert w.requires_grad and w.grad_fn is None and (w != 0).all()
    bound = math.sqrt(6 / 10)
    assert np.abs(init.xavier_uniform_(ember.empty(5, 5), generator=gen()).numpy()).max() <= bound


def test_dropout_follows_the_default_generator():
    x = ember.ones(100)
    ember.manual_seed(5)
    a = ember.nn.functional.dropout(x, 0.5)
    ember.manual_seed(5)
    b = ember.nn.functional.dropout(x, 0.5)
    assert a.tolist() == b.tolist()
    assert set(a.tolist()) <= {0.0, 2.0}


# ---- random_'s range rules on the CPU: PyTorch's random_from_to_impl -------

RANDOM_RANGE_CASES = [
    ("bool", (0, 10)), ("bool", (0, 2)), ("bool", ()), ("bool", (1, None)),
    ("bfloat16", (299, 300)), ("bfloat16", (257, 259)), ("bfloat16", (0, 300)),
    ("float16", (3000, None)), ("float16", (0, 5000)), ("float16", (-70000, 0)),
    ("float16", (-2**63, None)), ("float32", (0, 2**25)), ("int8", (0, 200)),
    ("uint8", (-1, 5)), ("int64", (-2**63, None)), ("int32", (5, None)),
    ("float64", (2**60, 2**60 + 5)), ("float32", (7, 3)),
]


def _random_outcome(lib, dtype, args):
    """(error type name, message) or ("ok", draws as int64 numbers), and the
    warnings' messages, of lib's random_ on 2000 elements."""
    import warnings
    t = lib.empty(2000, dtype=getattr(lib, dtype))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            t.random_(*args)
            outcome = ("ok", t.double().tolist())
        except Exception as error:  # compared with torch's below
            outcome = (type(error).__name__, str(error))
    # torch appends "(Triggered internally at <its source file>)"
    return outcome, [str(w.message).split(" (Triggered internally")[0] for w in caught]


@pytest.mark.parametrize("dtype,args", RANDOM_RANGE_CASES)
def test_random_range_rules_match_torch(dtype, args):
    torch = pytest.importorskip("torch")
    (kind, result), warned = _random_outcome(ember, dtype, args)
    (torch_kind, torch_result), torch_warned = _random_outcome(torch, dtype, args)
    assert warned == torch_warned
    if torch_kind == "NotImplementedError":  # ember has no such error kind
        assert (kind, result) == ("RuntimeError", torch_result)
        return
    assert kind == torch_kind
    if kind != "ok":
        assert result == torch_result
        return
    low = args[0] if len(args) == 2 else 0
    high = args[1] if len(args) == 2 and args[1] is not None else None
    # inside [from, to): from as the dtype stores it (float ends round)
    assert min(result) >= float(ember.tensor(low).to(getattr(ember, dtype)).double().item())
    if high is not None:
        assert max(result) < high


@pytest.mark.parametrize("dtype,low,high", [
    ("bfloat16", 0, 300), ("bfloat16", 250, 300), ("bfloat16", 1000, 1030),
    ("float16", 2000, 2100), ("float16", 4000, 4010), ("float16", 0, 2051)])
def test_narrow_random_never_reaches_to(dtype, low, high):
    """random_(low, high) of a 16-bit float stays below high though the int64
    draws round in the conversion (Note [random_'s float ends])."""
    gen = ember.Generator().manual_seed(5)
    t = ember.empty(20000, dtype=getattr(ember, dtype))
    with pytest.warns(UserWarning, match="Due to precision limitations"):
        t.random_(low, high, generator=gen)
    values = np.asarray(t.double().tolist())
    assert values.max() < high and values.min() >= low - 16
