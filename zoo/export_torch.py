#!/usr/bin/python3
"""Exports the torchvision / torch.nn versions of the zoo models to ONNX.

These are independent, real-world inputs for tests and benchmarks (the C++
zoo builders are the other source). Weights are random from --seed. Run with
Debian's Python (python3-torch, python3-torchvision, python3-onnx):

  /usr/bin/python3 zoo/export_torch.py --out_dir=/tmp/zoo [--models=resnet50,bert_base]

Each model is exported at a different default-domain opset (11 to 17) so that
the importer's opset handling is exercised by real exporter output.
"""
import argparse
import math
import os
import sys
import tempfile

import torch
import torch.nn as nn
import torchvision


class Bert(nn.Module):
    """BERT-Base encoder: token + position embeddings, LayerNorm, 12 post-norm layers."""

    def __init__(self, vocab=30522, hidden=768, heads=12, ffn=3072, layers=12, seq=128):
        super().__init__()
        self.word = nn.Embedding(vocab, hidden)
        self.position = nn.Parameter(torch.randn(seq, hidden) * 0.02)
        self.norm = nn.LayerNorm(hidden, eps=1e-12)
        layer = nn.TransformerEncoderLayer(hidden, heads, ffn, dropout=0.0, activation="gelu",
                                           batch_first=True, layer_norm_eps=1e-12)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        # TransformerEncoder deep-copies one layer; give every layer its own
        # weights (the exporter would otherwise share identical initializers).
        for p in self.encoder.parameters():
            if p.dim() > 1:
                nn.init.normal_(p, std=0.02)
            elif p.abs().sum() == 0:
                nn.init.normal_(p, std=0.02)

    def forward(self, input_ids):
        return self.encoder(self.norm(self.word(input_ids) + self.position))


def vit_b_16():
    model = torchvision.models.vit_b_16(weights=None)
    # torchvision zero-initialises the classification head, which would make
    # every output 0 (and every numerical comparison vacuous).
    nn.init.normal_(model.heads.head.weight, std=0.02)
    nn.init.normal_(model.heads.head.bias, std=0.02)
    return model


def inception_v3():
    return torchvision.models.inception_v3(weights=None, aux_logits=False, init_weights=True)


# name -> (constructor, example input, opset)
MODELS = {
    "squeezenet1_1": (lambda: torchvision.models.squeezenet1_1(weights=None), lambda: torch.randn(1, 3, 224, 224), 11),
    "resnet18": (lambda: torchvision.models.resnet18(weights=None), lambda: torch.randn(1, 3, 224, 224), 12),
    "resnet50": (lambda: torchvision.models.resnet50(weights=None), lambda: torch.randn(1, 3, 224, 224), 13),
    "resnext50_32x4d": (lambda: torchvision.models.resnext50_32x4d(weights=None), lambda: torch.randn(1, 3, 224, 224), 14),
    "inception_v3": (inception_v3, lambda: torch.randn(1, 3, 299, 299), 15),
    "bert_base": (Bert, lambda: torch.randint(0, 30522, (1, 128)), 16),
    "vit_b_16": (vit_b_16, lambda: torch.randn(1, 3, 224, 224), 17),
}


def export(name, out_dir, seed):
    ctor, example, opset = MODELS[name]
    torch.manual_seed(seed)
    model = ctor().eval()
    x = example()
    path = os.path.join(out_dir, name + ".onnx")
    fd, tmp = tempfile.mkstemp(dir=out_dir, suffix=".onnx.tmp")
    os.close(fd)
    try:
        # Gradients stay enabled: torch 1.13's fused transformer fast path
        # (aten::_transformer_encoder_layer_fwd) has no ONNX export and is
        # only taken under no_grad.
        # The batch dimension is symbolic ("batch"), as deployed models have
        # it: the optimiser must keep it so.
        torch.onnx.export(model, (x,), tmp, opset_version=opset, do_constant_folding=True,
                          input_names=["input"], output_names=["output"],
                          dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    print(f"exported {name} (opset {opset}) -> {path}", file=sys.stderr)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out_dir", required=True)
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated subset of: " + ", ".join(MODELS))
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    names = [m for m in args.models.split(",") if m]
    unknown = [m for m in names if m not in MODELS]
    if unknown:
        parser.error("unknown model(s): " + ", ".join(unknown))
    if not os.path.isdir(args.out_dir):
        parser.error(f"--out_dir '{args.out_dir}' is not a directory")
    torch.set_num_threads(1)
    for name in names:
        export(name, args.out_dir, args.seed)


if __name__ == "__main__":
    main()
