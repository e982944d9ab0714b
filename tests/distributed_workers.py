"""Worker programs for tests/test_distributed.py, run under MPI:
`python -m ember.distributed.run --nproc-per-node N tests/distributed_workers.py CHECK...`.

Each check asserts; a failure raises, so the launcher aborts the job and
exits non-zero with the traceback.  Every rank can compute every rank's
input (`_inputs` is seeded by rank), so each collective is compared with
the same reduction done in this one process with NumPy.
"""
import json
import os
import sys
import time
import weakref

import numpy as np

import ember
import ember.distributed as dist
from ember import nn
from ember.distributed.run import BACKING_DIRECTORY_PARAMETERS

RANK = WORLD = None


def _inputs(rank, shape=(3, 4), dtype=np.float32, offset=0):
    rng = np.random.default_rng(100 + rank + offset)
    return rng.integers(-4, 5, size=shape).astype(dtype)


def _tensor(array, dtype=None):
    t = ember.tensor(array)
    return t if dtype is None else t.to(dtype)


def _close(tensor, expected, tol=1e-6):
    got = tensor.to(ember.float32).numpy() if tensor.dtype in (ember.float16, ember.bfloat16) \
        else tensor.numpy()
    np.testing.assert_allclose(got, expected, rtol=tol, atol=tol)


# ---- collectives ---------------------------------------------------------------

REDUCTIONS = {dist.ReduceOp.SUM: lambda xs: np.sum(xs, 0),
              dist.ReduceOp.PRODUCT: lambda xs: np.prod(xs, 0),
              dist.ReduceOp.MIN: lambda xs: np.min(xs, 0),
              dist.ReduceOp.MAX: lambda xs: np.max(xs, 0),
              dist.ReduceOp.AVG: lambda xs: np.mean(xs, 0)}


def check_all_reduce():
    everyone = [_inputs(r) for r in range(WORLD)]
    for op, oracle in REDUCTIONS.items():
        t = _tensor(everyone[RANK])
        address = t.data_ptr()
        assert dist.all_reduce(t, op=op) is None
        _close(t, oracle(everyone))
        assert t.data_ptr() == address
    # int64, non-contiguous, async, and 16-bit floats (reduced in float32)
    ints = _tensor(everyone[RANK].astype(np.int64))
    dist.all_reduce(ints, op=dist.ReduceOp.MAX)
    assert ints.tolist() == np.max(everyone, 0).astype(np.int64).tolist()
    columns = _tensor(everyone[RANK]).t()
    work = dist.all_reduce(columns, async_op=True)
    work.wait()
    assert work.is_completed()
    _close(columns, np.sum(everyone, 0).T)
    for half in (ember.float16, ember.bfloat16):
        t = _tensor(everyone[RANK], half)
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        _close(t, np.mean(everyone, 0), tol=1e-2)
    try:
        dist.all_reduce(_tensor(everyone[RANK].astype(np.int64)), op=dist.ReduceOp.AVG)
    except RuntimeError as exc:
        assert "result type Float can't be cast to the desired output type Long" in str(exc)
    else:
        raise AssertionError("AVG of integers must be refused")


def check_repeated_all_reduce():
    """DDP's prepared all-reduce (_RepeatedAllReduce) sums whatever the
    tensor holds at each call, in place, as all_reduce would: blocking,
    async, on a group with a timeout, and for tensors it stages
    (non-contiguous, 16-bit floats)."""
    from datetime import timedelta
    from ember.distributed.distributed_c10d import _RepeatedAllReduce
    everyone = [_inputs(r) for r in range(WORLD)]
    timed_group = dist.new_group(timeout=timedelta(seconds=60))
    cases = [(_tensor(everyone[RANK]), None, 1e-6),
             (_tensor(everyone[RANK]), timed_group, 1e-6),
             (_tensor(everyone[RANK]).t(), None, 1e-6),
             (_tensor(everyone[RANK], ember.bfloat16), None, 1e-2)]
    for t, group, tol in cases:
        address = t.data_ptr()
        all_reduce = _RepeatedAllReduce(t, group)
        for call in range(3):
            t.copy_(_tensor(everyone[RANK] * (call + 1)).reshape(t.shape))
            if call == 1:
                work = all_reduce(async_op=True)
                work.wait()
                assert work.is_completed()
            else:
                assert all_reduce() is None
            _close(t.reshape(everyone[RANK].shape), np.sum(everyone, 0) * (call + 1), tol)
            assert t.data_ptr() == address


def check_broadcast_reduce():
    everyone = [_inputs(r) for r in range(WORLD)]
    for root in range(WORLD):
        t = _tensor(everyone[RANK])
        dist.broadcast(t, src=root)
        _close(t, everyone[root])
        t = _tensor(everyone[RANK], ember.bfloat16)     # raw 16-bit words
        dist.broadcast(t, src=root)
        _close(t, everyone[root])
        t = _tensor(everyone[RANK])
        dist.reduce(t, dst=root, op=dist.ReduceOp.SUM)
        if RANK == root:
            _close(t, np.sum(everyone, 0))
    t = _tensor(everyone[RANK])
    dist.broadcast(t, group_src=WORLD - 1, async_op=True).wait()
    _close(t, everyone[-1])


def check_gathers_and_scatters():
    everyone = [_inputs(r, (2, 3)) for r in range(WORLD)]
    mine = _tensor(everyone[RANK])
    outputs = [ember.empty(2, 3) for _ in range(WORLD)]
    dist.all_gather(outputs, mine)
    for out, expected in zip(outputs, everyone):
        _close(out, expected)
    flat = ember.empty(2 * WORLD, 3)
    address = flat.data_ptr()
    dist.all_gather_into_tensor(flat, mine)
    _close(flat, np.concatenate(everyone))
    assert flat.data_ptr() == address
    stacked = ember.empty(WORLD, 2, 3, dtype=ember.float16)
    dist.all_gather_into_tensor(stacked, mine.to(ember.float16))
    _close(stacked, np.stack(everyone))
    big = [_inputs(r, (WORLD * 2, 3)) for r in range(WORLD)]
    for op in (dist.ReduceOp.SUM, dist.ReduceOp.MAX, dist.ReduceOp.AVG):
        out = ember.empty(2, 3)
        dist.reduce_scatter_tensor(out, _tensor(big[RANK]), op=op)
        _close(out, REDUCTIONS[op](big)[2 * RANK:2 * RANK + 2])
    root = WORLD - 1
    gathered = [ember.empty(2, 3) for _ in range(WORLD)] if RANK == root else None
    dist.gather(mine, gathered, dst=root)
    if RANK == root:
        for out, expected in zip(gathered, everyone):
            _close(out, expected)
    pieces = [_tensor(_inputs(r, (2, 3), offset=7)) for r in range(WORLD)]
    received = ember.empty(2, 3)
    dist.scatter(received, pieces if RANK == 0 else None, src=0)
    _close(received, _inputs(RANK, (2, 3), offset=7))


def check_async_collectives():
    """async_op=True takes MPI's nonblocking calls: the same results once
    wait() returns, several in flight at once."""
    everyone = [_inputs(r, (WORLD * 2, 3)) for r in range(WORLD)]
    summed = _tensor(everyone[RANK])
    scattered = ember.empty(2, 3)
    gathered = ember.empty(WORLD, WORLD * 2, 3)
    exchanged = ember.empty(WORLD * 2, 3)
    works = [dist.all_reduce(summed, async_op=True),
             dist.reduce_scatter_tensor(scattered, _tensor(everyone[RANK]), async_op=True),
             dist.all_gather_into_tensor(gathered, _tensor(everyone[RANK]), async_op=True),
             dist.all_to_all_single(exchanged, _tensor(everyone[RANK]), async_op=True),
             dist.barrier(async_op=True)]
    for work in works:
        work.wait()
        assert work.is_completed()
    _close(summed, np.sum(everyone, 0))
    _close(scattered, np.sum(everyone, 0)[2 * RANK:2 * RANK + 2])
    _close(gathered, np.stack(everyone))
    _close(exchanged, np.concatenate([e[2 * RANK:2 * RANK + 2] for e in everyone]))


def check_all_to_all():
    # even splits: block j of rank i goes to rank j as block i
    blocks = {(i, j): np.full((2, 3), 10 * i + j, np.float32)
              for i in range(WORLD) for j in range(WORLD)}
    source = _tensor(np.concatenate([blocks[RANK, j] for j in range(WORLD)]))
    out = ember.empty(2 * WORLD, 3)
    dist.all_to_all_single(out, source)
    _close(out, np.concatenate([blocks[i, RANK] for i in range(WORLD)]))
    # uneven splits: rank i sends i + j + 1 rows to rank j
    send = [RANK + j + 1 for j in range(WORLD)]
    recv = [i + RANK + 1 for i in range(WORLD)]
    source = ember.cat([ember.full((n, 2), float(10 * RANK + j)) for j, n in enumerate(send)])
    out = ember.empty(sum(recv), 2)
    dist.all_to_all_single(out, source, recv, send)
    expected = np.concatenate([np.full((n, 2), 10 * i + RANK, np.float32)
                               for i, n in enumerate(recv)])
    _close(out, expected)
    try:
        dist.all_to_all_single(out, source, recv, [1] * WORLD)
    except RuntimeError as exc:
        assert "Split sizes doesn't match total dim 0 size" in str(exc)
    else:
        raise AssertionError("bad split sizes must be refused")


def check_point_to_point_and_objects():
    right, left = (RANK + 1) % WORLD, (RANK - 1) % WORLD
    out = ember.full((4,), float(RANK))
    into = ember.empty(4)
    works = [dist.isend(out, dst=right, tag=3), dist.irecv(into, src=left, tag=3)]
    for work in works:
        work.wait()
    _close(into, np.full(4, left, np.float32))
    if RANK == 0:
        senders = set()
        for _ in range(WORLD - 1):
            t = ember.empty(2)
            sender = dist.recv(t)
            _close(t, np.full(2, sender, np.float32))
            senders.add(sender)
        assert senders == set(range(1, WORLD))
    else:
        dist.send(ember.full((2,), float(RANK)), dst=0)
    objects = [{"step": 3, "name": "x"}, [1.5, None], "s"] if RANK == 1 else [None] * 3
    dist.broadcast_object_list(objects, src=1)
    assert objects == [{"step": 3, "name": "x"}, [1.5, None], "s"], objects
    try:
        dist.broadcast_object_list([object()], src=RANK)
    except TypeError as exc:
        assert "JSON" in str(exc)
    else:
        raise AssertionError("a non-JSON object must be refused")
    dist.barrier()


def check_list_collectives():
    """reduce_scatter and all_to_all, the forms with lists of tensors."""
    pieces = {(i, j): _inputs(i, (2, 3), offset=10 + j) for i in range(WORLD)
              for j in range(WORLD)}
    for op in (dist.ReduceOp.SUM, dist.ReduceOp.MAX, dist.ReduceOp.AVG):
        out = ember.empty(2, 3)
        dist.reduce_scatter(out, [_tensor(pieces[RANK, j]) for j in range(WORLD)], op=op)
        _close(out, REDUCTIONS[op]([pieces[i, RANK] for i in range(WORLD)]))
    columns = ember.empty(3, 2).t()           # a non-contiguous output
    work = dist.reduce_scatter(columns, [_tensor(pieces[RANK, j]) for j in range(WORLD)],
                               async_op=True)
    work.wait()
    _close(columns, np.sum([pieces[i, RANK] for i in range(WORLD)], 0))
    # all_to_all: rank i sends rank j a (i + j + 1, 2) block; sizes differ
    sent = [ember.full((RANK + j + 1, 2), float(10 * RANK + j)) for j in range(WORLD)]
    received = [ember.empty(i + RANK + 1, 2) for i in range(WORLD)]
    received[0] = ember.empty(2, RANK + 1).t()  # a non-contiguous one
    work = dist.all_to_all(received, sent, async_op=True)
    work.wait()
    for i, out in enumerate(received):
        _close(out, np.full((i + RANK + 1, 2), 10 * i + RANK, np.float32))
    ints = [ember.full((3,), 100 * RANK + j, dtype=ember.int64) for j in range(WORLD)]
    got = [ember.empty(3, dtype=ember.int64) for _ in range(WORLD)]
    assert dist.all_to_all(got, ints) is None
    assert [t.tolist() for t in got] == [[100 * i + RANK] * 3 for i in range(WORLD)]
    try:
        dist.all_to_all(got, [t.to(ember.float32) for t in ints])
    except ValueError as exc:
        assert "Invalid usage of tensors with different dtypes" in str(exc)
    else:
        raise AssertionError("mixed dtypes must be refused")


def check_objects():
    """The object collectives (JSON, Note [Objects travel as JSON])."""
    def mine(rank):
        return {"rank": rank, "items": list(range(rank)), "pair": (rank, "x" * rank),
                "nan": float("nan") if rank else 0.5}

    def same(a, b):  # JSON brings a tuple back as a list; nan != nan
        return json.dumps(a) == json.dumps(b)

    everyone = [None] * WORLD
    dist.all_gather_object(everyone, mine(RANK))
    assert all(same(got, mine(r)) for r, got in enumerate(everyone)), everyone
    assert everyone[-1]["pair"] == [WORLD - 1, "x" * (WORLD - 1)]
    for dst in (None, WORLD - 1):
        root = 0 if dst is None else dst
        gathered = [None] * WORLD if RANK == root else None
        dist.gather_object(mine(RANK), gathered, dst=dst)
        if RANK == root:
            assert all(same(got, mine(r)) for r, got in enumerate(gathered))
    for src in (None, 1):
        root = 0 if src is None else src
        inputs = [[r, "to " * r] for r in range(WORLD)] if RANK == root else None
        output = ["untouched", "kept"]
        dist.scatter_object_list(output, inputs, src=src)
        assert output == [[RANK, "to " * RANK], "kept"], output
    objects = [{"from": 0}, 7] if RANK == 0 else [None, None]
    dist.broadcast_object_list(objects)                # src defaults to rank 0
    assert objects == [{"from": 0}, 7]
    # refusals happen on every rank before anything is sent
    for bad, fragment in ((ember.ones(2), "got an object of type Tensor"),
                          ({1: "a"}, "dict keys must be str, got int key 1"),
                          ([{2, 3}], "got an object of type set")):
        try:
            dist.all_gather_object([None] * WORLD, bad)
        except TypeError as exc:
            assert "sends objects as JSON, not pickle" in str(exc) and fragment in str(exc)
        else:
            raise AssertionError(f"{bad!r} must be refused")
    try:
        dist.scatter_object_list([], [0] * WORLD if RANK == 0 else None)
    except ValueError as exc:
        assert "to be a list of size at least 1" in str(exc)
    else:
        raise AssertionError("an empty output list must be refused")
    dist.barrier()


def _times_out(wait, fragment):
    try:
        wait()
    except RuntimeError as exc:
        assert fragment in str(exc), exc
    else:
        raise AssertionError("the wait must time out")


def check_timeouts():
    """Note [Timeouts]: a wait that outlives its timeout raises; the
    operation stays pending and completes once its peer comes."""
    from datetime import timedelta
    short = timedelta(milliseconds=300)
    group = dist.new_group(timeout=short)
    t = ember.full((3,), float(RANK))
    dist.all_reduce(t, group=group)               # nonblocking underneath
    _close(t, np.full(3, sum(range(WORLD)), np.float32))
    into = ember.empty(2)
    for wait_timeout, recv_group in ((None, group), (short, None)):
        if RANK == 0:   # nobody has sent yet
            work = dist.irecv(into, src=1, group=recv_group)
            _times_out(lambda: work.wait(wait_timeout), "Timed out waiting 300ms")
            assert not work.is_completed()
        dist.barrier(timeout=timedelta(seconds=60))
        if RANK == 1:
            dist.send(ember.full((2,), 5.0), dst=0, group=recv_group)
        if RANK == 0:
            work.wait()
            assert work.source_rank == 1 and into.tolist() == [5.0, 5.0]
    for bad in (lambda: dist.new_group(timeout=5), lambda: dist.barrier(timeout=5)):
        try:
            bad()
        except TypeError as exc:
            assert "Expected timeout argument to be of type datetime.timedelta, got 5" \
                in str(exc)
        else:
            raise AssertionError("a timeout must be a timedelta")
    dist.destroy_process_group(group)


def check_groups():
    evens = dist.new_group([r for r in range(WORLD) if r % 2 == 0])
    odds = dist.new_group([r for r in range(WORLD) if r % 2 == 1])
    mine, other = (evens, odds) if RANK % 2 == 0 else (odds, evens)
    assert other is dist.GroupMember.NON_GROUP_MEMBER
    assert dist.get_rank(other) == -1
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        untouched = ember.ones(2)
        assert dist.all_reduce(untouched, group=other) is None
    assert untouched.tolist() == [1.0, 1.0]
    assert "does not belong to the given group" in str(caught[0].message)
    members = [r for r in range(WORLD) if r % 2 == RANK % 2]
    assert dist.get_world_size(mine) == len(members)
    assert dist.get_rank(mine) == members.index(RANK)
    t = ember.full((3,), float(RANK))
    dist.all_reduce(t, group=mine)
    _close(t, np.full(3, sum(members), np.float32))
    t = ember.full((3,), float(RANK))
    dist.broadcast(t, src=members[-1], group=mine)  # src is a global rank
    _close(t, np.full(3, members[-1], np.float32))
    dist.destroy_process_group(mine)


def check_errors():
    flat = ember.empty(2 * WORLD + 1)
    try:
        dist.all_gather_into_tensor(flat, ember.ones(2))
    except RuntimeError as exc:
        assert "output tensor size must be equal to world_size" in str(exc)
    else:
        raise AssertionError("a wrong output size must be refused")
    try:
        dist.broadcast(ember.ones(2), src=0, group_src=0)
    except ValueError as exc:
        assert "Can't specify both group_rank and global_rank" in str(exc)
    else:
        raise AssertionError("src and group_src together must be refused")


# ---- DistributedSampler ------------------------------------------------------------

def check_sampler():
    from ember.utils.data import DataLoader, DistributedSampler
    data = list(range(11))
    sampler = DistributedSampler(data, seed=5)
    assert (sampler.num_replicas, sampler.rank) == (WORLD, RANK)
    mine = ember.tensor(list(sampler))
    everyone = [ember.empty(len(sampler), dtype=ember.int64) for _ in range(WORLD)]
    dist.all_gather(everyone, mine)
    taken = [i for t in everyone for i in t.tolist()]
    assert set(taken) == set(data) and len(taken) == -(-11 // WORLD) * WORLD
    batches = [b.tolist() for b in DataLoader(data, batch_size=2, sampler=sampler)]
    assert [i for b in batches for i in b] == mine.tolist()


# ---- DistributedDataParallel -----------------------------------------------------------

# Wide enough that the two large weights (80 and 128 KB) are all-reduced in
# their .grad's own memory (Note [All-reducing a gradient in place]).
HIDDEN = 4096


def _mlp(seed):
    ember.manual_seed(seed)
    return nn.Sequential(nn.Linear(5, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, 8), nn.Tanh(),
                         nn.Linear(8, 3))


def _batch(step, rank, rows=4):
    rng = np.random.default_rng(1000 * step + rank)
    return (ember.tensor(rng.standard_normal((rows, 5)).astype(np.float32)),
            ember.tensor(rng.standard_normal((rows, 3)).astype(np.float32)))


def _full_batch(step, rows=4):
    parts = [_batch(step, r, rows) for r in range(WORLD)]
    return ember.cat([x for x, _ in parts]), ember.cat([y for _, y in parts])


def _assert_same_weights(a, b, tol=1e-5):
    for (name, p), q in zip(a.named_parameters(), b.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=tol,
                                   atol=tol, err_msg=name)


def _train_like_one_process(model, steps, set_to_none=True, after_backward=None):
    """Trains the DDP `model` and a one-process reference on the
    concatenated batches side by side, with SGD and momentum: the weights
    must agree after every step.  after_backward() runs after each of
    model's backwards."""
    reference = _mlp(seed=0)
    optimizer = ember.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    reference_optimizer = ember.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
    loss_fn = nn.MSELoss()
    for step in range(steps):
        x, y = _batch(step, RANK)
        optimizer.zero_grad(set_to_none=set_to_none)
        loss_fn(model(x), y).backward()
        if after_backward is not None:
            after_backward()
        optimizer.step()
        x, y = _full_batch(step)
        reference_optimizer.zero_grad()
        loss_fn(reference(x), y).backward()
        reference_optimizer.step()
        _assert_same_weights(model.module, reference)


def _grad_in_a_bucket(model, param):
    """Whether param.grad lies in the memory of one of model's buckets."""
    address = param.grad.data_ptr()
    for bucket in model.reducer.buckets:
        start = bucket.flat.data_ptr()
        if start <= address < start + bucket.flat.numel() * bucket.flat.element_size():
            return True
    return False


def check_ddp_training():
    # Buckets of up to bucket_cap_mb (25 MiB by default) in reverse
    # parameter order, the first no smaller (Note [Starting the bucket
    # all-reduces]): 1.5 MB of gradients is one bucket, all-reduced as two
    # (Note [All-reducing a gradient in place]): the small parameters
    # together, then the 1.4 MB weight on its own.
    wide = nn.Sequential(nn.Linear(600, 600), nn.Linear(600, 10))
    buckets = nn.parallel.DistributedDataParallel(wide).reducer.buckets
    w1, b1, w2, b2 = (id(p) for p in wide.parameters())
    assert [[id(p) for p in b.params] for b in buckets] == [[b2, w2, b1], [w1]]
    assert [b.blocking for b in buckets] == [True, True]
    # Rank-dependent initial weights: DDP must start everyone from rank 0's.
    model = nn.parallel.DistributedDataParallel(_mlp(seed=RANK), bucket_cap_mb=0.0005)
    assert len(model.reducer.buckets) > 1
    reference = _mlp(seed=0)
    _assert_same_weights(model.module, reference, tol=0)
    assert list(model.state_dict()) == ["module." + k for k in reference.state_dict()]
    # Overlap: the first bucket's all-reduce starts while later buckets
    # still wait for their gradients (seen from every parameter's hook).
    launched, reduced_in_place = [], set()
    buckets = model.reducer.buckets

    def note_buckets(p):
        launched.append([b.work is not None for b in buckets])
        reduced_in_place.update(k for k, b in enumerate(buckets) if b.reduced_grad is not None)
    for p in model.parameters():
        p.register_post_accumulate_grad_hook(note_buckets)

    def check_overlap_and_own_grads():
        assert any(seen[0] and not all(seen) for seen in launched), launched
        launched.clear()
        assert not any(_grad_in_a_bucket(model, p) for p in model.parameters())
        # A bucket of one parameter (here every bucket but the first) was
        # all-reduced in its .grad's memory, the last one blocking; none
        # holds a .grad once backward is over.
        assert sorted(reduced_in_place) == [1, 2, 3]
        reduced_in_place.clear()
        assert all(b.reduced_grad is None and b.work is None for b in buckets)
        assert [b.blocking for b in buckets] == [False, False, False, True]
        assert buckets[-1].params[0] is model.module[0].weight
    _train_like_one_process(model, 4, after_backward=check_overlap_and_own_grads)
    # The same after backwards that accumulate into an existing .grad.
    model = nn.parallel.DistributedDataParallel(_mlp(seed=0), bucket_cap_mb=0.0005)
    _train_like_one_process(model, 3, set_to_none=False)


def check_ddp_gradient_as_bucket_view():
    for set_to_none in (True, False):
        model = nn.parallel.DistributedDataParallel(_mlp(seed=RANK), bucket_cap_mb=0.0005,
                                                    gradient_as_bucket_view=True)
        assert model.gradient_as_bucket_view and len(model.reducer.buckets) > 1

        def check_grads_are_bucket_views():
            assert all(_grad_in_a_bucket(model, p) for p in model.parameters())
        _train_like_one_process(model, 3, set_to_none, check_grads_are_bucket_views)
    # no_sync accumulates into the views in place; the next synchronised
    # backward averages the whole sum, as PyTorch's.
    model, reference, loss_fn = _mlp(seed=0), _mlp(seed=0), nn.MSELoss()
    loss_fn(model(_batch(0, RANK)[0]), _batch(0, RANK)[1]).backward()
    before = [p.grad.clone() for p in model.parameters()]
    model = nn.parallel.DistributedDataParallel(model, gradient_as_bucket_view=True)
    for p, grad in zip(model.parameters(), before):   # existing .grads move in
        assert _grad_in_a_bucket(model, p)
        np.testing.assert_array_equal(p.grad.numpy(), grad.numpy())
    model.module.zero_grad(set_to_none=False)
    for step in range(3):
        x, y = _batch(step, RANK)
        if step == 1:
            with model.no_sync():
                loss_fn(model(x), y).backward()
        else:
            loss_fn(model(x), y).backward()
        assert all(_grad_in_a_bucket(model, p) for p in model.parameters())
        x, y = _full_batch(step)
        loss_fn(reference(x), y).backward()
    for p, q in zip(model.parameters(), reference.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-6)


def check_ddp_no_sync():
    model = nn.parallel.DistributedDataParallel(_mlp(seed=0))
    reference = _mlp(seed=0)
    loss_fn = nn.MSELoss()
    with model.no_sync():
        x, y = _batch(0, RANK)
        loss_fn(model(x), y).backward()
    local = [p.grad.clone() for p in model.parameters()]
    x, y = _batch(1, RANK)
    loss_fn(model(x), y).backward()          # synchronises the sum of both
    for step in (0, 1):
        x, y = _full_batch(step)
        loss_fn(reference(x), y).backward()
    for p, q in zip(model.parameters(), reference.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-6)
    # the first, unsynchronised backward had left this rank's own gradient
    x, y = _batch(0, RANK)
    alone = _mlp(seed=0)
    loss_fn(alone(x), y).backward()
    for g, q in zip(local, alone.parameters()):
        np.testing.assert_allclose(g.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-6)


def check_ddp_uneven_batches():
    # Different batch sizes per rank: each rank's mean-loss gradient counts
    # equally (PyTorch's DDP averages gradients, not samples).
    model = nn.parallel.DistributedDataParallel(_mlp(seed=0))
    loss_fn = nn.MSELoss()
    x, y = _batch(0, RANK, rows=2 + RANK)
    loss_fn(model(x), y).backward()
    expected = None
    for r in range(WORLD):
        alone = _mlp(seed=0)
        x, y = _batch(0, r, rows=2 + r)
        loss_fn(alone(x), y).backward()
        grads = [p.grad.numpy() / WORLD for p in alone.parameters()]
        expected = grads if expected is None else [e + g for e, g in zip(expected, grads)]
    for p, e in zip(model.parameters(), expected):
        np.testing.assert_allclose(p.grad.numpy(), e, rtol=1e-5, atol=1e-6)


def _join_training(divide_by_initial_world_size, find_unused_parameters):
    """Rank r trains on 2 + r batches inside model.join(): every step
    averages the gradients of the ranks still training (over the initial
    world size, or over those ranks), and at the end every rank holds the
    model of the last one."""
    module = _mlp(seed=0)
    # Registered before wrapping: DDP (PyTorch's too) syncs no buffers of a
    # module that had none when wrapped (check_ddp_broadcast_buffers); each
    # rank's own stamp after the wrapping copied rank 0's.
    module.register_buffer("stamp", ember.zeros(2))
    model = nn.parallel.DistributedDataParallel(module, bucket_cap_mb=0.0005,
                                                find_unused_parameters=find_unused_parameters)
    module.stamp.fill_(float(RANK))
    reference = _mlp(seed=0)
    optimizer = ember.optim.SGD(model.parameters(), lr=0.1)
    reference_optimizer = ember.optim.SGD(reference.parameters(), lr=0.1)
    loss_fn = nn.MSELoss()
    with model.join(divide_by_initial_world_size=divide_by_initial_world_size):
        for step in range(2 + RANK):
            optimizer.zero_grad()
            loss_fn(model(*_batch(step, RANK)[:1]), _batch(step, RANK)[1]).backward()
            optimizer.step()
            # the buffers come from the highest rank still training
            assert model.module.stamp.tolist() == [WORLD - 1.0] * 2
    for step in range(WORLD + 1):
        active = [r for r in range(WORLD) if step < 2 + r]
        divisor = WORLD if divide_by_initial_world_size else len(active)
        reference_optimizer.zero_grad()
        total = sum(loss_fn(reference(x), y) for x, y in (_batch(step, r) for r in active))
        (total / divisor).backward()
        reference_optimizer.step()
    _assert_same_weights(model.module, reference)
    assert model.module.stamp.tolist() == [WORLD - 1.0] * 2


def check_ddp_join():
    _join_training(divide_by_initial_world_size=True, find_unused_parameters=False)
    _join_training(divide_by_initial_world_size=False, find_unused_parameters=True)
    # no_sync iterations: the joined ranks learn that nobody all-reduces
    model = nn.parallel.DistributedDataParallel(_mlp(seed=0))
    alone = _mlp(seed=0)
    with model.join(), model.no_sync():
        for step in range(1 + RANK):
            model(_batch(step, RANK)[0]).sum().backward()
            alone(_batch(step, RANK)[0]).sum().backward()
    for p, q in zip(model.module.parameters(), alone.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-6)
    # throw_on_early_termination: every rank raises once rank 0 runs out
    model = nn.parallel.DistributedDataParallel(_mlp(seed=0))
    try:
        with model.join(throw_on_early_termination=True):
            for step in range(1 if RANK == 0 else 3):
                model(_batch(step, RANK)[0]).sum().backward()
    except RuntimeError as exc:
        expected = ("Rank 0 exhausted all inputs." if RANK == 0 else
                    "Detected at least one rank that exhausted inputs. Throwing across all ranks.")
        assert str(exc) == expected, exc
    else:
        raise AssertionError("throw_on_early_termination must raise")
    # without join, nothing changes; enable=False is the same
    with model.join(enable=False):
        model(_batch(0, RANK)[0]).sum().backward()
    try:
        from ember.distributed.algorithms import Join
        Join([])
    except ValueError as exc:
        assert "requires at least one joinable" in str(exc)
    else:
        raise AssertionError("an empty Join must be refused")


class _TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Linear(3, 3)
        self.used_by_rank0 = nn.Linear(3, 1)
        self.never_used = nn.Linear(3, 1)

    def forward(self, x):
        h = self.trunk(x)
        return self.used_by_rank0(h).sum() if RANK == 0 else h.sum()


def check_ddp_unused_parameters():
    ember.manual_seed(0)
    alone = _TwoHeads()
    alone.trunk(ember.ones(2, 3))
    h = alone.trunk(ember.ones(2, 3))
    alone.used_by_rank0(h).sum().backward()
    for as_view in (False, True):
        ember.manual_seed(0)
        model = nn.parallel.DistributedDataParallel(_TwoHeads(), find_unused_parameters=True,
                                                    gradient_as_bucket_view=as_view)
        model(ember.ones(2, 3)).backward()
        assert model.module.never_used.weight.grad is None
        assert model.module.used_by_rank0.weight.grad is not None
        np.testing.assert_allclose(model.module.used_by_rank0.weight.grad.numpy(),
                                   alone.used_by_rank0.weight.grad.numpy() / WORLD, rtol=1e-6)
        # PyTorch leaves the .grad of a parameter no process used as it was
        model.module.never_used.bias.grad = ember.full((1,), 7.0)
        model(ember.ones(2, 3)).backward()
        assert model.module.never_used.bias.grad.tolist() == [7.0]
        assert model.module.never_used.weight.grad is None
    strict = nn.parallel.DistributedDataParallel(_TwoHeads())
    try:
        strict(ember.ones(2, 3)).backward()
    except RuntimeError as exc:
        assert "find_unused_parameters=True" in str(exc)
    else:
        raise AssertionError("unused parameters must be reported")


def check_ddp_broadcast_buffers():
    """Every forward copies rank 0's buffers to the others, listing them
    again (one reassigned after wrapping is synced); as in PyTorch, a
    module that had no buffer when wrapped syncs none (checked with
    torch 2.13 over gloo)."""
    module = nn.Linear(2, 2)
    module.register_buffer("stamp", ember.full((2,), float(RANK)))
    model = nn.parallel.DistributedDataParallel(module)
    module.stamp = ember.full((2,), 10.0 + RANK)
    model(ember.ones(1, 2))
    assert module.stamp.tolist() == [10.0, 10.0]
    bare = nn.Linear(2, 2)
    model = nn.parallel.DistributedDataParallel(bare)
    bare.register_buffer("late", ember.full((2,), float(RANK)))
    model(ember.ones(1, 2))
    assert bare.late.tolist() == [float(RANK)] * 2


def check_ddp_different_models():
    model = nn.Linear(3, 2 + (RANK == WORLD - 1))
    try:
        nn.parallel.DistributedDataParallel(model)
    except RuntimeError as exc:
        assert "DDP expects same model across all ranks" in str(exc)
    else:
        raise AssertionError("different models must be refused")


def check_ddp_process_group():
    """DDP over a subgroup starts from the group's first member's weights
    and averages over the members only; a process outside the group cannot
    build it (PyTorch 2.13 raises TypeError there too, where a collective
    on such a group skips with a warning)."""
    evens = dist.new_group([r for r in range(WORLD) if r % 2 == 0])
    odds = dist.new_group([r for r in range(WORLD) if r % 2 == 1])
    mine, other = (evens, odds) if RANK % 2 == 0 else (odds, evens)
    members = [r for r in range(WORLD) if r % 2 == RANK % 2]
    try:
        nn.parallel.DistributedDataParallel(nn.Linear(3, 2), process_group=other)
    except TypeError as exc:
        assert "not a member of the group" in str(exc)
    else:
        raise AssertionError("DDP on a group without this process must be refused")
    ember.manual_seed(RANK)
    model = nn.parallel.DistributedDataParallel(nn.Linear(3, 2), process_group=mine)
    ember.manual_seed(members[0])
    _assert_same_weights(model.module, nn.Linear(3, 2), tol=0)
    model(ember.full((1, 3), float(RANK + 1))).sum().backward()
    # d(sum of outputs)/dW is x in every row: the members' x averaged.
    average = np.mean([r + 1.0 for r in members])
    _close(model.module.weight.grad, np.full((2, 3), average, np.float32))
    _close(model.module.bias.grad, np.ones(2, np.float32))
    dist.destroy_process_group(mine)


def shared_memory_directory():
    """Where the launcher told Open MPI to put this job's shared-memory
    files (None under another MPI)."""
    for name in BACKING_DIRECTORY_PARAMETERS:
        if "OMPI_MCA_" + name in os.environ:
            return os.environ["OMPI_MCA_" + name]
    return None


def check_dropped_work():
    """Note [A Work dropped before it is done]: a nonblocking all-reduce
    whose Work and tensor are dropped keeps its memory until MPI is done."""
    tensor = ember.full((1000,), float(RANK + 1))
    alive = weakref.ref(tensor)
    if RANK == 0:
        dist.all_reduce(tensor, async_op=True)   # the Work is dropped at once
        del tensor
        assert alive() is not None   # the others have not even started theirs
    else:
        time.sleep(0.2)
        # nonblocking here too: MPI never matches a blocking collective with
        # a nonblocking one
        dist.all_reduce(tensor, async_op=True).wait()
        assert tensor.tolist() == [WORLD * (WORLD + 1) / 2] * 1000
        del tensor
    # Every process has finished the first all-reduce once this one is
    # done; the next collective finds it finished and lets it go.
    dist.all_reduce(ember.zeros(1))
    dist.all_reduce(ember.zeros(1))
    assert alive() is None


def check_crash():
    print("shared memory in", shared_memory_directory(), flush=True)
    if RANK == 1:
        raise ValueError("rank 1 fails on purpose")
    dist.all_reduce(ember.ones(3))   # the others wait here until the job is stopped


def main(checks):
    global RANK, WORLD
    dist.init_process_group("mpi")
    RANK, WORLD = dist.get_rank(), dist.get_world_size()
    assert (os.environ["RANK"], os.environ["WORLD_SIZE"]) == (str(RANK), str(WORLD))
    for name in checks:
        globals()["check_" + name]()
    dist.barrier()
    if RANK == 0:
        print("passed:", " ".join(checks), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1:])
