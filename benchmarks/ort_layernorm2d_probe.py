#!/usr/bin/python3
"""LayerNorm2d (layer normalisation over the channels of an NCHW tensor)
in the forms ONNX Runtime could run, timed against the form exporters write.

Exports the corpus model `nafnet_layernorm2d_op13` (zoo/export_real.py,
the same seed and weights) once as the corpus writes it and once per
variant below, each norm rewritten by hand, checks each variant's output
against the written form's in torch, and times each against the written
form in ORT with benchmarks/ort_file_ab.py (1 intra-op thread, level all,
interleaved pairs in sessions whose order alternates):

  fused      Transpose, LayerNormalization (opset 17), Transpose: what the
             rules layernorm_channels_first_* make of every norm
  fused_c16  the same for norms of 16 channels or more only (the others
             written out)
  fused_c32  the same for norms of 32 channels or more only
  rsqrt      written out, the square as a product, scale before the
             division, the division as a product with Reciprocal(Sqrt)
  conv_mean  both means over the channels as a 1 x 1 convolution with
             weights 1 / C
  sum        both means as ReduceSum times 1 / C
  conv_rsqrt conv_mean with the division as a product with
             Reciprocal(Sqrt)
  center_conv  x - mean(x) as one 1 x 1 convolution with weights
             I - 1 / C, the variance's mean as in conv_mean

  /usr/bin/python3 benchmarks/ort_layernorm2d_probe.py [--width=8] [--shape=1,3,64,64] [--sessions=4] [--pairs=40] [--variants=a,b]

A measurement for the docs, not part of the build.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "zoo"))
import export_real  # noqa: E402

Norm = export_real.NafNetLayerNorm2d.Norm
WRITTEN = Norm.forward


def fused_from(cmin):
    def forward(self, x):
        c = self.weight.shape[0]
        if c < cmin:
            return WRITTEN(self, x)
        return F.layer_norm(x.permute(0, 2, 3, 1), (c,), self.weight, self.bias, self.eps).permute(0, 3, 1, 2)
    return forward


def rsqrt(self, x):
    d = x - x.mean(1, keepdim=True)
    var = (d * d).mean(1, keepdim=True)
    return (self.weight.view(1, -1, 1, 1) * d) * (var + self.eps).sqrt().reciprocal() + self.bias.view(1, -1, 1, 1)


def means_by(mean):
    def forward(self, x):
        c = self.weight.shape[0]
        d = x - mean(x, c)
        y = d / (mean(d * d, c) + self.eps).sqrt()
        return self.weight.view(1, -1, 1, 1) * y + self.bias.view(1, -1, 1, 1)
    return forward


def conv_mean(x, c):
    return F.conv2d(x, torch.full((1, c, 1, 1), 1.0 / c))


def sum_mean(x, c):
    return x.sum(1, keepdim=True) * (1.0 / c)


def conv_rsqrt(self, x):
    c = self.weight.shape[0]
    d = x - conv_mean(x, c)
    y = d * (conv_mean(d * d, c) + self.eps).sqrt().reciprocal()
    return self.weight.view(1, -1, 1, 1) * y + self.bias.view(1, -1, 1, 1)


def center_conv(self, x):
    c = self.weight.shape[0]
    centre = (torch.eye(c) - torch.full((c, c), 1.0 / c)).view(c, c, 1, 1)
    d = F.conv2d(x, centre)
    y = d / (conv_mean(d * d, c) + self.eps).sqrt()
    return self.weight.view(1, -1, 1, 1) * y + self.bias.view(1, -1, 1, 1)


VARIANTS = {
    "fused": (fused_from(0), 17),
    "fused_c16": (fused_from(16), 17),
    "fused_c32": (fused_from(32), 17),
    "rsqrt": (rsqrt, 13),
    "conv_mean": (means_by(conv_mean), 13),
    "sum": (means_by(sum_mean), 13),
    "conv_rsqrt": (conv_rsqrt, 13),
    "center_conv": (center_conv, 13),
}


def export(forward, opset, width, shape, path):
    Norm.forward = forward
    try:
        torch.manual_seed(1)  # zoo/export_real.py's default seed
        model = export_real.NafNetLayerNorm2d(width=width).eval()
        x = torch.randn(*shape)
        with torch.no_grad():
            y = model(x)
            torch.onnx.export(model, (x,), path, opset_version=opset, input_names=["x"], output_names=["y"],
                              dynamic_axes={"x": {0: "N", 2: "H", 3: "W"}, "y": {0: "N"}},
                              do_constant_folding=False)
        return y
    finally:
        Norm.forward = WRITTEN


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--width", type=int, default=8)
    p.add_argument("--shape", default="1,3,64,64")
    p.add_argument("--sessions", type=int, default=4)
    p.add_argument("--pairs", type=int, default=40)
    p.add_argument("--variants", default=",".join(VARIANTS))
    args = p.parse_args()
    torch.set_num_threads(1)
    shape = [int(d) for d in args.shape.split(",")]
    with tempfile.TemporaryDirectory() as d:
        written = os.path.join(d, "written.onnx")
        reference = export(WRITTEN, 13, args.width, shape, written)
        for name in args.variants.split(","):
            forward, opset = VARIANTS[name]
            path = os.path.join(d, name + ".onnx")
            err = float(((export(forward, opset, args.width, shape, path) - reference).abs().max() /
                         reference.abs().max()))
            out = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks/ort_file_ab.py"), written, path,
                                  "x:" + args.shape, str(args.sessions), str(args.pairs)],
                                 check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
            print("%-10s (max relative difference %.1e) %s" % (name, err, out), flush=True)


if __name__ == "__main__":
    main()
