"""A GPT training step, ember against PyTorch, side by side (issue 12).

The model is nanoGPT's shape: token and position embeddings, pre-norm
blocks (LayerNorm, causal self-attention through
F.scaled_dot_product_attention, a 4x GELU MLP), a final LayerNorm and an
untied head; AdamW.  The same code builds both models (`lib` is ember or
torch), the weights are copied from torch's through `state_dict`, and the
two libraries take turns within each round, so a noisy machine slows
them alike.  Prints the best step time of each and the ratio ember / torch
against the issue's goal (at most 1.0x).

    PYTHONPATH=python python bench/bench_gpt.py [--threads N] [--quick] [--cpu-time]

Full size: 6 layers, 6 heads, width 384, batch 8, sequence 256, vocabulary
65 (a character-level model).  --quick: 2 layers, width 128, sequence 64.
--cpu-time times by CPU time instead of the wall clock (the calling
thread's with one thread, the process's with more): on a machine shared
with other work, the wall clock counts the time the others run.  The
step's forward (with the loss), backward and optimizer step are also
timed apart, each the best of its rounds.
"""

import argparse
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before NumPy loads it

import numpy as np  # noqa: E402

import ember  # noqa: E402

try:
    import torch
except ImportError:
    torch = None


def build_gpt(lib, vocab, width, heads, layers, length):
    nn, F = lib.nn, lib.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
            self.qkv = nn.Linear(width, 3 * width)
            self.proj = nn.Linear(width, width)
            self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(approximate="tanh"),
                                     nn.Linear(4 * width, width))

        def forward(self, x):
            batch, steps, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(width, dim=2)
            q, k, v = (t.view(batch, steps, heads, -1).transpose(1, 2) for t in (q, k, v))
            attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(attended.transpose(1, 2).reshape(batch, steps, width))
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.token = nn.Embedding(vocab, width)
            self.position = nn.Embedding(length, width)
            self.blocks = nn.ModuleList([Block() for _ in range(layers)])
            self.ln = nn.LayerNorm(width)
            self.head = nn.Linear(width, vocab, bias=False)

        def forward(self, tokens):
            x = self.token(tokens) + self.position(lib.arange(tokens.shape[1], device=tokens.device))
            for block in self.blocks:
                x = block(x)
            return self.head(self.ln(x))

    return GPT()


PHASES = ("forward", "backward", "optimizer")


def training_step(lib, model, tokens, targets, clock):
    """A function running one step and returning its loss and the time
    each of PHASES took on `clock`."""
    optimizer = lib.optim.AdamW(model.parameters(), lr=3e-4)
    F = lib.nn.functional

    def step():
        start = clock()
        optimizer.zero_grad()
        logits = model(tokens)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        forward_end = clock()
        loss.backward()
        backward_end = clock()
        optimizer.step()
        end = clock()
        return loss, (forward_end - start, backward_end - forward_end, end - backward_end)
    return step


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cpu-time", action="store_true")
    args = parser.parse_args()
    if not args.cpu_time:
        clock = time.perf_counter
    else:
        clock = time.thread_time if args.threads == 1 else time.process_time
    shape = dict(vocab=65, width=128, heads=4, layers=2, length=64) if args.quick else \
        dict(vocab=65, width=384, heads=6, layers=6, length=256)
    batch = 8
    ember.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    data = rng.integers(0, shape["vocab"], size=(batch, shape["length"] + 1))
    steps = {}
    ember.manual_seed(0)
    ours = build_gpt(ember, **shape)
    if torch is not None:
        torch.set_num_threads(args.threads)
        torch.manual_seed(0)
        theirs = build_gpt(torch, **shape)
        ours.load_state_dict({k: ember.from_numpy(v.detach().numpy().copy())
                              for k, v in theirs.state_dict().items()})
        steps["torch"] = training_step(torch, theirs, torch.from_numpy(data[:, :-1]),
                                       torch.from_numpy(data[:, 1:]), clock)
    steps["ember"] = training_step(ember, ours, ember.from_numpy(data[:, :-1]),
                                   ember.from_numpy(data[:, 1:]), clock)
    first_losses = {name: step()[0].item() for name, step in steps.items()}  # warm-up
    best = {name: {phase: float("inf") for phase in ("step",) + PHASES} for name in steps}
    for _ in range(args.rounds):
        for name, step in steps.items():
            times = step()[1]
            for phase, seconds in zip(("step",) + PHASES, (sum(times),) + times):
                best[name][phase] = min(best[name][phase], seconds)
    described = ", ".join(f"{k} {v}" for k, v in shape.items())
    print(f"GPT training step (AdamW), batch {batch}, {described}; "
          f"{args.threads} thread(s); best of {args.rounds}; "
          f"clock: {'CPU time' if args.cpu_time else 'wall'}; "
          f"load average {os.getloadavg()[0]:.2f}")
    print("first-step loss: " + ", ".join(f"{k} {v:.6f}" for k, v in first_losses.items()))
    for phase in PHASES + ("step",):
        print(_timing_line(f"GPT {phase}", best, phase, goal=phase == "step"))


def _timing_line(label, best, phase, goal):
    line = f"{label:40s} ember {best['ember'][phase] * 1e3:9.1f} ms"
    if "torch" in best:
        ratio = best["ember"][phase] / best["torch"][phase]
        line += f"  torch {best['torch'][phase] * 1e3:9.1f} ms  ratio {ratio:5.2f}x"
        if goal:
            line += f"  goal <= 1.0x {'met' if ratio <= 1.0 else 'missed'}"
    return line


if __name__ == "__main__":
    main()
