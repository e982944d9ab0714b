"""Per-instruction cost of ember.jit's bytecode VM (ember._C.Code).

The program is the hand-assembled loop

    for _ in range(100):
        x = x + 1.0

on a 1-element float32 tensor: per iteration LOOP_TEST, CALL add, INC and
JUMP.  It is timed per iteration against the same loop run by Python in
eager ember, by Python in eager PyTorch and by TorchScript
(torch.jit.script, profiling executor warmed up).  Goal (ember issue 5): the
VM at <= 0.5x TorchScript's time per iteration.

One thread everywhere (ember.set_num_threads(1), torch.set_num_threads(1)).
Each time is the best of several repeats (the least noisy estimate of the
cost itself on a shared machine).  Nothing is asserted.

    PYTHONPATH=python python bench/bench_jit_vm.py [--repeat 15]
"""

import argparse
import operator
import timeit

import ember
from ember.jit.bytecode import Assembler

try:
    import torch
except ImportError:
    torch = None

TRIPS = 100


def vm_loop(add, name):
    """The hand-assembled loop, CALLing `add`."""
    asm = Assembler("add_loop", ["x"])
    counter, trips, one = asm.new_reg(), asm.new_reg(), asm.new_reg()
    asm.load_const(counter, 0)
    asm.load_const(trips, TRIPS)
    asm.load_const(one, 1.0)
    top, done = asm.label(), asm.label()
    asm.bind(top)
    asm.loop_test(counter, trips, done)
    asm.call(0, name, add, [0, one])
    asm.inc(counter)
    asm.jump(top)
    asm.bind(done)
    asm.ret(0)
    program = asm.finish()
    program.verify()
    return program


def eager_loop(x):
    for _ in range(TRIPS):
        x = x + 1.0
    return x


if torch is not None:
    @torch.jit.script
    def torchscript_loop(x: torch.Tensor) -> torch.Tensor:
        for _ in range(100):
            x = x + 1.0
        return x


def per_iteration_us(fn, arg, repeat):
    """Best time of fn(arg) over `repeat` runs, divided by TRIPS, in µs."""
    for _ in range(20):  # warm-up (TorchScript's profiling runs)
        fn(arg)
    number = 200
    best = min(timeit.repeat(lambda: fn(arg), number=number, repeat=repeat))
    return best / number / TRIPS * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    ember.set_num_threads(1)
    x = ember.zeros(1, dtype=ember.float32)
    rows = []
    for name, add in (("aten::add", ember.add), ("operator.add", operator.add)):
        program = vm_loop(add, name)
        code = program.to_c()
        assert code(x).item() == TRIPS
        rows.append((f"ember VM, CALL {name}", per_iteration_us(code, x, args.repeat)))
    print(program.format())
    print()
    rows.append(("ember eager (Python loop)", per_iteration_us(eager_loop, x, args.repeat)))
    one_add = min(timeit.repeat(lambda: x + 1.0, number=20000, repeat=args.repeat)) / 20000
    rows.append(("ember eager x + 1.0 alone", one_add * 1e6))
    torchscript = None
    if torch is not None:
        torch.set_num_threads(1)
        t = torch.zeros(1, dtype=torch.float32)
        rows.append(("torch eager (Python loop)", per_iteration_us(eager_loop, t, args.repeat)))
        torchscript = per_iteration_us(torchscript_loop, t, args.repeat)
        rows.append(("TorchScript (torch.jit.script)", torchscript))
    print(f"{'per iteration of x = x + 1.0':<34} {'µs':>7}  {'vs TorchScript':>14}")
    for label, us in rows:
        ratio = f"{us / torchscript:.2f}x" if torchscript else "-"
        print(f"{label:<34} {us:7.3f}  {ratio:>14}")


if __name__ == "__main__":
    main()
