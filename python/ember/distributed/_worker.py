"""One worker of `python -m ember.distributed.run`: sets torchrun's
environment from MPI's, runs the script, and on an exception prints its
traceback and aborts the whole MPI job, so no other worker is left waiting
in a collective."""
import os
import runpy
import sys
import traceback

# Where MPI implementations put a process's place in the job.
_RANK_VARS = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK")
_SIZE_VARS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE")
_LOCAL_RANK_VARS = ("OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID")
_LOCAL_SIZE_VARS = ("OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS")


def _first(names, default):
    for name in names:
        if name in os.environ:
            return os.environ[name]
    return default


def set_torchrun_environment():
    rank = _first(_RANK_VARS, "0")
    size = _first(_SIZE_VARS, "1")
    os.environ["RANK"] = rank
    os.environ["WORLD_SIZE"] = size
    os.environ["LOCAL_RANK"] = _first(_LOCAL_RANK_VARS, rank)
    os.environ["LOCAL_WORLD_SIZE"] = _first(_LOCAL_SIZE_VARS, size)
    os.environ["GROUP_RANK"] = os.environ["ROLE_RANK"] = rank
    return rank


def _abort_job(code):
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized():
        mpi.COMM_WORLD.Abort(code)
    os._exit(code)


def main(argv):
    run_module = argv[0] == "-m"
    if run_module:
        argv = argv[1:]
    target, args = argv[0], argv[1:]
    rank = set_torchrun_environment()
    sys.argv = [target] + args
    try:
        if run_module:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            sys.path[0] = os.path.dirname(os.path.abspath(target))
            runpy.run_path(target, run_name="__main__")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if code:
            sys.stderr.flush()
            _abort_job(code)
    except BaseException:
        sys.stderr.write(f"[rank {rank}] worker failed:\n{traceback.format_exc()}")
        sys.stderr.flush()
        _abort_job(1)


if __name__ == "__main__":
    main(sys.argv[1:])
