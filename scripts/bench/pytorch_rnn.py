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

--precision: fp32 (no TF32 anywhere); tf32 (the default: TF32 for the GEMMs and cuDNN's RNNs);
bf16 or fp16: PyTorch AMP. The weights, their gradients and Adam's state stay fp32; the forward
pass (loss included, computed as in fp32) runs under torch.autocast with that dtype, so the LSTMs
(cuDNN's RNN, or the LSTMCells and their fused cell kernel), the vocabulary projection and their
backward passes run in 16 bits on 16-bit copies of the weights, while the embedding lookups and the
softmax cross-entropy stay fp32 (TF32 allowed there, as an AMP user has it); fp16 scales the loss
(GradScaler; steps whose gradients overflow are skipped, as AMP does). One exception to stock
autocast: it runs cuDNN's RNN in fp16 whatever its dtype (aten/src/ATen/cudnn/AutocastRNN.cpp casts
to at::kHalf). That is what a user of AMP gets, and the default (--cudnn_lstm_dtype=autocast);
--cudnn_lstm_dtype=bf16 makes the cudnn_lstm twin cast its LSTMs' weights, input and state to bf16
itself and run nn.LSTM with autocast off: cuDNN's bf16 RNN (cuDNN >= 9.13; PyTorch 2.11 bundles
9.19). lstm_dtype in the JSON line is what the LSTMs' outputs were.

Synthetic tokens resident on the GPU; warm-up steps skipped; then host wall clock over the
measured steps after a device synchronisation. Prints one JSON line (items_per_sec = words/s for
nmt, counting source + target tokens; tokens/s for rnnlm; precision; amp: true for bf16 and fp16)."""
import argparse
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

from twin_timing import add_measurement_arguments, amp_step, fused_adam, measure, result_line, sentence_pairs, set_tf32

DTYPE_NAMES = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}

# The bf16 cudnn_lstm path hands cuDNN per-weight bf16 copies, which it packs into its weight buffer
# each call (what autocast's own cast does too); PyTorch warns about that once.
warnings.filterwarnings("ignore", message="RNN module weights are not part of single contiguous")


def uniform_(module, scale=0.1):
    for p in module.parameters():
        nn.init.uniform_(p, -scale, scale)


def run_lstm(lstm, x, state, dtype):
    """nn.LSTM `lstm` on x (and state, or None). dtype None: as called (under autocast, stock AMP).
    dtype bf16: cuDNN's RNN in bf16, which stock autocast cannot give (it casts cuDNN's RNN to fp16):
    bf16 copies of the fp32 weights (autograd takes their gradients back to the fp32 weights), the
    input and the state cast to bf16, autocast off for the call."""
    if dtype is None:
        return lstm(x, state)
    weights = {name: w.to(dtype) for name, w in lstm.named_parameters()}
    if state is not None:
        state = tuple(s.to(dtype) for s in state)
    with torch.autocast("cuda", enabled=False):
        return torch.func.functional_call(lstm, weights, (x.to(dtype), state))


def lstm_dtype(a):
    """The dtype run_lstm casts nn.LSTM to: bf16 under --precision=bf16 with
    --cudnn_lstm_dtype=bf16, else None (as called: stock autocast)."""
    wanted = getattr(a, "precision", None) == "bf16" and getattr(a, "cudnn_lstm_dtype", "autocast") == "bf16"
    return torch.bfloat16 if wanted else None


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
        self.rnn_dtype = lstm_dtype(a) if a.encoder_type == "cudnn_lstm" else None
        self.lstm_dtype = None  # what the decoder's outputs were, set by forward
        uniform_(self)

    def forward(self, src, tgt_in, tgt_out):
        B = src.shape[1]
        x = self.src_embedding(src)
        if self.a.encoder_type == "cudnn_lstm":
            _, state = run_lstm(self.encoder, x, None, self.rnn_dtype)  # (L * D, B, H), pseudo-layer order
            y, _ = run_lstm(self.decoder, self.tgt_embedding(tgt_in), state, self.rnn_dtype)
        else:
            _, (h, c) = self.encoder(x)
            if self.backward_encoder is not None:          # interleave: fw l0, bw l0, fw l1, ...
                _, (hb, cb) = self.backward_encoder(torch.flip(x, [0]))
                h = [s for pair in zip(h, hb) for s in pair]
                c = [s for pair in zip(c, cb) for s in pair]
            y, _ = self.decoder(self.tgt_embedding(tgt_in), (h, c))
        self.lstm_dtype = y.dtype
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
        self.rnn_dtype = lstm_dtype(a) if a.encoder_type == "cudnn_lstm" else None
        self.lstm_dtype = None  # what the LSTM's outputs were, set by forward
        uniform_(self)

    def forward(self, tokens, labels):
        x = self.embedding(tokens)
        y, _ = self.lstm(x) if self.rnn_dtype is None else run_lstm(self.lstm, x, None, self.rnn_dtype)
        self.lstm_dtype = y.dtype
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
    p.add_argument("--cudnn_lstm_dtype", default="autocast", choices=["autocast", "bf16"],
                   help="nn.LSTM under --precision=bf16: as stock autocast runs it (cuDNN's RNN in fp16, "
                        "the default) or cast to bf16 by the twin (cuDNN's bf16 RNN)")


def resolve_defaults(a):
    """Fills the per-model defaults left as None (a.model, a.batch_size and the flags above)."""
    nmt = a.model == "nmt"
    a.encoder_type = a.encoder_type or ("dynamic" if nmt else "cudnn_lstm")
    a.batch_size = a.batch_size or (384 if nmt else 512)
    a.embedding_dim = a.embedding_dim or (512 if nmt else 32)
    a.num_units = a.num_units or (512 if nmt else 128)


def set_precision(precision):
    """TF32 for GEMMs and cuDNN's RNNs with --precision=tf32 and under AMP (bf16, fp16: for the math
    autocast leaves in fp32, as an AMP user has it), not with fp32; cuDNN autotuning on."""
    set_tf32(precision)
    torch.backends.cudnn.benchmark = True


def build_model(a, device):
    """The nmt or rnnlm twin (uniform(-0.1, 0.1) initialisation) on `device`."""
    return (Nmt(a) if a.model == "nmt" else Rnnlm(a)).to(device)


def synthetic_inputs(a, device):
    """(model inputs, items per step): random tokens resident on `device`, time-major. Items are
    words for nmt (source + target tokens per sentence pair) and tokens for rnnlm."""
    if a.model == "nmt":
        return sentence_pairs(a, device)
    B = a.batch_size
    tokens = torch.randint(0, a.vocab_size, (a.seq_len + 1, B), device=device)
    return (tokens[:-1], tokens[1:]), B * a.seq_len


def make_optimizer(model, learning_rate):
    return fused_adam(model, learning_rate)


def make_step(model, optimizer, inputs, precision="tf32"):
    """One training step as a function returning the loss (the model returns it). bf16 and fp16 run
    the forward pass under autocast (AMP: fp32 weights, gradients and optimizer state); fp16 scales
    the loss (GradScaler). `model` may be wrapped (DDP)."""
    return amp_step(model, optimizer, inputs, precision)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="nmt", choices=["nmt", "rnnlm"])
    p.add_argument("--batch_size", type=int, default=None, help="default: nmt 384, rnnlm 512")
    add_model_arguments(p)
    add_measurement_arguments(p, learning_rate=1e-3, num_batches=40)
    a = p.parse_args()
    resolve_defaults(a)
    nmt = a.model == "nmt"

    set_precision(a.precision)
    dev = torch.device("cuda")
    model = build_model(a, dev)
    inputs, items = synthetic_inputs(a, dev)
    optimizer = make_optimizer(model, a.learning_rate)
    step = make_step(model, optimizer, inputs, a.precision)

    elapsed, loss = measure(step, a.num_warmup_batches, a.num_batches, a.profile_step)
    print(result_line(a, model, items, elapsed, loss, cudnn=torch.backends.cudnn.version(), model=a.model,
                      encoder_type=a.encoder_type, direction=a.direction if nmt else None,
                      lstm_dtype=DTYPE_NAMES.get(model.lstm_dtype, str(model.lstm_dtype))))


if __name__ == "__main__":
    main()
