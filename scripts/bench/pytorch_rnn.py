#!/usr/bin/env python3
"""PyTorch twins of dpbench's sequence models (nmt, rnnlm), measured the way dpbench measures.

nmt: LSTM encoder-decoder without attention, decoder initialised from the encoder's final states,
projection without bias, loss = cross-entropy summed over target tokens / batch, Adam. Two LSTM
implementations, as dpbench's --encoder_type:
  cudnn_lstm  nn.LSTM (cuDNN's fused RNN); --direction=bi: num_encoder_layers/2 bidirectional layers
  dynamic     an nn.LSTMCell loop, one time step at a time through every layer (the usual way to
              write TensorFlow's dynamic_rnn in PyTorch); --direction=bi: separate forward and
              backward stacks of num_encoder_layers/2 cells, the backward one reading reversed
rnnlm: embedding -> nn.LSTM (or the LSTMCell loop) -> projection without bias, mean token loss.
Synthetic tokens resident on the GPU; warm-up steps skipped; then host wall clock over the
measured steps after a device synchronisation. Prints one JSON line (items_per_sec = words/s for
nmt, counting source + target tokens; tokens/s for rnnlm)."""
import argparse
import json
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def uniform_(module, scale=0.1):
    for p in module.parameters():
        nn.init.uniform_(p, -scale, scale)


class CellStack(nn.Module):
    """num_layers LSTMCells run step by step: for t, for layer."""

    def __init__(self, input_size, hidden, num_layers):
        super().__init__()
        self.cells = nn.ModuleList(
            [nn.LSTMCell(input_size if l == 0 else hidden, hidden) for l in range(num_layers)])

    def forward(self, x, states=None):  # x (T, B, in); states: lists of (B, H) or None
        T, B = x.shape[0], x.shape[1]
        H = self.cells[0].hidden_size
        if states is None:
            zeros = x.new_zeros(B, H)
            h = [zeros] * len(self.cells)
            c = [zeros] * len(self.cells)
        else:
            h, c = list(states[0]), list(states[1])
        outputs = []
        for t in range(T):
            inp = x[t]
            for l, cell in enumerate(self.cells):
                h[l], c[l] = cell(inp, (h[l], c[l]))
                inp = h[l]
            outputs.append(inp)
        return torch.stack(outputs), (h, c)


class Nmt(nn.Module):
    def __init__(self, a):
        super().__init__()
        E, H, L = a.embedding_dim, a.num_units, a.num_encoder_layers
        self.a = a
        self.src_embedding = nn.Embedding(a.src_vocab_size, E)
        self.tgt_embedding = nn.Embedding(a.tgt_vocab_size, E)
        bi = a.direction == "bi"
        if a.encoder_type == "cudnn_lstm":
            self.encoder = nn.LSTM(E, H, L // 2 if bi else L, bidirectional=bi)
            self.decoder = nn.LSTM(E, H, a.num_decoder_layers)
        else:
            self.encoder = CellStack(E, H, L // 2 if bi else L)
            self.backward_encoder = CellStack(E, H, L // 2) if bi else None
            self.decoder = CellStack(E, H, a.num_decoder_layers)
        self.projection = nn.Linear(H, a.tgt_vocab_size, bias=False)
        uniform_(self)

    def forward(self, src, tgt_in, tgt_out):
        B = src.shape[1]
        x = self.src_embedding(src)
        if self.a.encoder_type == "cudnn_lstm":
            _, state = self.encoder(x)                      # (L * D, B, H), pseudo-layer order
            y, _ = self.decoder(self.tgt_embedding(tgt_in), state)
        else:
            _, (h, c) = self.encoder(x)
            if self.backward_encoder is not None:          # interleave: fw l0, bw l0, fw l1, ...
                _, (hb, cb) = self.backward_encoder(torch.flip(x, [0]))
                h = [s for pair in zip(h, hb) for s in pair]
                c = [s for pair in zip(c, cb) for s in pair]
            y, _ = self.decoder(self.tgt_embedding(tgt_in), (h, c))
        logits = self.projection(y.reshape(-1, y.shape[-1]))
        return F.cross_entropy(logits, tgt_out.reshape(-1), reduction="sum") / B


class Rnnlm(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.embedding = nn.Embedding(a.vocab_size, a.embedding_dim)
        if a.encoder_type == "cudnn_lstm":
            self.lstm = nn.LSTM(a.embedding_dim, a.num_units, a.num_layers)
        else:
            self.lstm = CellStack(a.embedding_dim, a.num_units, a.num_layers)
        self.projection = nn.Linear(a.num_units, a.vocab_size, bias=False)
        uniform_(self)

    def forward(self, tokens, labels):
        y, _ = self.lstm(self.embedding(tokens))
        return F.cross_entropy(self.projection(y.reshape(-1, y.shape[-1])), labels.reshape(-1))


def add_model_arguments(p):
    """The sequence models' shape flags (dpbench's names and defaults; None: resolve_defaults)."""
    p.add_argument("--encoder_type", default=None, choices=["cudnn_lstm", "dynamic"],
                   help="default: nmt dynamic, rnnlm cudnn_lstm (as dpbench)")
    p.add_argument("--direction", default="bi", choices=["uni", "bi"])
    p.add_argument("--src_vocab_size", type=int, default=50000)
    p.add_argument("--tgt_vocab_size", type=int, default=50000)
    p.add_argument("--vocab_size", type=int, default=10001)
    p.add_argument("--embedding_dim", type=int, default=None, help="default: nmt 512, rnnlm 32")
    p.add_argument("--num_units", type=int, default=None, help="default: nmt 512, rnnlm 128")
    p.add_argument("--num_encoder_layers", type=int, default=4)
    p.add_argument("--num_decoder_layers", type=int, default=4)
    p.add_argument("--num_layers", type=int, default=2)
    p.add_argument("--src_max_len", type=int, default=100)
    p.add_argument("--tgt_max_len", type=int, default=100)
    p.add_argument("--seq_len", type=int, default=50)


def resolve_defaults(a):
    """Fills the per-model defaults left as None (a.model, a.batch_size and the flags above)."""
    nmt = a.model == "nmt"
    a.encoder_type = a.encoder_type or ("dynamic" if nmt else "cudnn_lstm")
    a.batch_size = a.batch_size or (384 if nmt else 512)
    a.embedding_dim = a.embedding_dim or (512 if nmt else 32)
    a.num_units = a.num_units or (512 if nmt else 128)


def set_precision(precision):
    """TF32 for GEMMs and cuDNN's RNNs only with --precision=tf32; cuDNN autotuning on."""
    tf32 = precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = True


def build_model(a, device):
    """The nmt or rnnlm twin (uniform(-0.1, 0.1) initialisation) on `device`."""
    return (Nmt(a) if a.model == "nmt" else Rnnlm(a)).to(device)


def synthetic_inputs(a, device):
    """(model inputs, items per step): random tokens resident on `device`, time-major. Items are
    words for nmt (source + target tokens per sentence pair) and tokens for rnnlm."""
    B = a.batch_size
    if a.model == "nmt":
        src = torch.randint(0, a.src_vocab_size, (a.src_max_len, B), device=device)
        tgt = torch.randint(0, a.tgt_vocab_size, (a.tgt_max_len + 1, B), device=device)
        return (src, tgt[:-1], tgt[1:]), B * (a.src_max_len + a.tgt_max_len)
    tokens = torch.randint(0, a.vocab_size, (a.seq_len + 1, B), device=device)
    return (tokens[:-1], tokens[1:]), B * a.seq_len


def make_optimizer(model, learning_rate):
    # fused=True: one multi-tensor kernel per step, the strongest stock Adam (dpbench's is fused).
    return torch.optim.Adam(model.parameters(), lr=learning_rate, fused=True)


def make_step(model, optimizer, inputs):
    """One training step as a function returning the loss (the model returns it). `model` may be
    wrapped (DDP)."""

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss = model(*inputs)
        loss.backward()
        optimizer.step()
        return loss

    return step


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="nmt", choices=["nmt", "rnnlm"])
    p.add_argument("--batch_size", type=int, default=None, help="default: nmt 384, rnnlm 512")
    add_model_arguments(p)
    p.add_argument("--precision", default="tf32", choices=["fp32", "tf32"])
    p.add_argument("--learning_rate", type=float, default=1e-3)
    p.add_argument("--num_batches", type=int, default=40)
    p.add_argument("--num_warmup_batches", type=int, default=10)
    a = p.parse_args()
    resolve_defaults(a)
    nmt = a.model == "nmt"

    set_precision(a.precision)
    dev = torch.device("cuda")
    B = a.batch_size
    model = build_model(a, dev)
    inputs, items = synthetic_inputs(a, dev)
    optimizer = make_optimizer(model, a.learning_rate)
    step = make_step(model, optimizer, inputs)

    for _ in range(a.num_warmup_batches):
        step()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(a.num_batches):
        loss = step()
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    print(json.dumps({"framework": "pytorch", "torch": torch.__version__,
                      "cudnn": torch.backends.cudnn.version(), "model": a.model,
                      "encoder_type": a.encoder_type, "direction": a.direction if nmt else None,
                      "batch_size": B, "precision": a.precision,
                      "num_parameters": sum(q.numel() for q in model.parameters()),
                      "items_per_sec": items * a.num_batches / elapsed, "total_time_s": elapsed,
                      "final_loss": float(loss.detach())}))


if __name__ == "__main__":
    main()
