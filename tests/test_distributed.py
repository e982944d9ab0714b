"""ember.distributed on MPI: the checks of tests/distributed_workers.py run
in 2 and 4 processes started by ember.distributed.run (so the launcher is
tested too).  Each launch batches many checks: MPI start-up costs seconds.
Skipped without mpi4py or an mpirun."""
import os
import signal
import subprocess
import sys
import time

import pytest

pytest.importorskip("mpi4py")
from ember.distributed.run import (BACKING_DIRECTORY_PARAMETERS,  # noqa: E402
                                   backing_directory_parameter, find_mpirun, open_mpi_version)

try:
    OPEN_MPI = open_mpi_version(find_mpirun())
except SystemExit:
    pytest.skip("no mpirun", allow_module_level=True)

HERE = os.path.dirname(os.path.abspath(__file__))
WORKERS = os.path.join(HERE, "distributed_workers.py")
PYTHON_DIR = os.path.join(os.path.dirname(HERE), "python")
TIMEOUT = 120

COLLECTIVES = ["all_reduce", "repeated_all_reduce", "broadcast_reduce", "gathers_and_scatters",
               "all_to_all", "async_collectives", "point_to_point_and_objects", "groups", "errors",
               "sampler", "list_collectives", "objects", "timeouts", "dropped_work"]
DDP = ["ddp_training", "ddp_gradient_as_bucket_view", "ddp_no_sync", "ddp_uneven_batches",
       "ddp_unused_parameters", "ddp_different_models", "ddp_join", "ddp_broadcast_buffers",
       "ddp_process_group"]


needs_open_mpi = pytest.mark.skipif(OPEN_MPI is None,
                                    reason="the launcher places only Open MPI's files")


def _job_directories(output):
    """The directories the job's workers said their shared-memory files
    are in (lines "shared memory in DIR").  Other jobs may be running
    beside this one (make test-pythons runs two interpreters' suites at
    once), so the tests look at this job's files only."""
    return {line.split()[-1] for line in output.splitlines()
            if line.startswith("shared memory in ")}


def _session_members(session):
    """The processes of `session` (the launcher's, started with
    start_new_session).  Open MPI puts each worker in a process group of
    its own, so the session, not the launcher's group, holds the job."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:   # gone meanwhile
            continue
        if int(fields[3]) == session and fields[0] != "Z":  # stat's 6th field: session
            members.append(int(entry))
    return members


def _session_is_gone(session, seconds=10):
    """True once no process of the launcher's session is left; else kills
    what is left, and returns False."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _session_members(session):
            return True
        time.sleep(0.2)
    for pid in _session_members(session):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return False


def _start_launcher(nproc, *args, **environment):
    """The launcher, started in a session of its own, with `environment`
    added to this process's; its output (and its workers') on a pipe."""
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""),
               **environment)
    for threads in ("OMP_NUM_THREADS", "EMBER_NUM_THREADS"):  # the launcher's default
        env.pop(threads, None)
    command = [sys.executable, "-m", "ember.distributed.run", "--nproc-per-node", str(nproc),
               *args]
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)


def launch(nproc, *args, **environment):
    """Runs the launcher (_start_launcher) and returns its exit code and
    output once every process of its session has ended; kills the session
    if it outlives TIMEOUT (a hang must fail the test, not the suite)."""
    process = _start_launcher(nproc, *args, **environment)
    try:
        output, _ = process.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        _session_is_gone(process.pid, seconds=0)   # kills the whole job
        output, _ = process.communicate()
        pytest.fail(f"the job hung for {TIMEOUT}s:\n{output}")
    if not _session_is_gone(process.pid):
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
    rc, output = launch(2, WORKERS, "crash")
    assert rc != 0
    assert "[rank 1] worker failed:" in output
    assert "ValueError: rank 1 fails on purpose" in output
    if OPEN_MPI is not None:
        directories = _job_directories(output)
        assert len(directories) == 1, output
        assert not os.path.exists(*directories), "MPI left shared memory behind"


SHOW_SHARED_MEMORY = """
import os, sys, ember, ember.distributed as dist
sys.path.insert(0, %r)
from distributed_workers import shared_memory_directory
dist.init_process_group("mpi")
dist.all_reduce(ember.ones(3))     # the shared-memory transport is in use
directory = shared_memory_directory()
segments = [name for name in os.listdir(directory) if "segment" in name]
print("files", dist.get_rank(), directory, len(segments), flush=True)
dist.barrier()
""" % HERE


@needs_open_mpi
def test_shared_memory_files_live_in_the_launchers_directory(tmp_path):
    script = tmp_path / "show_shared_memory.py"
    script.write_text(SHOW_SHARED_MEMORY)
    rc, output = launch(2, str(script))
    assert rc == 0, output
    lines = sorted(line.split() for line in output.splitlines() if line.startswith("files"))
    directory = lines[0][2] if lines else None
    assert lines == [["files", str(rank), directory, "2"] for rank in range(2)], output
    assert os.path.basename(directory).startswith("ember-mpi-")
    assert not os.path.exists(directory)
    # a directory the user chose is Open MPI's to use, and is left in place
    chosen = tmp_path / "chosen"
    chosen.mkdir()
    parameter = "OMPI_MCA_" + backing_directory_parameter(OPEN_MPI)
    rc, output = launch(2, str(script), **{parameter: str(chosen)})
    assert rc == 0, output
    assert f"files 0 {chosen} 2" in output, output
    assert chosen.is_dir() and not os.listdir(chosen)  # Open MPI's own clean-up


def _script_noting_its_directory(path, body):
    """A worker program that writes where its job's shared-memory files are
    to `path`.dir (mpirun passes the workers' output on, and a killed one
    loses it), then runs `body`."""
    noted = path.with_suffix(".dir")
    path.write_text(f"import os, signal, sys, time\nsys.path.insert(0, {HERE!r})\n"
                    "import ember.distributed as dist\n"
                    "from distributed_workers import shared_memory_directory\n"
                    "dist.init_process_group('mpi')\n"
                    "if dist.get_rank() == 0:\n"
                    f"    with open({str(noted)!r}, 'w') as f:\n"
                    "        f.write(shared_memory_directory())\n"
                    "dist.barrier()\n" + body)
    return str(path), noted


@needs_open_mpi
def test_a_killed_mpirun_leaves_no_shared_memory(tmp_path):
    # mpirun killed outright cannot remove its workers' files; the
    # launcher's directory goes with them all the same
    script, noted = _script_noting_its_directory(
        tmp_path / "kill_mpirun.py",
        "if dist.get_rank() == 1:\n"
        "    os.kill(os.getppid(), signal.SIGKILL)\n"
        "time.sleep(1)\n"
        "os._exit(0)\n")
    rc, output = launch(2, script)
    assert rc == 128 + signal.SIGKILL, output   # the shell's code for a killed process
    assert "ember-mpi-" in noted.read_text()
    assert not os.path.exists(noted.read_text()), "the killed job left shared memory behind"


@needs_open_mpi
def test_sigterm_stops_the_job_and_its_files(tmp_path):
    # A scheduler's SIGTERM to the launcher reaches mpirun, which stops the
    # workers (one of them waiting in a collective); then the files go.
    script, noted = _script_noting_its_directory(
        tmp_path / "wait.py",
        "print('waiting', flush=True)\n"
        "if dist.get_rank() == 1:\n"
        "    time.sleep(120)\n"
        "dist.barrier()\n")
    process = _start_launcher(2, script)
    lines = []
    try:
        for line in process.stdout:   # until both workers wait
            lines.append(line)
            if sum(text.startswith("waiting") for text in lines) == 2:
                break
        process.send_signal(signal.SIGTERM)
        rest, _ = process.communicate(timeout=60)
    finally:
        if not _session_is_gone(process.pid, seconds=30):
            pytest.fail("processes of the job outlived SIGTERM:\n" + "".join(lines))
    output = "".join(lines) + rest
    assert process.returncode != 0, output
    assert "ember-mpi-" in noted.read_text()
    assert not os.path.exists(noted.read_text()), output


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


def test_one_process_without_a_launcher(tmp_path):
    shared_memory = tmp_path / "shm"
    shared_memory.mkdir()
    _run_alone("import datetime, ember, ember.distributed as dist\n"
               "dist.init_process_group(timeout=datetime.timedelta(seconds=60))\n"
               "t = ember.ones(2)\n"
               "dist.all_reduce(t, op=dist.ReduceOp.AVG)\n"
               "assert (dist.get_rank(), dist.get_world_size(), t.tolist()) == (0, 1, [1.0, 1.0])\n"
               "dist.destroy_process_group()\n",
               **{"OMPI_MCA_" + name: str(shared_memory)
                  for name in BACKING_DIRECTORY_PARAMETERS})
    assert not os.listdir(shared_memory), "MPI left shared memory behind"


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
