"""Join: training on uneven inputs (torch.distributed.algorithms.join).

Note [Shadowing the collectives of a joined process]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A process that runs out of batches before the others would leave them
waiting in their next collective.  Inside `with Join([...])`, a process that
leaves its loop instead loops in __exit__: each round, an all-reduce of 0
matched with the 1 that every process still training contributes at the
start of its iteration (`notify_join_context`) counts those processes; while
any are left, each joinable's hook issues the collectives that one
iteration of theirs issues (a DDP backward's bucket all-reduces, of zeros).
When the count is 0 everyone has joined and the post-hooks run (DDP copies
the model of a process that joined last to the others).

MPI matches collectives by the order in which a communicator's processes
issue them, and a nonblocking one only with a nonblocking one: every shadow
is the same call as the one it stands for, in the same order, blocking or
not as that one is.
"""
import abc
import collections
import warnings

import ember

__all__ = ["Join", "Joinable", "JoinHook"]

# Past this many rounds in __exit__, PyTorch warns about the skew.
_SKEW_WARNING_ROUNDS = 1000


class JoinHook:
    """What a joined process does for one joinable: main_hook() once per
    round while others still train, post_hook(is_last_joiner) once all
    have joined.  Both do nothing by default."""

    def main_hook(self):
        pass

    def post_hook(self, is_last_joiner):
        pass


_JoinConfig = collections.namedtuple(
    "_JoinConfig", ["enable", "throw_on_early_termination", "is_first_joinable"])


def _disabled_join_config():
    return _JoinConfig(enable=False, throw_on_early_termination=False,
                       is_first_joinable=False)


class Joinable(abc.ABC):
    """A class whose iterations issue collectives and that a Join can stand
    in for once its process has joined.  It calls
    Join.notify_join_context(self) at the start of every iteration."""

    @abc.abstractmethod
    def __init__(self):
        super().__init__()
        self._join_config = _disabled_join_config()

    @abc.abstractmethod
    def join_hook(self, **kwargs):
        """The JoinHook that shadows this joinable's collectives."""

    @property
    @abc.abstractmethod
    def join_device(self):
        """The device of the join's collectives."""

    @property
    @abc.abstractmethod
    def join_process_group(self):
        """The process group of the join's collectives."""


def _dist():
    import ember.distributed as dist
    return dist


class Join:
    """with Join(joinables): the processes of the joinables' group may run
    different numbers of iterations (Note [Shadowing the collectives of a
    joined process]).  throw_on_early_termination=True instead raises on
    every process as soon as one runs out.  Extra keyword arguments go to
    every joinable's join_hook."""

    def __init__(self, joinables, enable=True, throw_on_early_termination=False, **kwargs):
        if len(joinables) == 0:
            raise ValueError("The join context manager requires at least one joinable")
        self._joinables = joinables
        self._join_hooks = [joinable.join_hook(**kwargs) for joinable in joinables]
        self._enable = enable
        self._throw_on_early_termination = throw_on_early_termination
        self._set_joinable_configs()
        self._extract_dist_info()

    def _set_joinable_configs(self):
        """The first joinable issues the join's own collectives."""
        for position, joinable in enumerate(self._joinables):
            joinable._join_config = _JoinConfig(
                enable=self._enable,
                throw_on_early_termination=self._throw_on_early_termination,
                is_first_joinable=position == 0)

    def _extract_dist_info(self):
        groups = {id(j.join_process_group): j.join_process_group for j in self._joinables}
        if len(groups) > 1:
            raise ValueError("Using join context manager with multiple process groups")
        devices = {str(j.join_device) for j in self._joinables}
        if len(devices) > 1:
            raise ValueError("Using join context manager with multiple devices")
        self._process_group = next(iter(groups.values()))
        self._rank = _dist().get_rank(self._process_group)
        self._device = self._joinables[0].join_device

    def __enter__(self):
        pass

    def __exit__(self, type, value, traceback):
        """Runs the main hooks until every process has joined, then the
        post-hooks; an exception from the block passes through untouched."""
        if not self._enable or type:
            return
        is_last_joiner = True
        rounds = 0
        while self._count_nonjoined() > 0:
            if rounds == _SKEW_WARNING_ROUNDS + 1:
                warnings.warn(
                    f"Detected uneven input skew of greater than {_SKEW_WARNING_ROUNDS}. "
                    f"This means that rank {self._rank} has at least "
                    f"{_SKEW_WARNING_ROUNDS} fewer inputs than other currently-active "
                    f"ranks. This level of skew could lead to performance degradation "
                    f"during training.", stacklevel=2)
            if self._throw_on_early_termination:
                self._notify_procs_to_terminate()
            for hook in self._join_hooks:
                hook.main_hook()
            is_last_joiner = False
            rounds += 1
        for hook in self._join_hooks:
            hook.post_hook(is_last_joiner)

    def _count_nonjoined(self):
        """Matches the processes' notify_join_context all-reduce of 1s."""
        count = ember.zeros(1)
        _dist().all_reduce(count, group=self._process_group, async_op=True).wait()
        return int(count.item())

    def _notify_procs_to_terminate(self):
        """Matches the check of notify_join_context with a 1, then raises."""
        _dist().all_reduce(ember.ones(1), group=self._process_group)
        raise RuntimeError(f"Rank {self._rank} exhausted all inputs.")

    @staticmethod
    def notify_join_context(joinable):
        """Called by a joinable at the start of each iteration: tells the
        joined processes that this one still trains, and with
        throw_on_early_termination raises if one has joined.  Returns the
        work of the all-reduce counting the processes still training (for
        the first joinable; None for the others and when disabled)."""
        if not hasattr(joinable, "_join_config"):
            raise AssertionError(f"Check that the {type(joinable)} constructor calls the "
                                 f"``Joinable`` constructor")
        config = joinable._join_config
        if not config.is_first_joinable or not config.enable:
            return None
        dist, group = _dist(), joinable.join_process_group
        still_training = ember.ones(1)
        work = dist.all_reduce(still_training, group=group, async_op=True)
        if config.throw_on_early_termination:
            joined = ember.zeros(1)
            dist.all_reduce(joined, group=group)
            if joined.item():
                raise RuntimeError("Detected at least one rank that exhausted inputs. "
                                   "Throwing across all ranks.")
        return work
