"""Three small PyTorch programs run on ember by changing only the import: a
CNN classifier, an LSTM language model and a 2-layer GPT.  Same weights
(copied through state_dict) and data; the losses and parameters must agree
with PyTorch's step for step (issue 12)."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def build_cnn(lib):
    nn = lib.nn

    class SmallCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(4, 8, 3, stride=2, padding=1, groups=2), nn.GELU(),
                nn.AdaptiveAvgPool2d(1), nn.Flatten())
            self.head = nn.Linear(8, 3)

        def forward(self, x):
            return self.head(self.features(x))

    return SmallCNN()


def build_lstm_lm(lib):
    nn = lib.nn

    class LanguageModel(nn.Module):
        def __init__(self, vocab=11, width=8):
            super().__init__()
            self.embed = nn.Embedding(vocab, width)
            self.rnn = nn.LSTM(width, width, num_layers=2, batch_first=True)
            self.out = nn.Linear(width, vocab)

        def forward(self, tokens):
            hidden, _ = self.rnn(self.embed(tokens))
            return self.out(hidden)

    return LanguageModel()


def build_gpt(lib):
    nn, F = lib.nn, lib.nn.functional

    class Block(nn.Module):
        def __init__(self, width, heads):
            super().__init__()
            self.heads = heads
            self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
            self.qkv = nn.Linear(width, 3 * width)
            self.proj = nn.Linear(width, width)
            self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(approximate="tanh"),
                                     nn.Linear(4 * width, width))

        def forward(self, x):
            batch, length, width = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(width, dim=2)
            q, k, v = (t.reshape(batch, length, self.heads, -1).transpose(1, 2)
                       for t in (q, k, v))
            attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(attended.transpose(1, 2).reshape(batch, length, width))
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):
        def __init__(self, vocab=13, width=8, heads=2, length=6):
            super().__init__()
            self.token = nn.Embedding(vocab, width)
            self.position = nn.Embedding(length, width)
            self.blocks = nn.ModuleList([Block(width, heads) for _ in range(2)])
            self.ln = nn.LayerNorm(width)
            self.head = nn.Linear(width, vocab, bias=False)

        def forward(self, tokens):
            x = self.token(tokens) + self.position(lib.arange(tokens.shape[1]))
            for block in self.blocks:
                x = block(x)
            return self.head(self.ln(x))

    return GPT()


def train(lib, model, optimizer_factory, batches, loss_of, clip=None):
    optimizer = optimizer_factory(lib, model)
    losses = []
    for inputs, targets in batches:
        optimizer.zero_grad()
        loss = loss_of(lib, model(lib.tensor(inputs)), lib.tensor(targets))
        loss.backward()
        if clip is not None:
            lib.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        losses.append(loss.item())
    return losses


def twin_models(builder):
    torch.manual_seed(0)
    theirs = builder(torch).double()
    ours = builder(ember).double()
    assert list(ours.state_dict()) == list(theirs.state_dict())
    ours.load_state_dict({k: ember.tensor(v.detach().numpy().copy())
                          for k, v in theirs.state_dict().items()})
    return ours, theirs


def run_both(builder, optimizer_factory, batches, loss_of, clip=None):
    ours, theirs = twin_models(builder)
    ours_losses = train(ember, ours, optimizer_factory, batches, loss_of, clip)
    theirs_losses = train(torch, theirs, optimizer_factory, batches, loss_of, clip)
    np.testing.assert_allclose(ours_losses, theirs_losses, rtol=1e-9)
    for (name, p), (_, q) in zip(ours.state_dict().items(), theirs.state_dict().items()):
        np.testing.assert_allclose(p.numpy(), q.detach().numpy(), rtol=1e-8, atol=1e-10,
                                   err_msg=name)
    assert ours_losses[-1] < ours_losses[0]


def cross_entropy(lib, logits, targets):
    return lib.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                           targets.reshape(-1))


def test_cnn_trains_like_torch():
    rng = np.random.default_rng(1)
    batch = (rng.standard_normal((4, 1, 8, 8)), rng.integers(0, 3, 4))
    batches = [batch] * 4     # the same batch: the loss must go down
    run_both(build_cnn, lambda lib, m: lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.9),
             batches, cross_entropy)


def test_lstm_language_model_trains_like_torch():
    rng = np.random.default_rng(2)
    tokens = rng.integers(0, 11, (5, 3, 8))
    batches = [(t[:, :-1], t[:, 1:]) for t in tokens]
    run_both(build_lstm_lm, lambda lib, m: lib.optim.Adam(m.parameters(), lr=0.01), batches,
             cross_entropy, clip=1.0)


def test_gpt_trains_like_torch():
    rng = np.random.default_rng(3)
    tokens = rng.integers(0, 13, (5, 2, 7))
    batches = [(t[:, :-1], t[:, 1:]) for t in tokens]
    run_both(build_gpt, lambda lib, m: lib.optim.AdamW(m.parameters(), lr=0.01), batches,
             cross_entropy)
