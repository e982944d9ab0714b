"""ember.distributed on MPI: the checks of tests/distributed_workers.py run
in 2 and 4 processes started by ember.distributed.run (so the launcher is
tested too).  Each launch batches many checks: MPI start-up costs seconds.
Skipped without mpi4py or an mpirun."""
import glob
import os
import signal
import subprocess
import sys
import time

import pytest

pytest.importorskip("mpi4py")
from ember.distributed.run import find_mpirun  # noqa: E402

try:
    find_mpirun()
except SystemExit:
    pytest.skip("no mpirun", allow_module_level=True)

HERE = os.path.dirname(os.path.abspath(__file__))
WORKERS = os.path.join(HERE, "distributed_workers.py")
PYTHON_DIR = os.path.join(os.path.dirname(HERE), "python")
TIMEOUT = 120

COLLECTIVES = ["all_reduce", "repeated_all_reduce", "broadcast_reduce", "gathers_and_scatters",
               "all_to_all", "async_collectives", "point_to_point_and_objects", "groups", "errors",
               "sampler", "list_collectives", "objects", "timeouts"]
DDP = ["ddp_training", "ddp_gradient_as_bucket_view", "ddp_no_sync", "ddp_uneven_batches",
       "ddp_unused_parameters", "ddp_different_models", "ddp_join", "ddp_broadcast_buffers",
       "ddp_process_group"]


def _shared_memory_segments():
    """Open MPI's shared-memory files, and the launcher's directories for them."""
    return set(glob.glob("/dev/shm/sm_segment.*") + glob.glob("/dev/shm/vader*")
               + glob.glob("/dev/shm/ember-mpi-*"))


def _session_is_gone(session, seconds=10):
    """True once no process of the launcher's session is left."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.killpg(session, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.2)
    return False


def launch(nproc, *args, **environment):
    """Runs the launcher in a session of its own, with `environment` added
    to this process's, and returns its exit code and output once every
    process of that session has ended; kills the session if it outlives
    TIMEOUT (a hang must fail the test, not the suite)."""
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""),
               **environment)
    for threads in ("OMP_NUM_THREADS", "EMBER_NUM_THREADS"):  # the launcher's default
        env.pop(threads, None)
    command = [sys.executable, "-m", "ember.distributed.run", "--nproc-per-node", str(nproc),
               *args]
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output, _ = process.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        pytest.fail(f"the job hung for {TIMEOUT}s:\n{output}")
    if not _session_is_gone(process.pid):
        os.killpg(process.pid, signal.SIGKILL)
        pytest.fail(f"processes of the job outlived the launcher:\n{output}")
    return process.returncode, output


def _run_checks(nproc, checks):
    rc, output = launch(nproc, WORKERS, *checks)
    assert rc == 0, output
    assert "passed: " + " ".join(checks) in output


def test_two_processes():
    _run_checks(2, COLLECTIVES + DDP)


def test_four_processes():
    _run_checks(4, COLLECTIVES + ["ddp_training", "ddp_no_sync", "ddp_join",
                                 "ddp_process_group"])


def test_a_crashing_rank_stops_the_job():
    before = _shared_memory_segments()
    rc, output = launch(2, WORKERS, "crash")
    assert rc != 0
    assert "[rank 1] worker failed:" in output
    assert "ValueError: rank 1 fails on purpose" in output
    assert _shared_memory_segments() <= before, "MPI left shared memory behind"


SHOW_SHARED_MEMORY = """
import os, ember, ember.distributed as dist
dist.init_process_group("mpi")
dist.all_reduce(ember.ones(3))     # the shared-memory transport is in use
directory = os.environ.get("OMPI_MCA_btl_sm_backing_directory")
segments = [name for name in os.listdir(directory) if name.startswith("sm_segment.")]
print("files", dist.get_rank(), directory, len(segments), flush=True)
dist.barrier()
"""


def test_shared_memory_files_live_in_the_launchers_directory(tmp_path):
    script = tmp_path / "show_shared_memory.py"
    script.write_text(SHOW_SHARED_MEMORY)
    before = _shared_memory_segments()
    rc, output = launch(2, str(script))
    assert rc == 0, output
    lines = sorted(line.split() for line in output.splitlines() if line.startswith("files"))
    directory = lines[0][2] if lines else None
    assert lines == [["files", str(rank), directory, "2"] for rank in range(2)], output
    assert os.path.basename(directory).startswith("ember-mpi-")
    assert not os.path.exists(directory)
    assert _shared_memory_segments() <= before
    # a directory the user chose is Open MPI's to use, and is left in place
    rc, output = launch(2, str(script), OMPI_MCA_btl_sm_backing_directory=str(tmp_path))
    assert rc == 0, output
    assert f"files 0 {tmp_path} 2" in output, output


def test_a_killed_mpirun_leaves_no_shared_memory(tmp_path):
    # mpirun killed outright cannot remove its workers' files; the
    # launcher's directory goes with them all the same
    script = tmp_path / "kill_mpirun.py"
    script.write_text("import os, signal, time, ember.distributed as dist\n"
                      "dist.init_process_group('mpi')\n"
                      "dist.barrier()\n"
                      "if dist.get_rank() == 1:\n"
                      "    os.kill(os.getppid(), signal.SIGKILL)\n"
                      "time.sleep(1)\n"
                      "os._exit(0)\n")
    before = _shared_memory_segments()
    rc, output = launch(2, str(script))
    assert rc != 0, output
    assert _shared_memory_segments() <= before, "the killed job left shared memory behind"


def _run_alone(program, **environment):
    """Runs `program` as a world of one (no launcher), in an environment
    without MPI's launcher variables nor ember's MPI defaults, plus
    `environment`; returns its stdout."""
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR)
    for name in ("OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "OMPI_MCA_btl",
                 "OMPI_MCA_mpi_yield_when_idle"):
        env.pop(name, None)
    done = subprocess.run([sys.executable, "-c", program], env={**env, **environment},
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_one_process_without_a_launcher():
    before = _shared_memory_segments()
    _run_alone("import datetime, ember, ember.distributed as dist\n"
               "dist.init_process_group(timeout=datetime.timedelta(seconds=60))\n"
               "t = ember.ones(2)\n"
               "dist.all_reduce(t, op=dist.ReduceOp.AVG)\n"
               "assert (dist.get_rank(), dist.get_world_size(), t.tolist()) == (0, 1, [1.0, 1.0])\n"
               "dist.destroy_process_group()\n")
    assert _shared_memory_segments() <= before, "MPI left shared memory behind"


def test_waiting_processes_yield_their_core_by_default():
    # Note [Waiting processes yield their core]: a default set before MPI
    # starts, which the environment overrides.
    program = ("import os, ember.distributed as dist\n"
               "dist.init_process_group()\n"
               "from mpi4py import MPI\n"
               "assert MPI.Is_initialized()\n"
               "print('yield', os.environ['OMPI_MCA_mpi_yield_when_idle'])\n"
               "dist.destroy_process_group()\n")
    assert "yield 1" in _run_alone(program)
    assert "yield 0" in _run_alone(program, OMPI_MCA_mpi_yield_when_idle="0")


def test_timeout_must_be_a_timedelta():
    import ember.distributed as dist
    with pytest.raises(TypeError, match="Expected timeout argument to be of type "
                                        "datetime.timedelta, got 5"):
        dist.init_process_group(timeout=5)
    assert not dist.is_initialized()


def test_launcher_flags_and_environment(tmp_path):
    script = tmp_path / "show_env.py"
    script.write_text(
        "import os, sys\n"
        "keys = ['RANK', 'LOCAL_RANK', 'WORLD_SIZE', 'MASTER_ADDR', 'MASTER_PORT',\n"
        "        'EMBER_NUM_THREADS']\n"
        "print('env', *[os.environ[k] for k in keys], *sys.argv[1:], flush=True)\n")
    rc, output = launch(2, "--nnodes", "1", "--master_addr", "localhost",
                        "--master-port", "29555", str(script), "--lr", "3")
    assert rc == 0, output
    lines = sorted(line for line in output.splitlines() if line.startswith("env"))
    # torchrun's default with several workers: one thread each
    assert "Setting OMP_NUM_THREADS and EMBER_NUM_THREADS for each process to be 1" in output
    assert lines == [f"env {r} {r} 2 localhost 29555 1 --lr 3" for r in range(2)], output


def test_launcher_exit_code_and_one_node_only(tmp_path):
    script = tmp_path / "exit3.py"
    script.write_text("import sys\nsys.exit(3)\n")
    rc, output = launch(1, str(script))
    assert rc != 0, output
    rc, output = launch(2, "--nnodes", "2", str(script))
    assert rc == 2 and "--nnodes 1" in output
