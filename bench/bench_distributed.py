"""ember.distributed speed (goals from ember issue 17).

Rows:
    all_reduce of 64 MB float32, 2 processes   bandwidth, >= 0.9x raw mpi4py
                                               Allreduce on NumPy arrays
    DDP step of an MLP, 2 processes            samples/s, >= 1.6x one process
                                               (plain model, same per-process batch);
                                               and vs 2 processes that skip the
                                               all-reduce (no_sync): communication's cost
Run plainly, this script starts its measurements under MPI through
`python -m ember.distributed.run` (one thread per process) and prints the
ratios; rank 0 of each job reports its numbers as JSON on a line of its own.
Best of several repeats, ember and mpi4py interleaved, so noise from a
shared machine hits both alike.
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


def measure_ddp(communicate=True):
    import ember
    import ember.distributed as dist
    ember.set_num_threads(1)  # the setting: one thread per process
    dist.init_process_group("mpi")
    world = dist.get_world_size()
    model = _mlp(ember)
    if world > 1 or not communicate:
        model = ember.nn.parallel.DistributedDataParallel(model)
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
    _report(dist.get_rank(), samples_per_s=world * MLP_BATCH * MLP_STEPS / best)
    dist.destroy_process_group()


def launch(nproc, what):
    here = os.path.dirname(os.path.abspath(__file__))
    python_dir = os.path.join(os.path.dirname(here), "python")
    env = dict(os.environ, PYTHONPATH=python_dir + os.pathsep + os.environ.get("PYTHONPATH", ""))
    output = subprocess.run(
        [sys.executable, "-m", "ember.distributed.run", "--nproc-per-node", str(nproc),
         os.path.abspath(__file__), what],
        env=env, capture_output=True, text=True, timeout=600, check=True).stdout
    for line in output.splitlines():
        if line.startswith(REPORT):
            return json.loads(line[len(REPORT):])
    raise RuntimeError(f"no result from {what}:\n{output}")


def main():
    reduce = launch(2, "all_reduce")
    print(f"MPI: {reduce.pop('mpi')}")
    print(f"all_reduce 64 MB float32, 2 processes: ember {reduce['ember_GBps']:.2f} GB/s, "
          f"mpi4py Allreduce {reduce['mpi4py_GBps']:.2f} GB/s, "
          f"ratio {reduce['ember_GBps'] / reduce['mpi4py_GBps']:.2f}x (goal >= 0.9x)")
    print(f"    mpi4py Allreduce on the tensor's own memory "
          f"{reduce['mpi4py_tensor_memory_GBps']:.2f} GB/s: ember / that "
          f"{reduce['ember_GBps'] / reduce['mpi4py_tensor_memory_GBps']:.2f}x")
    one = two = alone = 0.0
    for _ in range(JOB_ROUNDS):  # jobs interleaved: a busy spell hits all
        one = max(one, launch(1, "ddp")["samples_per_s"])
        two = max(two, launch(2, "ddp")["samples_per_s"])
        alone = max(alone, launch(2, "ddp_no_sync")["samples_per_s"])
    print(f"DDP MLP step, batch {MLP_BATCH}/process: 1 process {one:.0f} samples/s, "
          f"2 processes {two:.0f} samples/s, ratio {two / one:.2f}x (goal >= 1.6x)")
    print(f"    2 processes under no_sync (no communication) {alone:.0f} samples/s: "
          f"DDP keeps {two / alone:.2f}x of that (what the machine's cores allow)")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        {"all_reduce": measure_all_reduce, "ddp": measure_ddp,
         "ddp_no_sync": lambda: measure_ddp(communicate=False)}[sys.argv[1]]()
    else:
        main()
