#!/usr/bin/env python3
"""PyTorch twin of dpbench's Transformer nmt (--model=nmt --encoder_type=transformer), measured the
way dpbench measures.

The network: nn.Transformer(d_model, nhead, layers, layers, ffn, dropout) (post-norm, ReLU, final
layer norms on both stacks, its attention through F.scaled_dot_product_attention), two
nn.Embedding(vocab, d_model) scaled by sqrt(d_model) plus the sinusoidal positions and dropout, a
bias-free nn.Linear(d_model, vocab) projection; causal self-attention in the decoder; loss = the
cross-entropy summed over target tokens / batch; fused Adam. Sequence-major (T, B, d) as dpbench.
At the defaults it has 120,940,544 parameters (num_parameters in the JSON line), dpbench's count.

--precision: fp32 (no TF32), tf32 (default), bf16 or fp16: PyTorch AMP (autocast; fp32 weights,
gradients and Adam state; fp16 with GradScaler). --compile: torch.compile the forward and backward.
Synthetic tokens resident on the GPU; warm-up steps skipped; then host wall clock over the measured
steps after a device synchronisation. Prints one JSON line (items_per_sec: source + target words/s)."""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from twin_timing import add_measurement_arguments, amp_step, fused_adam, measure, result_line, sentence_pairs, set_tf32



def sinusoids(length, dim, device):
    """PE(t, 2i) = sin(t / 10000^(2i/dim)), PE(t, 2i+1) = cos(...), shaped (T, 1, dim)."""
    position = torch.arange(length, dtype=torch.float32, device=device).unsqueeze(1)
    frequency = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32, device=device) * (-math.log(10000.0) / dim))
    pe = torch.zeros(length, dim, device=device)
    pe[:, 0::2] = torch.sin(position * frequency)
    pe[:, 1::2] = torch.cos(position * frequency)
    return pe.unsqueeze(1)


class TransformerNmt(nn.Module):
    def __init__(self, a, device):
        super().__init__()
        d = a.num_units
        self.scale = math.sqrt(d)
        self.src_embedding = nn.Embedding(a.src_vocab_size, d)
        self.tgt_embedding = nn.Embedding(a.tgt_vocab_size, d)
        self.transformer = nn.Transformer(d, a.num_heads, a.num_encoder_layers, a.num_decoder_layers, a.ffn_units,
                                          a.dropout)
        self.projection = nn.Linear(d, a.tgt_vocab_size, bias=False)
        self.dropout = nn.Dropout(a.dropout)
        self.register_buffer("positions", sinusoids(max(a.src_max_len, a.tgt_max_len), d, device), persistent=False)
        self.register_buffer("causal", nn.Transformer.generate_square_subsequent_mask(a.tgt_max_len, device=device),
                             persistent=False)

    def embed(self, table, tokens):
        return self.dropout(table(tokens) * self.scale + self.positions[: tokens.shape[0]])

    def forward(self, src, tgt_in, tgt_out):
        B = src.shape[1]
        y = self.transformer(self.embed(self.src_embedding, src), self.embed(self.tgt_embedding, tgt_in),
                             tgt_mask=self.causal, tgt_is_causal=True)
        logits = self.projection(y.reshape(-1, y.shape[-1]))
        return F.cross_entropy(logits.float(), tgt_out.reshape(-1), reduction="sum") / B


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch_size", type=int, default=128)
    p.add_argument("--src_vocab_size", type=int, default=50000)
    p.add_argument("--tgt_vocab_size", type=int, default=50000)
    p.add_argument("--num_units", type=int, default=512)
    p.add_argument("--num_heads", type=int, default=8)
    p.add_argument("--ffn_units", type=int, default=2048)
    p.add_argument("--num_encoder_layers", type=int, default=6)
    p.add_argument("--num_decoder_layers", type=int, default=6)
    p.add_argument("--src_max_len", type=int, default=100)
    p.add_argument("--tgt_max_len", type=int, default=100)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    add_measurement_arguments(p, learning_rate=1e-3, num_batches=40)
    p.add_argument("--model", default="nmt", choices=["nmt"], help="accepted for dpbench's flag set")
    p.add_argument("--encoder_type", default="transformer", choices=["transformer"],
                   help="accepted for dpbench's flag set")
    a = p.parse_args()

    set_tf32(a.precision)
    device = torch.device("cuda")
    model = TransformerNmt(a, device).to(device)
    inputs, items = sentence_pairs(a, device)
    optimizer = fused_adam(model, a.learning_rate)
    forward = torch.compile(model) if a.compile else model
    step = amp_step(forward, optimizer, inputs, a.precision)
    elapsed, loss = measure(step, a.num_warmup_batches, a.num_batches, a.profile_step)
    print(result_line(a, model, items, elapsed, loss, model="nmt", encoder_type="transformer", compiled=a.compile))


if __name__ == "__main__":
    main()
