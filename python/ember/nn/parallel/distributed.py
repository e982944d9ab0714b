"""DistributedDataParallel: one model replica per process, gradients
averaged across processes during backward (torch.nn.parallel.distributed).

Note [Gradient buckets]
~~~~~~~~~~~~~~~~~~~~~~~
All-reducing each parameter's gradient alone would pay MPI's latency once
per parameter; all-reducing all of them at the end would not overlap with
backward.  So, as PyTorch's Reducer does, the parameters are grouped into
buckets of about bucket_cap_mb, in reverse order of module.parameters()
(backward produces the last layers' gradients first).  PyTorch makes the
first bucket smaller (1 MiB, dist._DEFAULT_FIRST_BUCKET_BYTES) so that
communication starts early; ember does not, as over MPI nothing is gained
by it (Note [Starting the bucket all-reduces]).  Each bucket owns one
flat tensor, and each of its parameters a view of that tensor shaped like
the parameter.  A parameter's post-accumulate-grad hook writes .grad / the
divisor into its view (one pass: PyTorch's Reducer divides before the
all-reduce too, so no pass over the sums is left for after it); when a
bucket's last view is filled, the bucket's all-reduce (a SUM, prepared
once per bucket: _RepeatedAllReduce in distributed_c10d.py) starts while
backward goes on.  Buckets start in bucket order on every process,
whatever order the hooks fire in: MPI matches collectives by the order
they are issued.  When the engine finishes the graph, a queued callback
waits for every bucket and copies the averages back into the .grads.  A
bucket of one parameter skips both copies: Note [All-reducing a gradient
in place].

With gradient_as_bucket_view=True (PyTorch's parameter) the .grads are
the views themselves once a backward has finished: the copy back is gone,
and a backward that accumulates into such a .grad (zero_grad with
set_to_none=False, or no_sync) writes straight into the bucket, so its
hook only scales the view in place.  A .grad set to None
(zero_grad's default) comes back as a new tensor and is copied in as usual.

Note [Starting the bucket all-reduces]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Over shared memory, Open MPI moves a nonblocking all-reduce (MPI_Iallreduce)
on only inside MPI calls, and its nonblocking algorithms are slower than
its blocking ones (half the bandwidth at 1.5 MB).  So every bucket but the
last is started nonblocking, and each later hook tests the oldest one still
running (an MPI_Test is a step of progress); the last bucket is
all-reduced with the blocking MPI_Allreduce as soon as it is full (in
parts, Note [All-reducing a gradient in place]): backward has little or
no gradient left to compute, nothing would overlap it.  A nonblocking
collective never matches a blocking one, so a joined process shadowing a
backward (shadow_backward) issues each bucket's all-reduce as the same kind.

Two alternatives were measured against this on the 2-core machine of
bench/bench_distributed.py (2 processes, the bench's MLP, 1.6 MB of
gradients) and did not win, so they are not here: one blocking
all-reduce of all buckets in the final callback (no overlap at all:
the same samples/s within the noise, as the blocking all-reduce of the
last bucket already carries nearly all the bytes); and an all-reduce
through an MPI-3 shared-memory window (MPI_Win_allocate_shared: each
process sums its share of the elements straight from its peers'
segments between two barriers), which takes as long as Open MPI's own
blocking MPI_Allreduce of 1.6 MB (0.15 ms, both processes arriving
together) and longer at 16 MB.  What a training step loses to
communication on a machine shared with other jobs is mostly waiting for
a peer that is not running: Note [Waiting processes yield their core]
in ember/distributed/distributed_c10d.py.

For the same reason (MPI moves a nonblocking all-reduce only inside MPI
calls) there is no small first bucket, as PyTorch has.  With it, the bench's
MLP had a first bucket of 22 KB (its last layer) and a second of 1.57 MB;
PyTorch's own layout (a bucket closes once it reaches its cap) would be
1.07 MB and 526 KB.  Raw MPI, 2 processes arriving together: one blocking
all-reduce of the 1.6 MB 0.166 ms, the 22 KB nonblocking then 1.57 MB
blocking 0.169 ms, PyTorch's layout 0.294 ms (its first bucket goes
through the slower nonblocking algorithm and still moves only inside MPI
calls).  The second bucket only added Python work: a Work, its tests and
its wait, 0.02 to 0.19 ms of thread CPU per step (world size 1, five runs
of 60 paired rounds) with the interpreter's caches cold inside a step.

Note [All-reducing a gradient in place]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A bucket's flat tensor exists so that many gradients go to MPI in one
call.  A bucket of one parameter does not need it: the hook scales the
.grad in place and the all-reduce runs on the .grad's own memory, which
then holds the average, without the copy in and the copy back (two
passes over its bytes, PyTorch's Reducer makes both).  That is safe
because the engine gives a post-accumulate-grad hook a .grad nothing
else shares (Note [Adopting gradients] in ember/autograd/engine.py) and
nothing else writes it before backward ends.  The bucket keeps the .grad
its hook saw (a later hook may replace .grad: every process must still
reduce what it scaled), and lets go of it with the Work once backward's
all-reduces are done (or the engine would see it shared, and copy it).
So the last bucket is split when the buckets are made: each of its
parameters of at least _IN_PLACE_MIN_BYTES in a bucket of its own, the
others together, in the order their last gradients are expected; all of
them blocking.  A parameter larger than bucket_cap_mb has a bucket of
its own anyway, and its nonblocking all-reduce runs in place too.  The
MPI call is the same on whichever memory it runs (same count and type),
so a process that must use the flat tensor after all (a .grad not
contiguous, a 16-bit type staged as float32, a parameter unused here,
gradient_as_bucket_view) still matches the others.  512 KiB: each part
is a blocking all-reduce in the middle of backward, where the processes
wait for each other, and that costs more than the copies of a small
gradient.  In 2-process jobs of MLPs whose layers all fall in the last
bucket (40 rounds of 5 steps, interleaved with the unsplit bucket,
medians), splitting off 64 KiB weights made the step 6-11% slower, 256
KiB ones 1-2% slower, 512 KiB and 1 MiB ones 2.5-3% faster.  In a world
of one (bench/bench_distributed.py's MLP, 1.6 MB of gradients, one
thread, its steps interleaved in one process), DDP's cost over the same
step under no_sync went from 0.17-0.20 ms to 0.02-0.06 ms; with 2
processes, in jobs of the host's fast kind, steps were 0.1-0.2 ms
shorter.

With uneven inputs, `with ddp.join():` lets processes that ran out of
batches shadow these all-reduces with zeros (Note [Shadowing the
collectives of a joined process] in ember/distributed/algorithms/join.py):
the average then still divides by the initial world size (PyTorch's
default), or with divide_by_initial_world_size=False by the number of
processes still training.
"""
from contextlib import contextmanager
from functools import partial

import ember
from ember.autograd import engine
from ember.distributed.algorithms.join import Join, Joinable, JoinHook

from ..modules.module import Module

_MIB = 1024 * 1024


class _Bucket:
    """The gradients of `params` in one flat tensor; views[i] is params[i]'s
    part of it, shaped like params[i].  A blocking bucket's all-reduce is
    MPI's blocking one (Note [Starting the bucket all-reduces])."""

    def __init__(self, params, blocking=False):
        self.params = params
        self.blocking = blocking
        self.flat = ember.zeros(sum(p.numel() for p in params), dtype=params[0].dtype)
        self.views = []
        start = 0
        for p in params:
            self.views.append(self.flat[start:start + p.numel()].view(p.shape))
            start += p.numel()
        self.rearm()

    def rearm(self):
        """Ready for one backward: no gradient in yet, no all-reduce started."""
        self.ready = [False] * len(self.params)
        self.pending = len(self.params)
        self.work = None
        self.reduced_grad = None   # the .grad all-reduced in place, if one is

    def can_reduce(self, grad):
        """Whether the all-reduce can run on `grad`'s own memory instead of
        the flat tensor's (Note [All-reducing a gradient in place])."""
        return (len(self.params) == 1 and self.all_reduce.array is not None
                and grad.dtype == self.flat.dtype and not grad.requires_grad
                and grad.is_contiguous())


# Note [All-reducing a gradient in place].
_IN_PLACE_MIN_BYTES = 512 * 1024


def _bucket_params(params, cap_bytes):
    """Reverse parameter order, one dtype per bucket, each up to cap_bytes
    (a parameter larger than the cap gets a bucket of its own); the last
    bucket split for in place all-reduces (_split_last)."""
    groups, current, size = [], [], 0
    for p in reversed(params):
        nbytes = p.numel() * p.element_size()
        if current and (size + nbytes > cap_bytes or p.dtype != current[0].dtype):
            groups.append(current)
            current, size = [], 0
        current.append(p)
        size += nbytes
    if current:
        groups.append(current)
    return ([_Bucket(g) for g in groups[:-1]]
            + [_Bucket(g, blocking=True) for g in _split_last(groups[-1])])


def _split_last(group):
    """The last bucket's parameters of at least _IN_PLACE_MIN_BYTES each in
    a bucket of their own, the others together; ordered by when their last
    gradient is expected (Note [All-reducing a gradient in place])."""
    large = [[p] for p in group if p.numel() * p.element_size() >= _IN_PLACE_MIN_BYTES]
    small = [p for p in group if p.numel() * p.element_size() < _IN_PLACE_MIN_BYTES]
    position = {id(p): i for i, p in enumerate(group)}
    return sorted(large + ([small] if small else []), key=lambda g: position[id(g[-1])])


_UNUSED_PARAMETERS_MESSAGE = (
    "Expected to have finished reduction in the prior iteration before starting a new "
    "one. This error indicates that your module has parameters that were not used in "
    "producing loss. You can enable unused parameter detection by passing the keyword "
    "argument `find_unused_parameters=True` to "
    "`torch.nn.parallel.DistributedDataParallel`, and by making sure all `forward` "
    "function outputs participate in calculating loss.")


class _Reducer:
    """Averages the gradients of `params` across `group` during backward
    (Note [Gradient buckets])."""

    def __init__(self, params, cap_bytes, group, find_unused_parameters,
                 gradient_as_bucket_view):
        import ember.distributed as dist
        self.dist = dist
        self.group = group
        self.world_size = dist.get_world_size(group)
        self.params = params
        self.find_unused_parameters = find_unused_parameters
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.buckets = _bucket_params(params, cap_bytes)
        for bucket in self.buckets:
            bucket.all_reduce = dist.distributed_c10d._RepeatedAllReduce(bucket.flat, group)
        place_of = {id(p): (bucket, i) for bucket in self.buckets
                    for i, p in enumerate(bucket.params)}
        self.places = [place_of[id(p)] for p in params]   # (bucket, index), in params' order
        # Each hook knows its parameter's place: no lookup per gradient.
        self.handles = [p.register_post_accumulate_grad_hook(partial(self._on_gradient, *place))
                        for p, place in zip(params, self.places)]
        if gradient_as_bucket_view:
            self._move_grads_into_buckets()
        self.armed = False

    def _move_grads_into_buckets(self):
        """gradient_as_bucket_view: a .grad that exists already becomes its
        view (as PyTorch's Reducer does when it builds the buckets)."""
        with ember.no_grad():
            for p, (bucket, i) in zip(self.params, self.places):
                if p.grad is not None:
                    bucket.views[i].copy_(p.grad)
                    p.grad = bucket.views[i]

    def prepare_for_backward(self, divisor=None):
        """Arms the hooks for one backward; the averages divide by divisor
        (the world size when None)."""
        self.scale = 1.0 / (divisor or self.world_size)
        for bucket in self.buckets:
            bucket.rearm()
        self.next_bucket = 0      # the next bucket to start
        self.oldest_running = 0   # the first bucket whose all-reduce may not be done
        self.callback_queued = False
        self.armed = True

    def disarm(self):
        self.armed = False

    def _on_gradient(self, bucket, index, param):
        if not self.armed or bucket.ready[index]:
            return
        if not self.callback_queued:
            engine.queue_callback(self._finish)
            self.callback_queued = True
        view = bucket.views[index]
        grad = param.grad
        with ember.no_grad():
            if grad.data_ptr() == view.data_ptr():   # gradient_as_bucket_view
                scale_in_place = True
            elif not self.gradient_as_bucket_view and bucket.can_reduce(grad):
                bucket.reduced_grad = grad   # what .grad is now, whatever hooks do later
                scale_in_place = True
            else:
                scale_in_place = False
            if not scale_in_place:
                ember.mul(grad, self.scale, out=view)
            elif self.scale != 1.0:
                grad.mul_(self.scale)
        self._mark_ready(bucket, index)

    def _mark_ready(self, bucket, index):
        bucket.ready[index] = True
        bucket.pending -= 1
        self._test_oldest_running()
        if bucket.pending == 0:
            self._start_ready_buckets()

    def _test_oldest_running(self):
        """MPI moves a nonblocking all-reduce on only inside MPI calls
        (Note [Starting the bucket all-reduces])."""
        if self.oldest_running < self.next_bucket and \
                self.buckets[self.oldest_running].work.is_completed():
            self.oldest_running += 1

    def _start_ready_buckets(self):
        while self.next_bucket < len(self.buckets) and \
                self.buckets[self.next_bucket].pending == 0:
            bucket = self.buckets[self.next_bucket]
            bucket.work = self._all_reduce(self.next_bucket, bucket.flat)
            self.next_bucket += 1

    def _all_reduce(self, b, flat):
        """Starts the SUM of bucket b's `flat` (its own memory, or a joined
        process's zeros): nonblocking, but blocking for the last bucket's
        parts (Note [Starting the bucket all-reduces])."""
        bucket = self.buckets[b]
        blocking = bucket.blocking
        if flat is bucket.flat:  # prepared once (_RepeatedAllReduce)
            work = bucket.all_reduce(not blocking, bucket.reduced_grad)
        else:
            work = self.dist.all_reduce(flat, group=self.group, async_op=not blocking)
        return _DONE if blocking else work

    def _finish(self):
        self.armed = False
        if self.find_unused_parameters:
            used_here = [int(bucket.ready[i]) for bucket, i in self.places]
        if self.next_bucket < len(self.buckets):
            if not self.find_unused_parameters:
                raise RuntimeError(_UNUSED_PARAMETERS_MESSAGE)
            self._fill_unused()
        # After every bucket's, so all processes issue it in the same place.
        used = self._count_users(used_here) if self.find_unused_parameters else None
        for bucket in self.buckets:
            bucket.work.wait()
        used_anywhere = self._wait_used(used)
        with ember.no_grad():
            for p, (bucket, i), used in zip(self.params, self.places, used_anywhere):
                # PyTorch leaves a .grad no process computed as it was; one
                # all-reduced in place holds its average already.
                if used and bucket.reduced_grad is None:
                    self._write_back(p, bucket.views[i])
        for bucket in self.buckets:
            # A Work, and the bucket, that still held an in-place .grad would
            # make the engine take it for shared, and copy it (Note
            # [Adopting gradients] in ember/autograd/engine.py).
            bucket.work = bucket.reduced_grad = None

    def _wait_used(self, used):
        if used is None:
            return [True] * len(self.params)
        used.wait()
        return [count > 0 for count in self._used_counts.tolist()]

    def _count_users(self, used_here):
        """Starts an all-reduce counting, per parameter, the processes that
        gave it a gradient: one unused everywhere keeps .grad None."""
        self._used_counts = ember.tensor(used_here, dtype=ember.int32)
        return self.dist.all_reduce(self._used_counts, group=self.group, async_op=True)

    def shadow_backward(self):
        """A joined process's side of one backward of the others: every
        bucket's all-reduce, then the count of users, with zeros, issued
        as theirs are (in bucket order, each of the same kind)."""
        for b, bucket in enumerate(self.buckets):
            self._all_reduce(b, ember.zeros_like(bucket.flat)).wait()
        if self.find_unused_parameters:
            self.dist.all_reduce(ember.zeros(len(self.params), dtype=ember.int32),
                                 group=self.group, async_op=True).wait()

    def _fill_unused(self):
        with ember.no_grad():
            for bucket, i in self.places:
                if not bucket.ready[i]:
                    bucket.views[i].zero_()
                    self._mark_ready(bucket, i)

    def _write_back(self, param, average):
        if self.gradient_as_bucket_view:
            if param.grad is not average:
                param.grad = average
        elif param.grad is not None:
            param.grad.copy_(average)
        else:
            param.grad = average.clone()


class _Done:
    """The work handle of a blocking all-reduce: already complete."""

    @staticmethod
    def wait(timeout=None):
        return True

    @staticmethod
    def is_completed():
        return True


_DONE = _Done()


class _DDPJoinHook(JoinHook):
    """What a joined process does for DDP: each round, the collectives of
    one forward and backward of the others; at the end, takes the model of
    a process that joined last."""

    def __init__(self, ddp, divide_by_initial_world_size):
        self.ddp = ddp
        ddp._divide_by_initial_world_size = divide_by_initial_world_size

    def main_hook(self):
        ddp = self.ddp
        ddp._sync_buffers(still_training=False)
        if ddp._share_grad_sync_flag(False):
            ddp.reducer.shadow_backward()

    def post_hook(self, is_last_joiner):
        self.ddp._sync_final_model(is_last_joiner)


class DistributedDataParallel(Module, Joinable):
    """Wraps `module` so that backward leaves every process with the
    gradient averaged over all processes' batches.  Every process builds
    the same model; rank 0's parameters and buffers are copied to the
    others at construction, and its buffers again at every forward
    (broadcast_buffers).  CPU only: device_ids must be None."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0,
                 broadcast_buffers=True, init_sync=True, process_group=None,
                 bucket_cap_mb=None, find_unused_parameters=False, check_reduction=False,
                 gradient_as_bucket_view=False, static_graph=False, **unsupported):
        super().__init__()
        Joinable.__init__(self)
        import ember.distributed as dist
        if unsupported:
            raise TypeError(f"DistributedDataParallel: ember does not support "
                            f"{sorted(unsupported)}")
        if device_ids is not None or output_device is not None:
            raise ValueError("DistributedDataParallel: ember runs on CPU; device_ids and "
                             "output_device must be None")
        params = [p for p in module.parameters() if p.requires_grad]
        if not params:
            raise RuntimeError("DistributedDataParallel is not needed when a module "
                               "doesn't have any parameter that requires a gradient.")
        self.module = module
        if process_group is dist.GroupMember.NON_GROUP_MEMBER:
            # Unlike a collective, which skips with a warning, PyTorch's DDP
            # fails here (a TypeError, from its C++ parameter check): a
            # process builds DDP on the groups it belongs to only.
            raise TypeError("DistributedDataParallel: process_group is "
                            "GroupMember.NON_GROUP_MEMBER: this process is not a member "
                            "of the group (new_group gives that to the others)")
        self.process_group = dist.distributed_c10d._group(process_group)
        self.broadcast_buffers = broadcast_buffers is None or broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.require_backward_grad_sync = True
        self._divide_by_initial_world_size = True
        self.bucket_bytes_cap = int((25 if bucket_cap_mb is None else bucket_cap_mb) * _MIB)
        self._verify_same_model(dist)
        if init_sync:
            self._broadcast_states(list(module.parameters()) + list(module.buffers()))
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.modules_buffers = list(module.buffers())
        self.reducer = _Reducer(params, self.bucket_bytes_cap, self.process_group,
                                find_unused_parameters, gradient_as_bucket_view)

    def _verify_same_model(self, dist):
        """Every process must wrap the same parameter shapes, else the
        buckets would not match (PyTorch checks this too)."""
        shapes = [list(p.shape) for p in self.module.parameters()]
        theirs = [shapes]
        dist.broadcast_object_list(theirs, src=self.process_group.ranks[0],
                                   group=self.process_group)
        agree = ember.tensor([int(theirs[0] == shapes)], dtype=ember.int32)
        dist.all_reduce(agree, op=dist.ReduceOp.MIN, group=self.process_group)
        if not agree.item():
            rank = dist.get_rank(self.process_group)
            raise RuntimeError(
                f"DDP expects same model across all ranks, but Rank {rank} has "
                f"{len(shapes)} params with shapes {shapes}, while rank 0 has "
                f"{len(theirs[0])} params with shapes {theirs[0]}."
                if theirs[0] != shapes else
                "DDP expects same model across all ranks, but some rank's parameter "
                "shapes differ from rank 0's.")

    def _broadcast_states(self, tensors, group_src=0):
        import ember.distributed as dist
        with ember.no_grad():
            for t in tensors:
                dist.broadcast(t, group=self.process_group, group_src=group_src)

    def _find_common_rank(self, rank_cond):
        """The highest group rank of the processes where rank_cond holds."""
        import ember.distributed as dist
        rank = ember.tensor([dist.get_rank(self.process_group) if rank_cond else -1])
        dist.all_reduce(rank, op=dist.ReduceOp.MAX, group=self.process_group)
        if rank.item() == -1:
            raise ValueError("BUG! Expected rank_cond to be true for at least one process.")
        return int(rank.item())

    def _sync_buffers(self, still_training=True):
        """broadcast_buffers: the buffers of group rank 0, or under a Join
        of the highest rank still training."""
        # As PyTorch: a module without buffers when wrapped never syncs any
        # (and skips walking the module tree at every forward, which costs
        # more than a small model's all-reduce); one with buffers lists them
        # again each time, as they may have been reassigned.
        if not self.broadcast_buffers or not self.modules_buffers:
            return
        source = self._find_common_rank(still_training) if self._join_config.enable else 0
        self.modules_buffers = list(self.module.buffers())
        self._broadcast_states(self.modules_buffers, source)

    def _share_grad_sync_flag(self, will_sync):
        """Under a Join: whether any process synchronises gradients in this
        iteration's backward (a joined process then shadows it)."""
        import ember.distributed as dist
        flag = ember.tensor([int(will_sync)])
        dist.all_reduce(flag, group=self.process_group, async_op=True).wait()
        return flag.item() > 0

    def _sync_final_model(self, is_last_joiner):
        source = self._find_common_rank(is_last_joiner)
        self._broadcast_states(list(self.module.parameters()) + list(self.module.buffers()),
                               source)

    def forward(self, *inputs, **kwargs):
        still_training = Join.notify_join_context(self)
        divisor = None
        if still_training is not None:
            still_training.wait()
            if not self._divide_by_initial_world_size:
                divisor = int(still_training.result()[0].item())
        will_sync = ember.is_grad_enabled() and self.require_backward_grad_sync
        if will_sync:
            self.reducer.prepare_for_backward(divisor)
        else:
            self.reducer.disarm()
        self._sync_buffers()
        if self._join_config.enable:
            self._share_grad_sync_flag(will_sync)
        return self.module(*inputs, **kwargs)

    def join(self, divide_by_initial_world_size=True, enable=True,
             throw_on_early_termination=False):
        """The context manager for uneven inputs: `with model.join(): for
        batch in my_batches: ...` (Note [Gradient buckets])."""
        return Join([self], enable, throw_on_early_termination,
                    divide_by_initial_world_size=divide_by_initial_world_size)

    def join_hook(self, **kwargs):
        return _DDPJoinHook(self, kwargs.get("divide_by_initial_world_size", True))

    @property
    def join_device(self):
        return ember.device("cpu")

    @property
    def join_process_group(self):
        return self.process_group

    @contextmanager
    def no_sync(self):
        """Backward passes of forwards run inside accumulate gradients
        locally; the first synchronised backward after averages the sums."""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old
