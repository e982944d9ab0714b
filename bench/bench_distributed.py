"""ember.distributed speed (goals from ember issue 17).

Rows:
    all_reduce of 64 MB float32, 2 processes   bandwidth, >= 0.9x raw mpi4py
                                               Allreduce on NumPy arrays
    DDP step of an MLP, 2 processes            samples/s, >= 1.6x one process
                                               (plain model, same per-process batch);
                                               and vs 2 processes that skip the
                                               all-reduce (no_sync): communication's cost;
                                               and with gradient_as_bucket_view=True;
                                               and with MPI's waits spinning (ember makes
                                               them yield: Note [Waiting processes yield
                                               their core] in distributed_c10d.py)
    DDP step parts, 2 processes                per-step thread CPU and wall time of the
                                               gradient hooks and of the final callback
                                               (the waits), and MPI's Allreduce of each
                                               bucket alone (both processes arriving
                                               together): what is DDP's own, what waiting
Run plainly, this script starts its measurements under MPI through
`python -m ember.distributed.run` (one thread per process) and prints the
ratios; rank 0 of each job reports its numbers as JSON on a line of its own.
Best of several repeats, ember and mpi4py interleaved, so noise from a
shared machine hits both alike; the load average is printed before and
after, as wall-clock ratios mean little on a busy machine.
"""

import json
import os
import subprocess
import sys
import time

for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_name] = "1"

ALLREDUCE_BYTES = 64 * 1024 * 1024
ALLREDUCE_REPEATS = 12
MLP_BATCH = 128            # per process
MLP_STEPS = 30
MLP_WARMUP = 5
MLP_REPEATS = 3
JOB_ROUNDS = 2
REPORT = "bench-result "


def _report(rank, **numbers):
    if rank == 0:
        print(REPORT + json.dumps(numbers), flush=True)


def measure_all_reduce():
    import numpy as np
    from mpi4py import MPI

    import ember
    import ember.distributed as dist
    dist.init_process_group("mpi")
    count = ALLREDUCE_BYTES // 4
    tensor = ember.ones(count)
    array = np.ones(count, np.float32)
    comm = MPI.COMM_WORLD
    # mpi4py on the tensor's own memory too: the same MPI call as ember's,
    # so ember / this is the cost of ember's Python path alone, apart from
    # any difference between the two allocations' memory.
    tensor_memory = tensor.numpy()
    contenders = [("ember", lambda: dist.all_reduce(tensor)),
                  ("mpi4py", lambda: comm.Allreduce(MPI.IN_PLACE, array)),
                  ("mpi4py_tensor_memory",
                   lambda: comm.Allreduce(MPI.IN_PLACE, tensor_memory))]
    best = {name: float("inf") for name, _ in contenders}
    for repeat in range(ALLREDUCE_REPEATS):
        first = repeat % len(contenders)  # rotate who goes first
        for name, reduce in contenders[first:] + contenders[:first]:
            comm.Barrier()
            start = time.perf_counter()
            reduce()
            best[name] = min(best[name], time.perf_counter() - start)
    _report(dist.get_rank(), mpi=MPI.Get_library_version().splitlines()[0].strip(),
            **{f"{k}_GBps": ALLREDUCE_BYTES / v / 1e9 for k, v in best.items()})
    dist.destroy_process_group()


def _mlp(ember):
    nn = ember.nn
    ember.manual_seed(0)
    return nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                         nn.Linear(512, 10))


def _ddp_training(ember, dist, communicate=True, **ddp_options):
    """The bench's model, optimizer and one training step, as DDP
    (plain for one process)."""
    ember.set_num_threads(1)  # the setting: one thread per process
    dist.init_process_group("mpi")
    model = _mlp(ember)
    if dist.get_world_size() > 1 or not communicate:
        model = ember.nn.parallel.DistributedDataParallel(model, **ddp_options)
    optimizer = ember.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = ember.nn.CrossEntropyLoss()
    x = ember.randn(MLP_BATCH, 256)
    y = ember.randint(0, 10, (MLP_BATCH,))

    def step():
        optimizer.zero_grad()
        if communicate:
            loss_fn(model(x), y).backward()
        else:
            with model.no_sync():
                loss_fn(model(x), y).backward()
        optimizer.step()
    return model, step


def measure_ddp(communicate=True, **ddp_options):
    import ember
    import ember.distributed as dist
    _, step = _ddp_training(ember, dist, communicate, **ddp_options)
    for _ in range(MLP_WARMUP):
        step()
    best = float("inf")
    for _ in range(MLP_REPEATS):
        dist.barrier()
        start = time.perf_counter()
        for _ in range(MLP_STEPS):
            step()
        dist.barrier()
        best = min(best, time.perf_counter() - start)
    _report(dist.get_rank(), samples_per_s=dist.get_world_size() * MLP_BATCH * MLP_STEPS / best)
    dist.destroy_process_group()


def measure_ddp_parts():
    """Rank 0's thread CPU and wall time per step: the whole step, the
    gradient hooks (copying into the buckets, starting their all-reduces;
    the last bucket's is blocking, so it is all there) and the final
    callback (waiting for the others, copying out).  Then MPI's Allreduce
    of each bucket alone, the processes starting together: communication's
    own cost, apart from waiting for the slower process."""
    import numpy as np
    from mpi4py import MPI

    import ember
    import ember.distributed as dist
    from ember.distributed import distributed_c10d
    from ember.nn.parallel import distributed as ddp_module
    spent = {}

    def timed(name, function):
        def wrapper(*args, **kwargs):
            cpu, wall = time.thread_time(), time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                entry = spent.setdefault(name, [0.0, 0.0])
                entry[0] += time.thread_time() - cpu
                entry[1] += time.perf_counter() - wall
        return wrapper

    reducer = ddp_module._Reducer
    reducer._on_gradient = timed("hooks", reducer._on_gradient)
    reducer._all_reduce = timed("all_reduces", reducer._all_reduce)
    reducer._finish = timed("callback", reducer._finish)
    distributed_c10d.Work.wait = timed("waits", distributed_c10d.Work.wait)
    model, step = _ddp_training(ember, dist)
    step = timed("step", step)
    for _ in range(MLP_WARMUP):
        step()
    dist.barrier()
    spent.clear()
    for _ in range(MLP_STEPS * MLP_REPEATS):
        step()
    per_step = {name: [1e3 * t / (MLP_STEPS * MLP_REPEATS) for t in times]
                for name, times in spent.items()}
    comm = MPI.COMM_WORLD
    alone = []
    for bucket in model.reducer.buckets:
        array = np.zeros(bucket.flat.numel(), np.float32)
        best = float("inf")
        for _ in range(50):
            comm.Barrier()
            start = time.perf_counter()
            comm.Allreduce(MPI.IN_PLACE, array)
            best = min(best, time.perf_counter() - start)
        alone.append((array.nbytes, 1e3 * best))
    _report(dist.get_rank(), parts=per_step, allreduce_alone=alone)
    dist.destroy_process_group()


SPINNING = {"OMPI_MCA_mpi_yield_when_idle": "0"}


def launch(nproc, what, **environment):
    here = os.path.dirname(os.path.abspath(__file__))
    python_dir = os.path.join(os.path.dirname(here), "python")
    env = dict(os.environ, PYTHONPATH=python_dir + os.pathsep + os.environ.get("PYTHONPATH", ""),
               **environment)
    output = subprocess.run(
        [sys.executable, "-m", "ember.distributed.run", "--nproc-per-node", str(nproc),
         os.path.abspath(__file__), what],
        env=env, capture_output=True, text=True, timeout=600, check=True).stdout
    for line in output.splitlines():
        if line.startswith(REPORT):
            return json.loads(line[len(REPORT):])
    raise RuntimeError(f"no result from {what}:\n{output}")


def main():
    print(f"load average before: {_load()}")
    reduce = launch(2, "all_reduce")
    print(f"MPI: {reduce.pop('mpi')}")
    print(f"all_reduce 64 MB float32, 2 processes: ember {reduce['ember_GBps']:.2f} GB/s, "
          f"mpi4py Allreduce {reduce['mpi4py_GBps']:.2f} GB/s, "
          f"ratio {reduce['ember_GBps'] / reduce['mpi4py_GBps']:.2f}x (goal >= 0.9x)")
    print(f"    mpi4py Allreduce on the tensor's own memory "
          f"{reduce['mpi4py_tensor_memory_GBps']:.2f} GB/s: ember / that "
          f"{reduce['ember_GBps'] / reduce['mpi4py_tensor_memory_GBps']:.2f}x")
    one = two = alone = as_view = spinning = 0.0
    for _ in range(JOB_ROUNDS):  # jobs interleaved: a busy spell hits all
        one = max(one, launch(1, "ddp")["samples_per_s"])
        two = max(two, launch(2, "ddp")["samples_per_s"])
        alone = max(alone, launch(2, "ddp_no_sync")["samples_per_s"])
        as_view = max(as_view, launch(2, "ddp_as_view")["samples_per_s"])
        spinning = max(spinning, launch(2, "ddp", **SPINNING)["samples_per_s"])
    print(f"DDP MLP step, batch {MLP_BATCH}/process: 1 process {one:.0f} samples/s, "
          f"2 processes {two:.0f} samples/s, ratio {two / one:.2f}x "
          f"{_against(two / one, 1.6)}")
    print(f"    gradient_as_bucket_view=True: 2 processes {as_view:.0f} samples/s, "
          f"ratio {as_view / one:.2f}x {_against(as_view / one, 1.6)}")
    print(f"    MPI's waits spinning (OMPI_MCA_mpi_yield_when_idle=0): 2 processes "
          f"{spinning:.0f} samples/s, ratio {spinning / one:.2f}x")
    print(f"    2 processes under no_sync (no communication) {alone:.0f} samples/s, "
          f"ratio {alone / one:.2f}x: DDP keeps {two / alone:.2f}x of that "
          f"(what the machine's cores allow)")
    parts = launch(2, "ddp_parts")
    # A part never called (no Work to wait for when every bucket's
    # all-reduce is blocking) took no time.
    ms = {name: "{:.2f} / {:.2f}".format(*parts["parts"].get(name, (0.0, 0.0)))
          for name in ("step", "hooks", "all_reduces", "callback", "waits")}
    print(f"DDP step parts, 2 processes, rank 0, ms per step (thread CPU / wall): "
          f"step {ms['step']}; gradient hooks {ms['hooks']} (of which starting the "
          f"all-reduces {ms['all_reduces']}); final callback {ms['callback']} (of which "
          f"waits {ms['waits']})")
    print("    MPI Allreduce of each bucket alone, the processes starting together: " +
          ", ".join(f"{nbytes / 1e6:.3f} MB {ms:.3f} ms" for nbytes, ms in parts["allreduce_alone"]))
    print(f"load average after: {_load()}")


def _against(ratio, goal):
    return f"(goal >= {goal}x: {'met' if ratio >= goal else 'NOT met'})"


def _load():
    return " ".join(f"{load:.2f}" for load in os.getloadavg()) + f" on {os.cpu_count()} CPUs"


if __name__ == "__main__":
    if len(sys.argv) > 1:
        {"all_reduce": measure_all_reduce, "ddp": measure_ddp,
         "ddp_no_sync": lambda: measure_ddp(communicate=False),
         "ddp_as_view": lambda: measure_ddp(gradient_as_bucket_view=True),
         "ddp_parts": measure_ddp_parts}[sys.argv[1]]()
    else:
        main()
