#!/usr/bin/python3
"""Exports the real-model corpus: small models in the shapes users bring.

Each model has the structure of a kind of published model, exported the way
its users get it (torch.onnx.export, random weights from --seed), with the
properties that break optimisers: old opsets (9), dynamic height and width,
hard-swish and squeeze-excitation (mobile CNNs), activations written by
formula (as other frameworks' converters write them), upsampling (FPN
detectors), control flow (If, Loop), shifted-window attention (Swin), and
activations and normalisations written in the forms ONNX Runtime does not
fuse (hard-swish and hard-sigmoid by formula, layer norm without scale and
shift, a residual sum normalised by a layer norm on the CPU), opsets 18
and 20 (built with onnx.helper, in the forms newer exporters write), and a
statically quantized CNN in the QDQ format (as ORT's quantization tool
writes it), and models converted to float16 (names with _fp16). Run
with Debian's Python:

  /usr/bin/python3 zoo/export_real.py --out_dir=/tmp/real

Writes <name>.onnx for every model in MODELS (and <name>.weights for those
whose name ends in _external) and a manifest, models.txt:
one line per model, "name input_shape other_shape", where input_shape is the
--input_shape value the tests give the optimiser and other_shape a second
binding of the symbolic dimensions the written model must also be right at.
"""
import argparse
import itertools
import math
import multiprocessing
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision


class Fpn(nn.Module):
    """A detector's neck in miniature: strided convs with batch norm and
    ReLU6, an upsampled top-down path added to a lateral one, a padded conv,
    a crop (Slice) and a softmax over classes."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 16, 3, stride=2, padding=1)
        self.b1 = nn.BatchNorm2d(16)
        self.c2 = nn.Conv2d(16, 32, 3, stride=2, padding=1)
        self.b2 = nn.BatchNorm2d(32)
        self.lateral = nn.Conv2d(16, 32, 1)
        self.head = nn.Conv2d(32, 8, 3)
        for b in (self.b1, self.b2):
            nn.init.uniform_(b.weight, 0.5, 1.5)
            nn.init.uniform_(b.bias, -0.2, 0.2)
            b.running_mean.uniform_(-0.1, 0.1)
            b.running_var.uniform_(0.5, 1.5)

    def forward(self, x):
        f1 = F.relu6(self.b1(self.c1(x)))
        f2 = F.relu6(self.b2(self.c2(f1)))
        up = F.interpolate(f2, scale_factor=2.0, mode="nearest")
        p = up + self.lateral(f1)
        h = self.head(F.pad(p, (1, 1, 1, 1)))
        h = h[:, :, 1:, 1:]
        return torch.softmax(h, dim=1)


class FormulaActs(nn.Module):
    """Activations and a normalisation written by formula, as paddle2onnx and
    tf2onnx exports write them: hard-swish as x * clip(x + 3, 0, 6) / 6,
    hard-sigmoid gates (squeeze-excitation), a layer norm without scale and
    shift, leaky ReLU and GELU by erf."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 16, 3, padding=1)
        self.se1 = nn.Conv2d(16, 4, 1)
        self.se2 = nn.Conv2d(4, 16, 1)
        self.c2 = nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        y = self.c1(x)
        y = y * torch.clamp(y + 3.0, 0.0, 6.0) / 6.0
        s = y.mean(dim=(2, 3), keepdim=True)
        s = torch.clamp(self.se2(F.relu(self.se1(s))) / 6.0 + 0.5, 0.0, 1.0)
        y = F.leaky_relu(self.c2(y * s), 0.1)
        t = y.mean(dim=(2, 3))
        mu = t.mean(dim=-1, keepdim=True)
        var = ((t - mu) ** 2).mean(dim=-1, keepdim=True)
        t = (t - mu) / torch.sqrt(var + 1e-5)
        t = self.fc(t)
        return 0.5 * t * (1.0 + torch.erf(t / 1.4142135623730951))


def pad_same(x, k, s):
    """TensorFlow's SAME padding computed from the input's size at run time,
    as timm's tf_* models and TF ports write it (Conv2dSame): Shape, Gather
    and arithmetic into Pad, so the pads differ with the input size."""
    ih, iw = x.size()[-2:]
    ph = max((math.ceil(ih / s) - 1) * s + k - ih, 0)
    pw = max((math.ceil(iw / s) - 1) * s + k - iw, 0)
    return F.pad(x, [pw // 2, pw - pw // 2, ph // 2, ph - ph // 2])


class TfSamePad(nn.Module):
    """An EfficientNet block as TF-ported models write it: strided convs with
    SAME padding computed from the input size (odd sizes pad unevenly),
    batch norms, SiLU and a squeeze-excitation gate."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 16, 3, stride=2)
        self.dw = nn.Conv2d(16, 16, 5, stride=2, groups=16)
        self.se1 = nn.Conv2d(16, 4, 1)
        self.se2 = nn.Conv2d(4, 16, 1)
        self.pw = nn.Conv2d(16, 24, 1)
        self.bns = nn.ModuleList([nn.BatchNorm2d(16), nn.BatchNorm2d(16), nn.BatchNorm2d(24)])
        self.head = nn.Linear(24, 10)
        for b in self.bns:
            nn.init.uniform_(b.weight, 0.5, 1.5)
            nn.init.uniform_(b.bias, -0.2, 0.2)
            b.running_mean.uniform_(-0.1, 0.1)
            b.running_var.uniform_(0.5, 1.5)

    def forward(self, x):
        x = F.silu(self.bns[0](self.c1(pad_same(x, 3, 2))))
        x = F.silu(self.bns[1](self.dw(pad_same(x, 5, 2))))
        g = torch.sigmoid(self.se2(F.silu(self.se1(x.mean((2, 3), keepdim=True)))))
        x = self.bns[2](self.pw(x * g))
        return self.head(x.mean((2, 3)))


class PReluFaceNet(nn.Module):
    """A MobileFaceNet-style embedding network (face recognition): conv,
    batch norm and nn.PReLU (one slope per channel, exported [C, 1, 1])
    blocks, depthwise convs, residual bottlenecks, a global depthwise conv
    and a linear embedding with a PReLU (its slope [C])."""

    def __init__(self):
        super().__init__()

        def cbp(i, o, s=1, g=1, k=3):
            return nn.Sequential(nn.Conv2d(i, o, k, s, k // 2, groups=g, bias=False), nn.BatchNorm2d(o),
                                 nn.PReLU(o))

        self.stem = nn.Sequential(cbp(3, 32, 2), cbp(32, 32, 2, g=32), cbp(32, 64, k=1))
        self.expand = nn.Sequential(cbp(64, 128, k=1), cbp(128, 128, g=128))
        self.project = nn.Sequential(nn.Conv2d(128, 64, 1, bias=False), nn.BatchNorm2d(64))
        self.down = nn.Sequential(cbp(64, 64, 2, g=64), cbp(64, 128, k=1), cbp(128, 128, 2, g=128))
        self.gdc = nn.Sequential(nn.Conv2d(128, 128, 7, groups=128, bias=False), nn.BatchNorm2d(128))
        self.emb = nn.Sequential(nn.Linear(128, 64), nn.PReLU(64))
        for m in self.modules():
            if isinstance(m, nn.PReLU):
                nn.init.uniform_(m.weight, 0.05, 0.4)
            if isinstance(m, nn.BatchNorm2d):
                nn.init.uniform_(m.weight, 0.5, 1.5)
                nn.init.uniform_(m.bias, -0.2, 0.2)
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)

    def forward(self, x):
        x = self.stem(x)
        x = x + self.project(self.expand(x))
        return self.emb(torch.flatten(self.gdc(self.down(x)), 1))


class SrResNetPRelu(nn.Module):
    """SRGAN's generator (SRResNet) in miniature, as its PyTorch
    implementations write it: nn.PReLU() with its one shared slope (exported
    [1]) after the first conv, in each residual block (conv, batch norm,
    PReLU, conv, batch norm, skip) and after the x2 pixel shuffle
    (DepthToSpace); a global skip and a 9x9 output conv."""

    def __init__(self):
        super().__init__()
        self.head = nn.Sequential(nn.Conv2d(3, 32, 9, padding=4), nn.PReLU())
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Conv2d(32, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.PReLU(),
                          nn.Conv2d(32, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32)) for _ in range(3))
        self.mid = nn.Sequential(nn.Conv2d(32, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32))
        self.up = nn.Sequential(nn.Conv2d(32, 128, 3, padding=1), nn.PixelShuffle(2), nn.PReLU())
        self.tail = nn.Conv2d(32, 3, 9, padding=4)
        randomise(self)
        for m in self.modules():
            if isinstance(m, nn.PReLU):
                nn.init.uniform_(m.weight, 0.1, 0.3)

    def forward(self, x):
        h = self.head(x)
        y = h
        for b in self.blocks:
            y = y + b(y)
        return self.tail(self.up(h + self.mid(y)))


class CycleGanReflect(nn.Module):
    """CycleGAN's ResNet generator in miniature, as image-to-image and
    style-transfer models write it: reflection padding (ReflectionPad2d: ONNX
    Pad mode reflect) before the 7x7 convs and inside each residual block,
    instance normalisation, two strided convs down and two transposed convs
    up (output_padding 1), tanh. At 1 x 1 the reflect pads do not fit (ONNX
    Runtime needs the axis longer than its pads): without --input_shape the
    importer fits it."""

    def __init__(self):
        super().__init__()
        w = 16

        def block():
            return nn.Sequential(nn.ReflectionPad2d(1), nn.Conv2d(4 * w, 4 * w, 3), nn.InstanceNorm2d(4 * w),
                                 nn.ReLU(), nn.ReflectionPad2d(1), nn.Conv2d(4 * w, 4 * w, 3),
                                 nn.InstanceNorm2d(4 * w))

        self.head = nn.Sequential(nn.ReflectionPad2d(3), nn.Conv2d(3, w, 7), nn.InstanceNorm2d(w), nn.ReLU(),
                                  nn.Conv2d(w, 2 * w, 3, stride=2, padding=1), nn.InstanceNorm2d(2 * w), nn.ReLU(),
                                  nn.Conv2d(2 * w, 4 * w, 3, stride=2, padding=1), nn.InstanceNorm2d(4 * w),
                                  nn.ReLU())
        self.blocks = nn.ModuleList(block() for _ in range(2))
        self.tail = nn.Sequential(
            nn.ConvTranspose2d(4 * w, 2 * w, 3, stride=2, padding=1, output_padding=1), nn.InstanceNorm2d(2 * w),
            nn.ReLU(), nn.ConvTranspose2d(2 * w, w, 3, stride=2, padding=1, output_padding=1), nn.InstanceNorm2d(w),
            nn.ReLU(), nn.ReflectionPad2d(3), nn.Conv2d(w, 3, 7), nn.Tanh())

    def forward(self, x):
        y = self.head(x)
        for b in self.blocks:
            y = y + b(y)
        return self.tail(y)


class RepVggTrainForm(nn.Module):
    """RepVGG (structural re-parameterisation) exported in its training form,
    as a user gets it without calling the model's own switch-to-deploy step:
    each block a 3x3 conv and a 1x1 conv (torch.onnx folds their batch norms
    into them) and, where shapes allow, an identity batch norm, summed before
    the ReLU; one stage of ACNet blocks (3x3, 1x3 and 3x1 convs summed)."""

    class Block(nn.Module):
        def __init__(self, ci, co, stride):
            super().__init__()
            self.k3 = nn.Sequential(nn.Conv2d(ci, co, 3, stride, 1, bias=False), nn.BatchNorm2d(co))
            self.k1 = nn.Sequential(nn.Conv2d(ci, co, 1, stride, 0, bias=False), nn.BatchNorm2d(co))
            self.identity = nn.BatchNorm2d(ci) if ci == co and stride == 1 else None

        def forward(self, x):
            y = self.k3(x) + self.k1(x)
            return torch.relu(y if self.identity is None else y + self.identity(x))

    class AcBlock(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.square = nn.Sequential(nn.Conv2d(c, c, 3, 1, 1, bias=False), nn.BatchNorm2d(c))
            self.hor = nn.Sequential(nn.Conv2d(c, c, (1, 3), 1, (0, 1), bias=False), nn.BatchNorm2d(c))
            self.ver = nn.Sequential(nn.Conv2d(c, c, (3, 1), 1, (1, 0), bias=False), nn.BatchNorm2d(c))

        def forward(self, x):
            return torch.relu(self.square(x) + self.hor(x) + self.ver(x))

    def __init__(self, widths=(32, 32, 64, 128), depths=(1, 2, 3, 3), ac_blocks=2, classes=100):
        super().__init__()
        blocks, ci = [], 3
        for w, d in zip(widths, depths):
            for i in range(d):
                blocks.append(self.Block(ci, w, 2 if i == 0 else 1))
                ci = w
        blocks += [self.AcBlock(ci) for _ in range(ac_blocks)]
        self.features = nn.Sequential(*blocks)
        self.fc = nn.Linear(ci, classes)
        randomise(self)

    def forward(self, x):
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))


class MobileOneTrainForm(nn.Module):
    """MobileOne (timm's MobileOneBlock) in miniature, exported in its training
    form: each depthwise block k parallel 3x3 depthwise convs, a 1x1
    depthwise "scale" conv and (stride 1) an identity batch norm, summed in
    that order; each pointwise block k parallel 1x1 convs and (where shapes
    allow) an identity batch norm; k = 4 as in MobileOne-S0."""

    class Block(nn.Module):
        def __init__(self, ci, co, k, stride, groups, branches):
            super().__init__()

            def conv_bn(kernel):
                return nn.Sequential(nn.Conv2d(ci, co, kernel, stride, kernel // 2, groups=groups, bias=False),
                                     nn.BatchNorm2d(co))

            self.identity = nn.BatchNorm2d(ci) if ci == co and stride == 1 else None
            self.scale = conv_bn(1) if k > 1 else None
            self.kxk = nn.ModuleList(conv_bn(k) for _ in range(branches))

        def forward(self, x):
            identity_out = 0
            if self.identity is not None:
                identity_out = self.identity(x)
            scale_out = 0
            if self.scale is not None:
                scale_out = self.scale(x)
            out = scale_out + identity_out
            for conv in self.kxk:
                out = out + conv(x)
            return torch.relu(out)

    def __init__(self, widths=(32, 64, 128), depths=(2, 2, 2), branches=4):
        super().__init__()
        blocks = [self.Block(3, widths[0], 3, 2, 1, 1)]
        ci = widths[0]
        for w, d in zip(widths, depths):
            for i in range(d):
                stride = 2 if i == 0 else 1
                blocks.append(self.Block(ci, ci, 3, stride, ci, branches))
                blocks.append(self.Block(ci, w, 1, 1, 1, branches))
                ci = w
        self.features = nn.Sequential(*blocks)
        self.fc = nn.Linear(ci, 100)
        randomise(self)

    def forward(self, x):
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))


class ConvTasNetPRelu(nn.Module):
    """Conv-TasNet's separator in miniature, as asteroid writes it: a
    strided Conv1d encoder, global layer norms written out over channels
    and time, temporal blocks (1x1 conv, nn.PReLU() with one shared slope,
    exported [1, 1] after a Conv1d; dilated depthwise conv; 1x1 conv; skip),
    a mask head with a per-channel nn.PReLU (slope [C, 1]) and a
    ConvTranspose1d decoder."""

    class GlobalLayerNorm(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.gamma = nn.Parameter(torch.empty(c, 1).uniform_(0.5, 1.5))
            self.beta = nn.Parameter(torch.empty(c, 1).uniform_(-0.2, 0.2))

        def forward(self, x):
            mean = x.mean(dim=(1, 2), keepdim=True)
            var = ((x - mean) ** 2).mean(dim=(1, 2), keepdim=True)
            return self.gamma * (x - mean) / (var + 1e-8).sqrt() + self.beta

    def __init__(self, n=64, b=32, h=64, blocks=4, sources=2):
        super().__init__()
        gln = ConvTasNetPRelu.GlobalLayerNorm
        self.sources, self.n = sources, n
        self.encoder = nn.Conv1d(1, n, 16, stride=8, bias=False)
        self.bottleneck = nn.Sequential(gln(n), nn.Conv1d(n, b, 1))
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Conv1d(b, h, 1), nn.PReLU(), gln(h),
                          nn.Conv1d(h, h, 3, padding=2 ** k, dilation=2 ** k, groups=h), nn.PReLU(), gln(h),
                          nn.Conv1d(h, b, 1)) for k in range(blocks))
        self.mask = nn.Sequential(nn.PReLU(b), nn.Conv1d(b, sources * n, 1), nn.Sigmoid())
        self.decoder = nn.ConvTranspose1d(n, 1, 16, stride=8, bias=False)
        for m in self.modules():
            if isinstance(m, nn.PReLU):
                nn.init.uniform_(m.weight, 0.1, 0.3)

    def forward(self, x):
        w = torch.relu(self.encoder(x))
        y = self.bottleneck(w)
        for blk in self.blocks:
            y = y + blk(y)
        m = self.mask(y).reshape(x.shape[0] * self.sources, self.n, -1)
        return self.decoder(w.repeat(self.sources, 1, 1) * m)


class NafNetLayerNorm2d(nn.Module):
    """NAFNet (image restoration) in miniature: a U-Net of NAF blocks (a
    channels-first layer norm, 1x1 conv, 3x3 depthwise conv, SimpleGate,
    simplified channel attention, 1x1 conv, scaled residual; then a second
    norm and gated 1x1 convs). Its LayerNorm2d normalises over the channels
    of an NCHW tensor and is written out, as NAFNet, SAM's LayerNorm2d and
    ConvNeXt's channels-first LayerNorm write it; the blocks' norms cycle
    through the forms those write: epsilon 1e-6 or 1e-5, the square as
    pow(2) or a product, the weight as weight.view(1, -1, 1, 1) or
    weight[:, None, None]."""

    class Norm(nn.Module):
        def __init__(self, c, eps, square_by_pow, view):
            super().__init__()
            self.weight = nn.Parameter(torch.empty(c).uniform_(0.5, 1.5))
            self.bias = nn.Parameter(torch.empty(c).uniform_(-0.2, 0.2))
            self.eps, self.square_by_pow, self.view = eps, square_by_pow, view

        def forward(self, x):
            mu = x.mean(1, keepdim=True)
            d = x - mu
            var = (d.pow(2) if self.square_by_pow else d * d).mean(1, keepdim=True)
            y = d / (var + self.eps).sqrt()
            if self.view:
                return self.weight.view(1, -1, 1, 1) * y + self.bias.view(1, -1, 1, 1)
            return self.weight[:, None, None] * y + self.bias[:, None, None]

    FORMS = [(1e-6, True, True), (1e-6, False, False), (1e-5, True, False), (1e-5, False, True)]

    class Block(nn.Module):
        def __init__(self, c, forms):
            super().__init__()
            self.norm1 = NafNetLayerNorm2d.Norm(c, *next(forms))
            self.norm2 = NafNetLayerNorm2d.Norm(c, *next(forms))
            self.conv1, self.conv2 = nn.Conv2d(c, 2 * c, 1), nn.Conv2d(2 * c, 2 * c, 3, padding=1, groups=2 * c)
            self.sca = nn.Conv2d(c, c, 1)
            self.conv3, self.conv4, self.conv5 = nn.Conv2d(c, c, 1), nn.Conv2d(c, 2 * c, 1), nn.Conv2d(c, c, 1)
            self.beta = nn.Parameter(torch.rand(1, c, 1, 1))
            self.gamma = nn.Parameter(torch.rand(1, c, 1, 1))

        @staticmethod
        def gate(x):
            a, b = x.chunk(2, dim=1)
            return a * b

        def forward(self, inp):
            x = self.gate(self.conv2(self.conv1(self.norm1(inp))))
            x = x * self.sca(F.adaptive_avg_pool2d(x, 1))
            y = inp + self.conv3(x) * self.beta
            return y + self.conv5(self.gate(self.conv4(self.norm2(y)))) * self.gamma

    def __init__(self, width=8, levels=2, forms=None):
        super().__init__()
        forms = itertools.cycle(forms or self.FORMS)
        self.intro, self.ending = nn.Conv2d(3, width, 3, padding=1), nn.Conv2d(width, 3, 3, padding=1)
        self.encoders, self.downs = nn.ModuleList(), nn.ModuleList()
        self.ups, self.decoders = nn.ModuleList(), nn.ModuleList()
        c = width
        for _ in range(levels):
            self.encoders.append(self.Block(c, forms))
            self.downs.append(nn.Conv2d(c, 2 * c, 2, 2))
            c *= 2
        self.middle = self.Block(c, forms)
        for _ in range(levels):
            self.ups.append(nn.Sequential(nn.Conv2d(c, 2 * c, 1, bias=False), nn.PixelShuffle(2)))
            c //= 2
            self.decoders.append(self.Block(c, forms))
        randomise(self)

    def forward(self, inp):
        x, skips = self.intro(inp), []
        for encoder, down in zip(self.encoders, self.downs):
            x = encoder(x)
            skips.append(x)
            x = down(x)
        x = self.middle(x)
        for up, decoder, skip in zip(self.ups, self.decoders, skips[::-1]):
            x = decoder(up(x) + skip)
        return self.ending(x) + inp


class CspDarknetMish(nn.Module):
    """YOLOv4's CSPDarknet53 backbone in miniature: conv, batch norm and
    nn.Mish blocks (torch.onnx writes Mish below opset 18 as Softplus, Tanh
    and Mul), stride-2 downsampling, CSP stages (two 1x1 branches, residual
    blocks on one, concatenated and mixed by a 1x1) and a pooled
    classifier."""

    def __init__(self):
        super().__init__()

        def cbm(i, o, k=1, s=1):
            return nn.Sequential(nn.Conv2d(i, o, k, s, k // 2, bias=False), nn.BatchNorm2d(o), nn.Mish())

        class Res(nn.Module):
            def __init__(self, c):
                super().__init__()
                self.body = nn.Sequential(cbm(c, c), cbm(c, c, 3))

            def forward(self, x):
                return x + self.body(x)

        class Csp(nn.Module):
            def __init__(self, i, o, blocks):
                super().__init__()
                self.down = cbm(i, o, 3, 2)
                self.part1, self.part2 = cbm(o, o // 2), cbm(o, o // 2)
                self.blocks = nn.Sequential(*[Res(o // 2) for _ in range(blocks)], cbm(o // 2, o // 2))
                self.mix = cbm(o, o)

            def forward(self, x):
                x = self.down(x)
                return self.mix(torch.cat([self.blocks(self.part2(x)), self.part1(x)], 1))

        self.stem = cbm(3, 16, 3)
        self.stages = nn.Sequential(Csp(16, 32, 1), Csp(32, 64, 2), Csp(64, 128, 2))
        self.fc = nn.Linear(128, 10)
        randomise(self)

    def forward(self, x):
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(self.stages(self.stem(x)), 1), 1))


class ControlFlow(torch.nn.Module):
    """Data-dependent control flow (torch.jit.script): an If on the input's
    sign and a Loop over a computed trip count, between modelled convs."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x):
        y = torch.relu(self.c1(x))
        if bool(y.mean() > 0.1):
            y = y * 2.0
        else:
            y = y - 1.0
        for _ in range(int(x.size(0))):
            y = y + 0.5
        return self.c2(y)


def randomise(model):
    """Batch-norm statistics and a classifier that do not flatten the output
    (torchvision's initialisation plus untrained statistics give outputs
    that are nearly constant, which would make every comparison vacuous)."""
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            nn.init.uniform_(m.weight, 0.5, 1.5)
            nn.init.uniform_(m.bias, -0.2, 0.2)
            m.running_mean.uniform_(-0.1, 0.1)
            m.running_var.uniform_(0.5, 1.5)
        elif isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=1.0 / m.in_features ** 0.5)
            if m.bias is not None:
                nn.init.normal_(m.bias, std=0.1)
    return model


def swin_tiny():
    """A shifted-window vision transformer (Swin's structure at a small size):
    window partition and reverse through reshapes and transposes whose
    padding is computed from the feature size (Mod, Sub, ...), shifted
    windows (Roll as Slice + Concat) with an attention mask built by slice
    assignment (ScatterND), relative position bias (Gather)."""
    from torchvision.models.swin_transformer import SwinTransformer
    return randomise(SwinTransformer(patch_size=[4, 4], embed_dim=24, depths=[2, 2], num_heads=[2, 4],
                                     window_size=[7, 7], num_classes=10))


def mobilenet_v3_small():
    return randomise(torchvision.models.mobilenet_v3_small(weights=None))


class HardSwishByFormula(nn.Module):
    """x * clip(x + 3, 0, 6) / 6: hard-swish as paddle2onnx and tf2onnx write
    it (torch writes HardSwish, or x * HardSigmoid(x) below opset 14)."""

    def forward(self, x):
        return x * torch.clamp(x + 3.0, 0.0, 6.0) / 6.0


class HardSigmoidByFormula(nn.Module):
    """clip(x / 6 + 0.5, 0, 1): the squeeze-excitation gate by formula."""

    def forward(self, x):
        return torch.clamp(x / 6.0 + 0.5, 0.0, 1.0)


def mobilenet_v3_formula():
    """MobileNetV3-small with its activations written by formula, as a
    detector or classifier converted from another framework has them."""
    model = torchvision.models.mobilenet_v3_small(weights=None)
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, nn.Hardswish):
                setattr(parent, name, HardSwishByFormula())
            elif isinstance(child, nn.Hardsigmoid):
                setattr(parent, name, HardSigmoidByFormula())
    return randomise(model)


class LayerNormNoAffine(nn.Module):
    """A layer normalisation without scale and shift, written out (mean,
    centred input, mean square, epsilon, square root)."""

    def forward(self, x):
        mu = x.mean(dim=-1, keepdim=True)
        d = x - mu
        return d / torch.sqrt((d ** 2).mean(dim=-1, keepdim=True) + 1e-5)


class HardSwishScaleFirst(nn.Module):
    """Hard-swish with the 1/6 on the other factor, `(x / 6) * clip(x + 3,
    0, 6)`, after two convolutions: no written rule matches it as written;
    a generated rule that moves the division (cost-neutral alone) must come
    first (issue #22's multi-step case: greedy never takes it, taso does)."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 16, 3, padding=1)
        self.c2 = nn.Conv2d(16, 16, 3, padding=1)

    def forward(self, x):
        y = self.c1(x)
        y = (y / 6.0) * torch.clamp(y + 3.0, 0.0, 6.0)
        y = self.c2(y)
        return (y / 6.0) * torch.clamp(y + 3.0, 0.0, 6.0)


class FormulaVariants(nn.Module):
    """The other ways converters write the same activations and
    normalisations (one each, between convolutions and a projection):
    hard-swish with the gate divided first and with a multiplication by
    1/6, the hard-sigmoid gate as relu6(x + 3) / 6, layer norms with the
    square as a product and with epsilons 1e-6 and 1e-12 (TensorFlow
    ports), on rank-2 and rank-3 activations."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 8, 3, padding=1)
        self.fc = nn.Linear(8, 16)

    @staticmethod
    def norm(x, eps, product):
        d = x - x.mean(dim=-1, keepdim=True)
        sq = d * d if product else d ** 2
        return d / torch.sqrt(sq.mean(dim=-1, keepdim=True) + eps)

    def forward(self, x):
        y = self.c1(x)
        y = y * (torch.clamp(y + 3.0, 0.0, 6.0) / 6.0)
        y = self.c2(y)
        y = y * torch.clamp(y + 3.0, 0.0, 6.0) * 0.16666667
        g = torch.clamp(y.mean(dim=(2, 3), keepdim=True) + 3.0, 0.0, 6.0) / 6.0
        t = (y * g).mean(dim=(2, 3))  # [n, 8]
        t = self.norm(t, 1e-5, True)
        s = self.fc(t).reshape(t.shape[0], 4, 4)  # [n, 4, 4]
        # Three different tensors: the exporter merges equal subexpressions.
        return self.norm(s, 1e-5, True) + self.norm(s * 2.0, 1e-6, False) + self.norm(s + 1.0, 1e-12, False)


class FormulaEncoder(nn.Module):
    """A small pre-norm transformer encoder (4 layers, width 128, 4 heads,
    sequence 64) whose normalisations are layer norms without scale and shift
    written out, as converted models from other frameworks have them."""

    def __init__(self, width=128, heads=4, layers=4):
        super().__init__()
        self.heads = heads
        self.embed = nn.Linear(32, width)
        self.qkv = nn.ModuleList([nn.Linear(width, 3 * width) for _ in range(layers)])
        self.proj = nn.ModuleList([nn.Linear(width, width) for _ in range(layers)])
        self.fc1 = nn.ModuleList([nn.Linear(width, 4 * width) for _ in range(layers)])
        self.fc2 = nn.ModuleList([nn.Linear(4 * width, width) for _ in range(layers)])
        self.norm = LayerNormNoAffine()

    def forward(self, x):
        h = self.embed(x)
        n, s, w = h.shape
        for qkv, proj, fc1, fc2 in zip(self.qkv, self.proj, self.fc1, self.fc2):
            q, k, v = qkv(self.norm(h)).reshape(n, s, 3, self.heads, w // self.heads).permute(2, 0, 3, 1, 4)
            a = torch.softmax(q @ k.transpose(-1, -2) / (w // self.heads) ** 0.5, dim=-1)
            h = h + proj((a @ v).transpose(1, 2).reshape(n, s, w))
            h = h + fc2(F.gelu(fc1(self.norm(h))))
        return self.norm(h)


class PostNormEncoder(nn.Module):
    """A small post-norm transformer encoder (the original Transformer's and
    BERT's order: each residual sum normalised, 4 layers, width 128, 4 heads,
    sequence 64). At opset 17 torch exports LayerNormalization nodes: each
    residual Add feeds a LayerNormalization and nothing else (epsilons 1e-5,
    1e-6 and 1e-12, as different exporters write them); below 17 it writes
    each out, its scale and shift after it."""

    def __init__(self, width=128, heads=4, layers=4):
        super().__init__()
        self.heads = heads
        self.embed = nn.Linear(32, width)
        self.qkv = nn.ModuleList([nn.Linear(width, 3 * width) for _ in range(layers)])
        self.proj = nn.ModuleList([nn.Linear(width, width) for _ in range(layers)])
        self.fc1 = nn.ModuleList([nn.Linear(width, 4 * width) for _ in range(layers)])
        self.fc2 = nn.ModuleList([nn.Linear(4 * width, width) for _ in range(layers)])
        # The epsilons of common exports: torch's default, T5's, BERT's.
        eps = [1e-5, 1e-6, 1e-12, 1e-5]
        self.norm1 = nn.ModuleList([nn.LayerNorm(width, eps=eps[i % 4]) for i in range(layers)])
        self.norm2 = nn.ModuleList([nn.LayerNorm(width, eps=eps[(i + 1) % 4]) for i in range(layers)])

    def forward(self, x):
        h = self.embed(x)
        n, s, w = h.shape
        for qkv, proj, fc1, fc2, norm1, norm2 in zip(self.qkv, self.proj, self.fc1, self.fc2, self.norm1, self.norm2):
            q, k, v = qkv(h).reshape(n, s, 3, self.heads, w // self.heads).permute(2, 0, 3, 1, 4)
            a = torch.softmax(q @ k.transpose(-1, -2) / (w // self.heads) ** 0.5, dim=-1)
            h = norm1(h + proj((a @ v).transpose(1, 2).reshape(n, s, w)))
            h = norm2(h + fc2(F.gelu(fc1(h))))
        return h


class DecoderBlock(nn.Module):
    """A pre-norm GPT block with a key/value cache: the new keys and values
    concatenated after the cached ones, a causal mask over both (tril with
    the cache's length as its diagonal), GELU's tanh form by formula."""

    def __init__(self, width, heads):
        super().__init__()
        self.width, self.heads = width, heads
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.fc1, self.fc2 = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x, past_k, past_v):
        n, t, w = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(w, dim=2)
        q, k, v = (z.view(n, t, self.heads, w // self.heads).transpose(1, 2) for z in (q, k, v))
        k, v = torch.cat([past_k, k], dim=2), torch.cat([past_v, v], dim=2)
        s = k.shape[2]
        a = (q @ k.transpose(-1, -2)) / (w // self.heads) ** 0.5
        mask = torch.ones(t, s, dtype=torch.bool).tril(s - t)
        a = a.masked_fill(~mask, float("-inf")).softmax(-1)
        x = x + self.proj((a @ v).transpose(1, 2).reshape(n, t, w))
        h = self.fc1(self.ln2(x))
        h = 0.5 * h * (1.0 + torch.tanh(0.7978845608 * (h + 0.044715 * h * h * h)))
        return x + self.fc2(h), k, v


class Decoder(nn.Module):
    """A small GPT-style decoder (2 blocks, width 64, 4 heads, vocabulary 100)
    exported as language-model runtimes run it: token ids and a key/value
    cache per block in, logits and the grown cache out; the batch, the new
    tokens and the cache's length are symbolic (the cache's length 0 at the
    first step, the prompt)."""

    def __init__(self, width=64, heads=4, blocks=2, vocab=100):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, width), nn.Embedding(128, width)
        self.heads, self.head_dim = heads, width // heads
        self.blocks = nn.ModuleList([DecoderBlock(width, heads) for _ in range(blocks)])
        self.ln = nn.LayerNorm(width)

    def forward(self, ids, *cache):
        # cache: the keys and values of each block in turn (pk0, pv0, pk1, ...)
        past, t = cache[0].shape[2], ids.shape[1]
        x = self.wte(ids) + self.wpe(torch.arange(past, past + t).unsqueeze(0))
        grown = []
        for i, block in enumerate(self.blocks):
            x, k, v = block(x, cache[2 * i], cache[2 * i + 1])
            grown += [k, v]
        return (self.ln(x) @ self.wte.weight.t(),) + tuple(grown)


def export_decoder(path, opset, seed):
    torch.manual_seed(seed)
    model = Decoder().eval()
    cache = ["pk0", "pv0", "pk1", "pv1"]
    example = (torch.randint(0, 100, (1, 3)),) + tuple(torch.randn(1, 4, 5, 16) for _ in cache)
    dynamic = {"ids": {0: "batch", 1: "tokens"}, "logits": {0: "batch", 1: "tokens"}}
    dynamic.update({name: {0: "batch", 2: "past"} for name in cache})
    dynamic.update({name: {0: "batch", 2: "total"} for name in ["k0", "v0", "k1", "v1"]})
    with torch.no_grad():
        torch.onnx.export(model, example, path, opset_version=opset, input_names=["ids"] + cache,
                          output_names=["logits", "k0", "v0", "k1", "v1"], dynamic_axes=dynamic,
                          do_constant_folding=False)


class PromptDecoder(nn.Module):
    """The decoder's first step without a cache, as Hugging Face Optimum
    exports it ("decoder_model.onnx"): token ids in, logits and the cache
    out."""

    def __init__(self, decoder):
        super().__init__()
        self.decoder = decoder

    def forward(self, ids):
        empty = ids.new_zeros((ids.shape[0], self.decoder.heads, 0, self.decoder.head_dim), dtype=torch.float32)
        return self.decoder(ids, *([empty] * (2 * len(self.decoder.blocks))))


def export_merged_decoder(path, opset, seed, **size):
    """The decoder as Hugging Face Optimum writes it for generation
    ("decoder_model_merged.onnx"): the prompt step and the cached step in one
    model, an If on a `use_cache_branch` input choosing between the two
    exports as its branches, the weights they share stored once in the
    outer graph (the branches read them by name). Everything the model
    computes is inside the branches."""
    import tempfile

    import onnx
    from onnx import helper, TensorProto
    torch.manual_seed(seed)
    model = Decoder(**size).eval()
    blocks = range(len(model.blocks))
    cache = [p + str(i) for i in blocks for p in ("pk", "pv")]
    grown = [p + str(i) for i in blocks for p in ("k", "v")]
    with tempfile.TemporaryDirectory() as tmp:
        with torch.no_grad():
            dynamic = {"ids": {0: "batch", 1: "tokens"}, "logits": {0: "batch", 1: "tokens"}}
            dynamic.update({name: {0: "batch", 2: "past"} for name in cache})
            dynamic.update({name: {0: "batch", 2: "total"} for name in grown})
            example = (torch.randint(0, model.wte.num_embeddings, (1, 3)),) + tuple(
                torch.randn(1, model.heads, 5, model.head_dim) for _ in cache)
            torch.onnx.export(model, example, tmp + "/past.onnx", opset_version=opset, input_names=["ids"] + cache,
                              output_names=["logits"] + grown, dynamic_axes=dynamic,
                              do_constant_folding=False)
            torch.onnx.export(PromptDecoder(model), (example[0],), tmp + "/prompt.onnx", opset_version=opset,
                              input_names=["ids"], output_names=["logits"] + grown,
                              dynamic_axes={k: v for k, v in dynamic.items() if k not in cache},
                              do_constant_folding=False)
        past, prompt = onnx.load(tmp + "/past.onnx"), onnx.load(tmp + "/prompt.onnx")
    outer_inits, shared = {}, {}

    def branch(m, prefix, name):
        # Values the branch defines get the branch's prefix (a subgraph may
        # not redefine a name of the enclosing graph); the weights move to
        # the outer graph, one copy of each (by contents).
        g = m.graph
        keep = {i.name for i in g.input}
        renamed = {}
        for init in g.initializer:
            key = (init.data_type, tuple(init.dims), init.raw_data)
            if key not in shared:
                shared[key] = init.name if init.name not in outer_inits else prefix + init.name
                copy = onnx.TensorProto()
                copy.CopyFrom(init)
                copy.name = shared[key]
                outer_inits[copy.name] = copy
            renamed[init.name] = shared[key]
        for node in g.node:
            for i, v in enumerate(node.output):
                if v and v not in keep:
                    renamed[v] = prefix + v
            node.name = prefix + node.name
        for node in g.node:
            node.input[:] = [renamed.get(v, v) for v in node.input]
            node.output[:] = [renamed.get(v, v) for v in node.output]
        outputs = []
        for o in g.output:
            t = onnx.ValueInfoProto()
            t.CopyFrom(o)
            t.name = renamed.get(o.name, o.name)
            outputs.append(t)
        return helper.make_graph(list(g.node), name, [], outputs)

    then_g = branch(past, "past/", "with_past")
    else_g = branch(prompt, "prompt/", "no_past")
    cond = helper.make_tensor_value_info("use_cache_branch", TensorProto.BOOL, [1])
    node = helper.make_node("If", ["use_cache_branch"], [o.name for o in past.graph.output],
                            then_branch=then_g, else_branch=else_g, name="optimum::if")
    graph = helper.make_graph([node], "merged_decoder", list(past.graph.input) + [cond], list(past.graph.output),
                              initializer=list(outer_inits.values()))
    merged = helper.make_model(graph, opset_imports=list(past.opset_import), producer_name="rlflow-zoo")
    merged.ir_version = past.ir_version
    onnx.checker.check_model(merged, full_check=True)
    onnx.save(merged, path)


class LogitsOnly(nn.Module):
    """The decoder's prompt step, its logits only."""

    def __init__(self, decoder):
        super().__init__()
        self.prompt = PromptDecoder(decoder)

    def forward(self, ids):
        return self.prompt(ids)[0]


def export_greedy_decode_loop(path, opset, seed, list_scores=False):
    """Greedy generation inside the model, as scripted generation loops are
    exported (e.g. the BART beam-search export of transformers' research
    projects): a Loop of 8 steps whose body runs the whole decoder on the
    tokens so far (no cache), takes the most likely next token and appends
    it; the outputs are the tokens and each step's scores (the logits at the
    last position). The tokens grow by one each step, so nothing in the body may be
    folded at one length. Everything the model computes is in the body; the
    weights are in the outer graph, read by name. With `list_scores`, each
    step's scores are also appended to a list the Loop carries (as
    torch.onnx writes `scores.append(logits)` in a scripted loop: an untyped
    sequence, a SequenceInsert in the body) and concatenated after it as a
    third output."""
    import tempfile

    import onnx
    from onnx import helper, TensorProto
    torch.manual_seed(seed)
    model = Decoder().eval()
    with tempfile.TemporaryDirectory() as tmp:
        with torch.no_grad():
            torch.onnx.export(LogitsOnly(model), (torch.randint(0, 100, (1, 3)),), tmp + "/step.onnx",
                              opset_version=opset, input_names=["ids"], output_names=["logits"],
                              dynamic_axes={"ids": {1: "tokens"}, "logits": {1: "tokens"}},
                              do_constant_folding=False)
        step = onnx.load(tmp + "/step.onnx")
    g = step.graph
    renamed = {"ids": "step/ids"}
    for node in g.node:
        node.input[:] = [renamed.get(v, v) for v in node.input]
    body_nodes = list(g.node) + [
        helper.make_node("Constant", [], ["step/last"], value=helper.make_tensor("", TensorProto.INT64, [], [-1])),
        helper.make_node("Gather", ["logits", "step/last"], ["step/last_logits"], axis=1),
        helper.make_node("ArgMax", ["step/last_logits"], ["step/next"], axis=-1, keepdims=1),
        helper.make_node("Concat", ["step/ids", "step/next"], ["step/ids_out"], axis=1),
        helper.make_node("Identity", ["step/cond"], ["step/cond_out"]),
    ]
    body_inputs = [helper.make_tensor_value_info("step/i", TensorProto.INT64, []),
                   helper.make_tensor_value_info("step/cond", TensorProto.BOOL, []),
                   helper.make_tensor_value_info("step/ids", TensorProto.INT64, [1, "length"])]
    body_outputs = [helper.make_tensor_value_info("step/cond_out", TensorProto.BOOL, []),
                    helper.make_tensor_value_info("step/ids_out", TensorProto.INT64, [1, "length_plus_1"])]
    if list_scores:
        body_nodes.append(helper.make_node("SequenceInsert", ["step/list", "step/last_logits"], ["step/list_out"]))
        body_inputs.append(onnx.ValueInfoProto(name="step/list"))
        body_outputs.append(onnx.ValueInfoProto(name="step/list_out"))
    body_outputs.append(helper.make_tensor_value_info("step/last_logits", TensorProto.FLOAT, [1, 100]))
    body = helper.make_graph(body_nodes, "decode_step", body_inputs, body_outputs)
    inits = list(g.initializer) + [helper.make_tensor("max_new_tokens", TensorProto.INT64, [], [8]),
                                   helper.make_tensor("keep_going", TensorProto.BOOL, [], [True])]
    loop_in, loop_out = ["max_new_tokens", "keep_going", "ids"], ["tokens", "scores"]
    outputs = [helper.make_tensor_value_info("tokens", TensorProto.INT64, [1, "total"]),
               helper.make_tensor_value_info("scores", TensorProto.FLOAT, [8, 1, 100])]
    nodes = []
    if list_scores:
        nodes.append(helper.make_node("SequenceEmpty", [], ["no_scores"], dtype=TensorProto.FLOAT))
        loop_in.append("no_scores")
        loop_out.insert(1, "score_list")
        outputs.append(helper.make_tensor_value_info("listed_scores", TensorProto.FLOAT, [8, 100]))
    nodes.append(helper.make_node("Loop", loop_in, loop_out, body=body, name="generate"))
    if list_scores:
        nodes.append(helper.make_node("ConcatFromSequence", ["score_list"], ["listed_scores"], axis=0))
    graph = helper.make_graph(nodes, "greedy_decode", [helper.make_tensor_value_info("ids", TensorProto.INT64,
                                                                                    [1, "prompt"])],
                              outputs, initializer=inits)
    out = helper.make_model(graph, opset_imports=list(step.opset_import), producer_name="rlflow-zoo")
    out.ir_version = step.ir_version
    onnx.checker.check_model(out, full_check=True)
    onnx.save(out, path)


def export_greedy_decode_list_loop(path, opset, seed):
    export_greedy_decode_loop(path, opset, seed, list_scores=True)


def export_merged_decoder_big(path, opset, seed):
    """The merged decoder at a larger size (width 256, 8 heads, 4 blocks,
    vocabulary 1000; 14 MB): for measurements, not in the test corpus."""
    export_merged_decoder(path, opset, seed, width=256, heads=8, blocks=4, vocab=1000)


def export_merged_decoder_gpt2_size(path, opset, seed):
    """The merged decoder at GPT-2 small's size (width 768, 12 heads, 12
    blocks, vocabulary 50257; 495 MB): for measurements."""
    export_merged_decoder(path, opset, seed, width=768, heads=12, blocks=12, vocab=50257)


def export_merged_decoder_2gb(path, opset, seed):
    """The small merged decoder with 2.16 GB of weights in an external data
    file, as merged decoders over 2 GB come: a lookup table of 540 million
    rows that both branches gather from by token id, added to the logits
    (cheap to run, too large for one protobuf). For measurements."""
    import onnx
    from onnx import helper, TensorProto
    import numpy as np
    export_merged_decoder(path, opset, seed)
    m = onnx.load(path)
    rows = 540 * 1000 * 1000
    location = os.path.basename(path) + ".weights"
    onnx.save_model(m, path, save_as_external_data=True, all_tensors_to_one_file=True, location=location,
                    size_threshold=1024)
    m = onnx.load(path, load_external_data=False)
    data = os.path.join(os.path.dirname(path), location)
    with open(data, "ab") as f:
        offset = (f.tell() + 4095) // 4096 * 4096
        f.write(b"\0" * (offset - f.tell()))
        first = np.random.RandomState(seed).randn(100).astype(np.float32)
        f.write(first.tobytes())
        chunk = np.zeros(1 << 24, np.float32).tobytes()
        left = rows - 100
        while left > 0:
            n = min(left, 1 << 24)
            f.write(chunk[:4 * n])
            left -= n
    table = TensorProto(name="lookup", data_type=TensorProto.FLOAT, dims=[rows, 1])
    table.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", str(offset)), ("length", str(4 * rows))):
        table.external_data.add(key=k, value=v)
    m.graph.initializer.append(table)
    for a in m.graph.node[0].attribute:
        g, prefix = a.g, ("past/" if a.name == "then_branch" else "prompt/")
        logits = g.output[0].name
        for node in g.node:
            node.output[:] = [prefix + "logits_before" if o == logits else o for o in node.output]
        g.node.extend([helper.make_node("Gather", ["lookup", "ids"], [prefix + "looked_up"], axis=0),
                       helper.make_node("Add", [prefix + "logits_before", prefix + "looked_up"], [logits])])
    onnx.save_model(m, path)
    onnx.checker.check_model(path)


class HfSelfAttention(nn.Module):
    """Hugging Face's BERT self-attention: three projections, heads by view
    and permute, scores divided by sqrt(head size), the extended mask added."""

    def __init__(self, width, heads):
        super().__init__()
        self.heads, self.size = heads, width // heads
        self.query, self.key, self.value = nn.Linear(width, width), nn.Linear(width, width), nn.Linear(width, width)

    def split(self, x):
        return x.view(x.size()[:-1] + (self.heads, self.size)).permute(0, 2, 1, 3)

    def forward(self, x, mask):
        q, k, v = self.split(self.query(x)), self.split(self.key(x)), self.split(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / self.size ** 0.5 + mask
        context = torch.matmul(F.softmax(scores, dim=-1), v).permute(0, 2, 1, 3).contiguous()
        return context.view(context.size()[:-2] + (self.heads * self.size,))


class HfBertLayer(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.attention, self.attention_out = HfSelfAttention(width, heads), nn.Linear(width, width)
        self.ln1, self.ln2 = nn.LayerNorm(width, eps=1e-12), nn.LayerNorm(width, eps=1e-12)
        self.intermediate, self.output = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x, mask):
        x = self.ln1(self.attention_out(self.attention(x, mask)) + x)
        return self.ln2(self.output(F.gelu(self.intermediate(x))) + x)


class HfBertClassifier(nn.Module):
    """A BERT sequence classifier as Hugging Face writes it and its exports
    (optimum, transformers.onnx) run it: input_ids, attention_mask and
    token_type_ids (int64, batch and sequence symbolic), the position ids a
    slice of a buffer, and the attention mask extended as
    (1 - mask) * finfo(float32).min, a bias that overflows to infinity for
    any mask value other than 0 and 1 (2 layers, width 128, 4 heads)."""

    def __init__(self, vocab=1000, width=128, heads=4, layers=2, labels=3, slice_pooler=False):
        super().__init__()
        self.slice_pooler = slice_pooler
        self.words, self.positions, self.types = nn.Embedding(vocab, width), nn.Embedding(128, width), nn.Embedding(
            2, width)
        self.ln = nn.LayerNorm(width, eps=1e-12)
        self.register_buffer("position_ids", torch.arange(512).expand((1, -1)))
        self.layers = nn.ModuleList([HfBertLayer(width, heads) for _ in range(layers)])
        self.pooler, self.classifier = nn.Linear(width, width), nn.Linear(width, labels)

    def forward(self, input_ids, attention_mask, token_type_ids):
        positions = self.position_ids[:, :input_ids.size(1)]
        x = self.ln(self.words(input_ids) + self.types(token_type_ids) + self.positions(positions))
        mask = attention_mask[:, None, None, :].to(x.dtype)
        mask = (1.0 - mask) * torch.finfo(x.dtype).min
        for layer in self.layers:
            x = layer(x, mask)
        first = x[:, 0:1].squeeze(1) if self.slice_pooler else x[:, 0]
        return self.classifier(torch.tanh(self.pooler(first)))


def export_hf_bert(path, opset, seed, slice_pooler=False):
    torch.manual_seed(seed)
    model = HfBertClassifier(slice_pooler=slice_pooler).eval()
    names = ["input_ids", "attention_mask", "token_type_ids"]
    example = (torch.randint(0, 1000, (1, 16)), torch.ones(1, 16, dtype=torch.long), torch.zeros(1, 16,
                                                                                                dtype=torch.long))
    dynamic = {name: {0: "batch", 1: "sequence"} for name in names}
    dynamic["logits"] = {0: "batch"}
    with torch.no_grad():
        torch.onnx.export(model, example, path, opset_version=opset, input_names=names, output_names=["logits"],
                          dynamic_axes=dynamic, do_constant_folding=True)


def export_bert_slice_pooler(path, opset, seed):
    """The BERT classifier with its pooler's first token read as Google's
    BERT (`tf.squeeze(x[:, 0:1, :], axis=1)`) and Paddle's ERNIE write it,
    and their converters (tf2onnx, paddle2onnx) export it: a Slice of one
    row, then a Squeeze (torch.onnx writes `x[:, 0]` as a Gather, and the
    Squeeze of a slice along a symbolic axis as an If on its size, which the
    converters do not: that If is made the Squeeze they write)."""
    import onnx
    from onnx import helper, numpy_helper
    import numpy as np
    export_hf_bert(path, opset, seed, slice_pooler=True)
    model = onnx.load(path)
    graph = model.graph
    producers = {o: n for n in graph.node for o in n.output}
    (branch,) = [n for n in graph.node if n.op_type == "If"]
    (then,) = [a.g for a in branch.attribute if a.name == "then_branch"]
    (squeeze,) = [n for n in then.node if n.op_type == "Squeeze"]
    dead = [branch]
    equal = producers[branch.input[0]]
    dead.append(equal)
    for name in equal.input:  # the size of the axis (Shape, Gather) and the constant 1
        dead.append(producers[name])
        if producers[name].op_type == "Gather":
            dead.extend(producers[i] for i in producers[name].input if i in producers)
    axes = numpy_helper.from_array(np.array([1], np.int64), "pooler_squeeze_axes")
    graph.initializer.append(axes)
    new = helper.make_node("Squeeze", [squeeze.input[0], axes.name], list(branch.output), name="/Squeeze")
    keep = [n for n in graph.node if all(n is not d for d in dead)]
    keep.insert(keep.index(producers[squeeze.input[0]]) + 1, new)  # right after the Slice
    del graph.node[:]
    graph.node.extend(keep)
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, path)


class RmsNorm(nn.Module):
    """LLaMA's RMSNorm as Hugging Face writes it (Pow, ReduceMean, Add,
    Sqrt, Div by 1: torch.rsqrt, Mul by the weight)."""

    def __init__(self, width, eps=1e-6):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(width)), eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class RotaryBlock(nn.Module):
    """A LLaMA decoder layer: rotary query and key, SiLU-gated MLP."""

    def __init__(self, width, heads, hidden):
        super().__init__()
        self.heads, self.size = heads, width // heads
        self.norm1, self.norm2 = RmsNorm(width), RmsNorm(width)
        self.q, self.k, self.v, self.o = (nn.Linear(width, width, bias=False) for _ in range(4))
        self.gate, self.up = nn.Linear(width, hidden, bias=False), nn.Linear(width, hidden, bias=False)
        self.down = nn.Linear(hidden, width, bias=False)

    def forward(self, x, cos, sin, mask):
        n, s, _ = x.shape
        y = self.norm1(x)
        q, k, v = (p(y).view(n, s, self.heads, self.size).transpose(1, 2) for p in (self.q, self.k, self.v))
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        a = torch.softmax(q @ k.transpose(-1, -2) / self.size ** 0.5 + mask, -1) @ v
        x = x + self.o(a.transpose(1, 2).reshape(n, s, -1))
        y = self.norm2(x)
        return x + self.down(F.silu(self.gate(y)) * self.up(y))


class RotaryDecoder(nn.Module):
    """A LLaMA-style decoder as Hugging Face's exports compute it: position
    ids from the attention mask's running sum (CumSum), the rotary cos and
    sin computed in the graph from them (Cos, Sin), RMSNorm written out,
    SiLU-gated MLPs, a causal mask from Trilu (2 layers, width 128, 4
    heads)."""

    def __init__(self, vocab=1000, width=128, heads=4, hidden=344, layers=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.layers = nn.ModuleList(RotaryBlock(width, heads, hidden) for _ in range(layers))
        self.norm, self.head = RmsNorm(width), nn.Linear(width, vocab, bias=False)
        size = width // heads
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, size, 2).float() / size)))

    def forward(self, input_ids, attention_mask):
        s = input_ids.shape[1]
        positions = (attention_mask.long().cumsum(-1) - 1).masked_fill(attention_mask == 0, 1)
        freqs = positions[:, :, None].float() * self.inv_freq[None, None, :]
        angles = torch.cat((freqs, freqs), dim=-1)[:, None]
        cos, sin = angles.cos(), angles.sin()
        mask = torch.triu(torch.full((s, s), -1e4), diagonal=1)[None, None]
        mask = mask + (1.0 - attention_mask[:, None, None, :].float()) * -1e4
        x = self.embed(input_ids)
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        return self.head(self.norm(x))


def export_rotary_decoder(path, opset, seed):
    torch.manual_seed(seed)
    model = RotaryDecoder().eval()
    names = ["input_ids", "attention_mask"]
    example = (torch.randint(0, 1000, (1, 16)), torch.ones(1, 16, dtype=torch.long))
    dynamic = {name: {0: "batch", 1: "sequence"} for name in names}
    dynamic["logits"] = {0: "batch", 1: "sequence"}
    with torch.no_grad():
        torch.onnx.export(model, example, path, opset_version=opset, input_names=names, output_names=["logits"],
                          dynamic_axes=dynamic, do_constant_folding=True)


class NmsDetector(nn.Module):
    """A single-stage detector with its post-processing in the graph, as YOLO
    and SSD exports write it: a strided conv backbone, per-location box
    offsets and class logits, boxes decoded against the grid of locations
    (Range over the feature map's computed size), the scores above 0.05
    (boolean indexing: NonZero, Gather), torchvision's batched NMS
    (NonMaxSuppression on class-offset boxes), the best 100 kept boxes,
    scores and classes. Image [1, 3, H, W]; three outputs of a length the
    values decide."""

    def __init__(self, classes=3):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.ReLU(), nn.Conv2d(16, 32, 3, 2, 1), nn.ReLU(),
                                      nn.Conv2d(32, 32, 3, 2, 1), nn.ReLU())
        self.head = nn.Conv2d(32, 4 + classes, 1)

    def forward(self, x):
        import torchvision
        f = self.head(self.backbone(x))
        h, w = f.shape[2], f.shape[3]
        f = f.flatten(2).transpose(1, 2)[0]  # [h * w, 4 + classes]
        ys = torch.arange(h).unsqueeze(1).expand(h, w).reshape(-1)
        xs = torch.arange(w).unsqueeze(0).expand(h, w).reshape(-1)
        centers = torch.stack([xs, ys], 1).float() * 8 + 4
        xy = centers + f[:, 0:2] * 8
        wh = 16 * torch.exp(f[:, 2:4].clamp(max=4))
        boxes = torch.cat([xy - wh / 2, xy + wh / 2], 1)
        logits = f[:, 4:] - f[:, 4:].mean(0, keepdim=True)  # random weights: no class dominates
        scores, labels = torch.sigmoid(logits).max(1)
        confident = scores > 0.05
        boxes, scores, labels = boxes[confident], scores[confident], labels[confident]
        keep = torchvision.ops.batched_nms(boxes, scores, labels, 0.5)[:100]
        return boxes[keep], scores[keep], labels[keep]


def export_nms_detector(path, opset, seed):
    torch.manual_seed(seed)
    model = NmsDetector().eval()
    outputs = ["boxes", "scores", "labels"]
    dynamic = {"x": {2: "H", 3: "W"}}
    dynamic.update({name: {0: "detections"} for name in outputs})
    with torch.no_grad():
        torch.onnx.export(model, (torch.randn(1, 3, 64, 64),), path, opset_version=opset, input_names=["x"],
                          output_names=outputs, dynamic_axes=dynamic, do_constant_folding=True)


class ChannelGate(nn.Module):
    """CBAM's channel attention: one MLP (1x1 convolutions) on the average-
    and the max-pooled channels (GlobalMaxPool), added, through a sigmoid."""

    def __init__(self, channels, reduction=4):
        super().__init__()
        self.mlp = nn.Sequential(nn.Conv2d(channels, channels // reduction, 1), nn.ReLU(),
                                 nn.Conv2d(channels // reduction, channels, 1))

    def forward(self, x):
        return x * torch.sigmoid(self.mlp(F.adaptive_avg_pool2d(x, 1)) + self.mlp(F.adaptive_max_pool2d(x, 1)))


class SpatialGate(nn.Module):
    """CBAM's spatial attention: the channels' mean and max (ReduceMax), a
    7x7 convolution, a sigmoid."""

    def __init__(self):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(2, 1, 7, padding=3, bias=False), nn.BatchNorm2d(1)

    def forward(self, x):
        pooled = torch.cat([x.mean(1, keepdim=True), x.max(1, keepdim=True)[0]], 1)
        return x * torch.sigmoid(self.bn(self.conv(pooled)))


class CbamBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout)
        self.conv2, self.bn2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)
        self.channel, self.spatial = ChannelGate(cout), SpatialGate()
        self.down = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                     if stride != 1 or cin != cout else nn.Identity())

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.spatial(self.channel(self.bn2(self.conv2(y)))) + self.down(x))


class CbamResNet(nn.Module):
    """A ResNet with CBAM attention (Woo et al., 2018) in each block and a
    log-softmax head (LogSoftmax), as models trained with an NLL loss are
    exported."""

    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, 2, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU())
        self.blocks = nn.Sequential(CbamBlock(32, 32, 1), CbamBlock(32, 64, 2), CbamBlock(64, 128, 2))
        self.fc = nn.Linear(128, classes)

    def forward(self, x):
        y = F.adaptive_avg_pool2d(self.blocks(self.stem(x)), 1)
        return F.log_softmax(self.fc(torch.flatten(y, 1)), dim=1)


class YoloDetect(nn.Module):
    """A YOLOv5-style detector in miniature, as `export.py --dynamic` writes
    it: conv + batch norm + SiLU blocks with CSP-style residuals, a top-down
    neck (nearest upsampling, Concat) and the Detect head, whose grid is
    computed from each feature map's shape (arange, meshgrid, view, permute,
    sigmoid, the xy/wh decode) and whose predictions of three scales are
    concatenated. Fits any height and width that are multiples of 32."""

    class Cbs(nn.Sequential):
        def __init__(self, ci, co, k=3, s=1):
            super().__init__(nn.Conv2d(ci, co, k, s, k // 2, bias=False), nn.BatchNorm2d(co), nn.SiLU())

    class C3(nn.Module):
        def __init__(self, c):
            super().__init__()
            cbs = YoloDetect.Cbs
            self.a, self.b = cbs(c, c // 2, 1), cbs(c, c // 2, 1)
            self.m = nn.Sequential(cbs(c // 2, c // 2, 1), cbs(c // 2, c // 2, 3))
            self.o = cbs(c, c, 1)

        def forward(self, x):
            a = self.a(x)
            return self.o(torch.cat([a + self.m(a), self.b(x)], 1))

    def __init__(self, classes=4):
        super().__init__()
        cbs, c3 = YoloDetect.Cbs, YoloDetect.C3
        self.p3 = nn.Sequential(cbs(3, 8, 3, 2), cbs(8, 16, 3, 2), c3(16), cbs(16, 32, 3, 2), c3(32))
        self.p4 = nn.Sequential(cbs(32, 48, 3, 2), c3(48))
        self.p5 = nn.Sequential(cbs(48, 64, 3, 2), c3(64))
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.n4, self.n3 = cbs(112, 48, 1), cbs(80, 32, 1)
        self.no, self.na, self.strides = classes + 5, 3, (8, 16, 32)
        self.heads = nn.ModuleList(nn.Conv2d(c, self.no * self.na, 1) for c in (32, 48, 64))
        anchors = [[10, 13, 16, 30, 33, 23], [30, 61, 62, 45, 59, 119], [116, 90, 156, 198, 373, 326]]
        self.register_buffer("anchors", torch.tensor(anchors).float().view(3, 1, 3, 1, 1, 2))
        for m in self.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)

    def forward(self, x):
        p3 = self.p3(x)
        p4 = self.p4(p3)
        p5 = self.p5(p4)
        n4 = self.n4(torch.cat([self.up(p5), p4], 1))
        n3 = self.n3(torch.cat([self.up(n4), p3], 1))
        z = []
        for i, f in enumerate((n3, n4, p5)):
            f = self.heads[i](f)
            bs, _, ny, nx = f.shape
            f = f.view(bs, self.na, self.no, ny, nx).permute(0, 1, 3, 4, 2).contiguous()
            yv, xv = torch.meshgrid(torch.arange(ny), torch.arange(nx), indexing="ij")
            grid = torch.stack((xv, yv), 2).view(1, 1, ny, nx, 2).float()
            y = f.sigmoid()
            xy = (y[..., 0:2] * 2 - 0.5 + grid) * self.strides[i]
            wh = (y[..., 2:4] * 2) ** 2 * self.anchors[i]
            z.append(torch.cat((xy, wh, y[..., 4:]), -1).view(bs, -1, self.no))
        return torch.cat(z, 1)


DYN_IMAGE = {"x": {0: "N", 2: "H", 3: "W"}}


class Crnn(nn.Module):
    """A text recogniser as CRNN (Shi et al., 2015) writes it: a CNN over a
    32-pixel-high line image of any width, its columns read by a two-layer
    bidirectional LSTM, a per-column classifier with log-softmax (CTC). torch
    writes each LSTM layer as one ONNX LSTM node (gates reordered to i, o,
    f, c) between Slices, Concats and Squeezes of its weights and states."""

    def __init__(self, classes=37):
        super().__init__()

        def block(cin, cout, pool):
            return [nn.Conv2d(cin, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(), nn.MaxPool2d(pool)]

        self.cnn = nn.Sequential(*block(1, 32, 2), *block(32, 64, 2), *block(64, 96, (2, 1)), *block(96, 96, (4, 1)))
        self.rnn = nn.LSTM(96, 48, num_layers=2, bidirectional=True)
        self.fc = nn.Linear(96, classes)

    def forward(self, x):
        f = self.cnn(x).squeeze(2).permute(2, 0, 1)  # [W/4, N, 96]
        y, _ = self.rnn(f)
        return F.log_softmax(self.fc(y), dim=2)


class KeywordGru(nn.Module):
    """A keyword spotter over MFCC frames [N, T, 40]: a batch-first two-layer
    GRU (torch writes linear_before_reset=1 and transposes around it), the
    last frame's state, a linear classifier."""

    def __init__(self, classes=12):
        super().__init__()
        self.rnn = nn.GRU(40, 64, num_layers=2, batch_first=True)
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        y, h = self.rnn(x)
        return self.fc(y[:, -1] + h[-1])


class ScriptedElman(nn.Module):
    """An Elman RNN written as a loop over time (torch.jit.script; torch.onnx
    writes a Loop whose body gathers row t of the input, multiplies it by the
    input weights and adds the recurrent product), then a classifier over the
    last state."""

    def __init__(self, features=40, hidden=128, classes=12):
        super().__init__()
        self.wx = nn.Linear(features, hidden)
        self.wh = nn.Linear(hidden, hidden, bias=False)
        self.fc = nn.Linear(hidden, classes)

    def forward(self, x):
        x = x.transpose(0, 1)  # [T, N, F]
        h = torch.zeros(x.size(1), self.wh.in_features)
        for t in range(x.size(0)):
            h = torch.tanh(self.wx(x[t]) + self.wh(h))
        return self.fc(h)


class ScriptedViewedRnn(nn.Module):
    """An Elman RNN over a batch-first input whose input weights are kept
    flat and viewed per step, the bias unsqueezed (as hand-written cells
    with packed weight buffers do): torch.onnx writes the Reshape and the
    Unsqueeze inside the Loop body, on constant shapes and axes."""

    def __init__(self, features=40, hidden=128, classes=12):
        super().__init__()
        self.features, self.hidden = features, hidden
        self.wx = nn.Parameter(torch.randn(features * hidden) / features**0.5)
        self.bx = nn.Parameter(torch.randn(hidden) * 0.1)
        self.wh = nn.Linear(hidden, hidden)
        self.fc = nn.Linear(hidden, classes)

    def forward(self, x):
        h = torch.zeros(x.size(0), self.hidden)
        for t in range(x.size(1)):
            h = torch.tanh(x[:, t] @ self.wx.view(self.features, self.hidden) + self.bx.unsqueeze(0) + self.wh(h))
        return self.fc(h)


class ScriptedGruCell(nn.Module):
    """A GRU cell written by hand (as users script custom cells) over a
    batch-first input, step by step: torch.onnx writes a Loop whose body
    gathers x[:, t] (Gather along axis 1), its input and recurrent Linears
    (Gemm), the gates split three ways with their shape arithmetic, then a
    classifier over the last state."""

    def __init__(self, features=40, hidden=128, classes=12):
        super().__init__()
        self.hidden = hidden
        self.ih = nn.Linear(features, 3 * hidden)
        self.hh = nn.Linear(hidden, 3 * hidden)
        self.fc = nn.Linear(hidden, classes)

    def forward(self, x):
        h = torch.zeros(x.size(0), self.hidden)
        for t in range(x.size(1)):
            ir, iz, i_n = self.ih(x[:, t]).chunk(3, 1)
            hr, hz, h_n = self.hh(h).chunk(3, 1)
            r = torch.sigmoid(ir + hr)
            z = torch.sigmoid(iz + hz)
            n = torch.tanh(i_n + r * h_n)
            h = (1 - z) * n + z * h
        return self.fc(h)


def scan_gru(opset, seed):
    """A keyword spotter whose two GRU layers are Scan bodies, as keras2onnx
    and CNTK write recurrent layers they do not map to ONNX's GRU: per step
    three products of the step's input with the gate weights and three of
    the state, Keras's gates (reset after the recurrent product); the second
    layer runs backwards over the first's outputs (scan_input_directions);
    the initial state from the input's batch size, a classifier over the last
    frame."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(seed)
    features, hidden, classes = 40, 128, 12

    def w(*shape, scale=None):
        scale = scale or 1.0 / np.sqrt(shape[0])
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    inits = []

    def init(name, value):
        inits.append(numpy_helper.from_array(value, name))
        return name

    def body(layer, inputs):
        p = "gru%d/" % layer
        nodes = []
        for gate in "zrh":
            nodes.append(helper.make_node("MatMul", ["x_t", p + "W" + gate], [p + "x" + gate], name=p + "MatMul_x" + gate))
            nodes.append(helper.make_node("Add", [p + "x" + gate, p + "b" + gate], [p + "xb" + gate], name=p + "Add_x" + gate))
            nodes.append(helper.make_node("MatMul", ["h", p + "U" + gate], [p + "h" + gate], name=p + "MatMul_h" + gate))
        nodes += [
            helper.make_node("Add", [p + "xbz", p + "hz"], [p + "z_pre"], name=p + "Add_z"),
            helper.make_node("Sigmoid", [p + "z_pre"], [p + "z"], name=p + "Sigmoid_z"),
            helper.make_node("Add", [p + "xbr", p + "hr"], [p + "r_pre"], name=p + "Add_r"),
            helper.make_node("Sigmoid", [p + "r_pre"], [p + "r"], name=p + "Sigmoid_r"),
            helper.make_node("Add", [p + "hh", p + "rbh"], [p + "hh_b"], name=p + "Add_rb"),
            helper.make_node("Mul", [p + "r", p + "hh_b"], [p + "rh"], name=p + "Mul_r"),
            helper.make_node("Add", [p + "xbh", p + "rh"], [p + "h_pre"], name=p + "Add_h"),
            helper.make_node("Tanh", [p + "h_pre"], [p + "h_cand"], name=p + "Tanh"),
            helper.make_node("Mul", [p + "z", "h"], [p + "zh"], name=p + "Mul_zh"),
            helper.make_node("Sub", [p + "one", p + "z"], [p + "1mz"], name=p + "Sub_1mz"),
            helper.make_node("Mul", [p + "1mz", p + "h_cand"], [p + "zc"], name=p + "Mul_zc"),
            helper.make_node("Add", [p + "zh", p + "zc"], ["h_next"], name=p + "Add_next"),
            helper.make_node("Identity", ["h_next"], ["y_t"], name=p + "Identity"),
        ]
        body_inits = [numpy_helper.from_array(np.ones((), np.float32), p + "one")]
        for gate in "zrh":
            body_inits += [numpy_helper.from_array(w(inputs, hidden), p + "W" + gate),
                           numpy_helper.from_array(w(hidden, hidden), p + "U" + gate),
                           numpy_helper.from_array(w(hidden, scale=0.1), p + "b" + gate)]
        body_inits.append(numpy_helper.from_array(w(hidden, scale=0.1), p + "rbh"))
        return helper.make_graph(
            nodes, "gru%d_step" % layer,
            [helper.make_tensor_value_info("h", TensorProto.FLOAT, ["N", hidden]),
             helper.make_tensor_value_info("x_t", TensorProto.FLOAT, ["N", inputs])],
            [helper.make_tensor_value_info("h_next", TensorProto.FLOAT, ["N", hidden]),
             helper.make_tensor_value_info("y_t", TensorProto.FLOAT, ["N", hidden])], body_inits)

    nodes = [
        helper.make_node("Transpose", ["x"], ["x_tnf"], perm=[1, 0, 2], name="transpose_in"),
        helper.make_node("Shape", ["x"], ["x_shape"], name="shape"),
        helper.make_node("Gather", ["x_shape", init("zero_index", np.array([0], np.int64))], ["batch"], axis=0,
                         name="batch"),
        helper.make_node("Concat", ["batch", init("hidden_size", np.array([hidden], np.int64))], ["h0_shape"], axis=0,
                         name="h0_shape"),
        helper.make_node("ConstantOfShape", ["h0_shape"], ["h0"], name="h0",
                         value=numpy_helper.from_array(np.zeros(1, np.float32))),
        helper.make_node("Scan", ["h0", "x_tnf"], ["h1_last", "y1"], num_scan_inputs=1, body=body(1, features),
                         name="gru1"),
        helper.make_node("Scan", ["h0", "y1"], ["h2_last", "y2"], num_scan_inputs=1, body=body(2, hidden),
                         scan_input_directions=[1], scan_output_directions=[1], name="gru2"),
        helper.make_node("Add", ["h1_last", "h2_last"], ["h_sum"], name="add_last"),
        helper.make_node("MatMul", ["h_sum", init("fc_w", w(hidden, classes))], ["logits_mm"], name="fc"),
        helper.make_node("Add", ["logits_mm", init("fc_b", w(classes, scale=0.1))], ["y"], name="fc_bias"),
    ]
    graph = helper.make_graph(nodes, "scan_gru", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                  ["N", "T", features])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", classes])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="keras2onnx")
    model.ir_version = 7
    onnx.checker.check_model(model)
    return model


def tf2onnx_while_rnn(opset, seed):
    """A recurrent layer as tf2onnx writes a TensorFlow while loop it does not
    map to ONNX's RNN operators: Loop(T, true, t0 = 0 (int32), h0) whose body
    reads the time-major input's row by TensorFlow's own carried counter
    (TensorArrayReadV3 -> Gather(x, t)), the kernel through an Identity
    (ReadVariableOp), counts t + 1; then a dense layer over the last state."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(seed)
    features, hidden, classes = 40, 128, 12

    def w(*shape):
        return (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)

    body = helper.make_graph([
        helper.make_node("Identity", ["kernel"], ["kernel_read"], name="while/ReadVariableOp"),
        helper.make_node("Gather", ["x_tnf", "t"], ["x_t"], axis=0, name="while/TensorArrayReadV3"),
        helper.make_node("MatMul", ["x_t", "kernel_read"], ["xk"], name="while/MatMul"),
        helper.make_node("Add", ["xk", "bias"], ["xkb"], name="while/BiasAdd"),
        helper.make_node("MatMul", ["h", "recurrent_kernel"], ["hk"], name="while/MatMul_1"),
        helper.make_node("Add", ["xkb", "hk"], ["s"], name="while/add"),
        helper.make_node("Tanh", ["s"], ["h_next"], name="while/Tanh"),
        helper.make_node("Add", ["t", "one"], ["t_next"], name="while/add_1"),
        helper.make_node("Identity", ["cond"], ["cond_out"], name="while/cond"),
    ], "while_body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                      helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
                      helper.make_tensor_value_info("t", TensorProto.INT32, []),
                      helper.make_tensor_value_info("h", TensorProto.FLOAT, ["N", hidden])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("t_next", TensorProto.INT32, []),
         helper.make_tensor_value_info("h_next", TensorProto.FLOAT, ["N", hidden])],
        [numpy_helper.from_array(np.array(1, np.int32), "one")])
    nodes = [
        helper.make_node("Transpose", ["x"], ["x_tnf"], perm=[1, 0, 2], name="transpose"),
        helper.make_node("Shape", ["x"], ["shape"], name="shape"),
        helper.make_node("Gather", ["shape", "time_axis"], ["steps"], axis=0, name="steps"),
        helper.make_node("Gather", ["shape", "batch_axis"], ["batch"], axis=0, name="batch"),
        helper.make_node("Concat", ["batch", "hidden_size"], ["h0_shape"], axis=0, name="h0_shape"),
        helper.make_node("ConstantOfShape", ["h0_shape"], ["h0"], name="h0",
                         value=numpy_helper.from_array(np.zeros(1, np.float32))),
        helper.make_node("Loop", ["steps", "true", "t0", "h0"], ["t_last", "h_last"], body=body, name="while"),
        helper.make_node("MatMul", ["h_last", "dense"], ["y"], name="dense"),
    ]
    inits = [numpy_helper.from_array(w(features, hidden), "kernel"),
             numpy_helper.from_array(w(hidden, hidden), "recurrent_kernel"),
             numpy_helper.from_array((rng.standard_normal(hidden) * 0.1).astype(np.float32), "bias"),
             numpy_helper.from_array(np.array(1, np.int64), "time_axis"),
             numpy_helper.from_array(np.array([0], np.int64), "batch_axis"),
             numpy_helper.from_array(np.array([hidden], np.int64), "hidden_size"),
             numpy_helper.from_array(np.array(True), "true"),
             numpy_helper.from_array(np.array(0, np.int32), "t0"),
             numpy_helper.from_array(w(hidden, classes), "dense")]
    graph = helper.make_graph(nodes, "tf2onnx_while_rnn",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", "T", features])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", classes])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="tf2onnx")
    model.ir_version = 7
    onnx.checker.check_model(model)
    return model


def csp_mish(opset, seed):
    """A CSP block with Mish (YOLOv4's backbone in miniature) as exporters
    write it at opset 18 and later (torch's dynamo exporter, tf2onnx), built
    with onnx.helper: Debian's torch (1.13) exports opset 17 at most. Mish
    (an operator since 18), Split by num_outputs (even, then uneven: 10
    channels in 3 -> 4, 4, 2), Reduce* with their axes as an input (18),
    batch norms after the convolutions; from opset 20 a Gelu (an operator
    since 20) on the classifier."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(seed)
    inits, nodes = [], []

    def const(name, value):
        inits.append(numpy_helper.from_array(value, name))
        return name

    def conv_bn_mish(x, cin, cout, k, name):
        w = const(name + ".w", (rng.standard_normal((cout, cin, k, k)) / np.sqrt(cin * k * k)).astype(np.float32))
        nodes.append(helper.make_node("Conv", [x, w], [name + ".c"], pads=[k // 2] * 4, name=name + "/Conv"))
        bn = [const(name + ".bn." + p, v.astype(np.float32)) for p, v in
              [("scale", rng.uniform(0.5, 1.5, cout)), ("bias", rng.standard_normal(cout) * 0.1),
               ("mean", rng.standard_normal(cout) * 0.1), ("var", rng.uniform(0.5, 1.5, cout))]]
        nodes.append(helper.make_node("BatchNormalization", [name + ".c"] + bn, [name + ".b"], name=name + "/BN"))
        nodes.append(helper.make_node("Mish", [name + ".b"], [name + ".m"], name=name + "/Mish"))
        return name + ".m"

    h = conv_bn_mish("x", 3, 16, 3, "stem")
    nodes.append(helper.make_node("Split", [h], ["part1", "part2"], axis=1, num_outputs=2, name="csp/Split"))
    b = conv_bn_mish("part2", 8, 8, 3, "csp.block")
    nodes.append(helper.make_node("Add", [b, "part2"], ["csp.res"], name="csp/Add"))
    nodes.append(helper.make_node("Concat", ["part1", "csp.res"], ["csp.cat"], axis=1, name="csp/Concat"))
    t = conv_bn_mish("csp.cat", 16, 10, 1, "transition")
    nodes.append(helper.make_node("Split", [t], ["s0", "s1", "s2"], axis=1, num_outputs=3, name="head/Split"))
    hw = const("hw_axes", np.array([2, 3], np.int64))
    nodes.append(helper.make_node("Mul", ["s0", "s1"], ["gate"], name="head/Mul"))
    nodes.append(helper.make_node("ReduceMean", ["gate", hw], ["avg"], keepdims=0, name="head/ReduceMean"))
    nodes.append(helper.make_node("ReduceMax", ["s2", hw], ["peak"], keepdims=0, name="head/ReduceMax"))
    nodes.append(helper.make_node("Concat", ["avg", "peak"], ["pooled"], axis=1, name="head/Concat"))
    fc_w = const("fc.w", (rng.standard_normal((5, 6)) / np.sqrt(6)).astype(np.float32))
    fc_b = const("fc.b", (rng.standard_normal(5) * 0.1).astype(np.float32))
    last = "logits" if opset >= 20 else "y"
    nodes.append(helper.make_node("Gemm", ["pooled", fc_w, fc_b], [last], transB=1, name="fc/Gemm"))
    if opset >= 20:
        nodes.append(helper.make_node("Gelu", ["logits"], ["y"], name="fc/Gelu"))
    graph = helper.make_graph(nodes, "csp_mish", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                ["N", 3, "H", "W"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 5])], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="rlflow-zoo")
    model.ir_version = 8
    return model


def tf2onnx_mobilenet(opset, seed):
    """A MobileNetV2-style Keras classifier as tf2onnx writes it, built with
    onnx.helper (no TensorFlow here): an NHWC input "input_1" with an
    "unk__" batch and a Transpose to NCHW, Conv with auto_pad SAME_UPPER and
    with TF's asymmetric stride-2 pads, ReLU6 as Clip with min/max inputs,
    depthwise convolutions, residual Adds, a mean over H and W, Flatten
    through Shape/Gather/Unsqueeze/Concat/Reshape, Dense as MatMul + Add,
    Softmax; ":0"-suffixed names and an ai.onnx.ml import."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(seed)
    nodes, inits = [], []

    def const(name, a):
        inits.append(numpy_helper.from_array(np.asarray(a), name))
        return name

    def conv(x, cin, cout, k, stride, name, group=1, act=True):
        fan = cin // group * k * k
        w = const(name + "/kernel", (rng.standard_normal((cout, cin // group, k, k)) * np.sqrt(2 / fan)).astype(np.float32))
        b = const(name + "/bias", (rng.standard_normal(cout) * 0.1).astype(np.float32))
        attrs = dict(strides=[stride, stride], kernel_shape=[k, k], group=group, dilations=[1, 1])
        if stride == 1:
            attrs["auto_pad"] = "SAME_UPPER"
        else:
            attrs["pads"] = [0, 0, 1, 1]
        y = name + "/BiasAdd:0"
        nodes.append(helper.make_node("Conv", [x, w, b], [y], name=name + "/BiasAdd", **attrs))
        if not act:
            return y
        lo, hi = const(name + "/Relu6/min", np.float32(0)), const(name + "/Relu6/max", np.float32(6))
        nodes.append(helper.make_node("Clip", [y, lo, hi], [name + "/Relu6:0"], name=name + "/Relu6"))
        return name + "/Relu6:0"

    nodes.append(helper.make_node("Transpose", ["input_1"], ["model/Conv1/Conv2D__6:0"], perm=[0, 3, 1, 2],
                                  name="model/Conv1/Conv2D__6"))
    x, cin = conv("model/Conv1/Conv2D__6:0", 3, 16, 3, 2, "model/Conv1"), 16
    for i, (t, c, s) in enumerate([(1, 16, 1), (4, 24, 2), (4, 24, 1), (4, 32, 2), (4, 32, 1)]):
        p = "model/block_%d" % i
        h = conv(x, cin, cin * t, 1, 1, p + "_expand") if t != 1 else x
        h = conv(h, cin * t, cin * t, 3, s, p + "_depthwise", group=cin * t)
        h = conv(h, cin * t, c, 1, 1, p + "_project", act=False)
        if s == 1 and cin == c:
            nodes.append(helper.make_node("Add", [x, h], [p + "_add/add:0"], name=p + "_add/add"))
            h = p + "_add/add:0"
        x, cin = h, c
    x = conv(x, cin, 128, 1, 1, "model/Conv_1")
    nodes.append(helper.make_node("ReduceMean", [x], ["model/gap/Mean:0"], axes=[2, 3], keepdims=0, name="model/gap/Mean"))
    nodes.append(helper.make_node("Shape", ["model/gap/Mean:0"], ["model/flatten/Shape:0"], name="model/flatten/Shape"))
    nodes.append(helper.make_node("Gather", ["model/flatten/Shape:0", const("const_zero", np.array(0, np.int64))],
                                  ["model/flatten/strided_slice:0"], axis=0, name="model/flatten/strided_slice"))
    nodes.append(helper.make_node("Unsqueeze", ["model/flatten/strided_slice:0", const("const_axes__0", np.array([0], np.int64))],
                                  ["model/flatten/shape_Unsqueeze__1:0"], name="model/flatten/shape_Unsqueeze__1"))
    nodes.append(helper.make_node("Concat", ["model/flatten/shape_Unsqueeze__1:0", const("const_fold_opt__10", np.array([-1], np.int64))],
                                  ["model/flatten/shape_Concat__2:0"], axis=0, name="model/flatten/shape_Concat__2"))
    nodes.append(helper.make_node("Reshape", ["model/gap/Mean:0", "model/flatten/shape_Concat__2:0"],
                                  ["model/flatten/Reshape:0"], name="model/flatten/Reshape"))
    dense = const("model/predictions/MatMul/ReadVariableOp:0", (rng.standard_normal((128, 10)) * 0.1).astype(np.float32))
    nodes.append(helper.make_node("MatMul", ["model/flatten/Reshape:0", dense], ["model/predictions/MatMul:0"],
                                  name="model/predictions/MatMul"))
    bias = const("model/predictions/BiasAdd/ReadVariableOp:0", (rng.standard_normal(10) * 0.1).astype(np.float32))
    nodes.append(helper.make_node("Add", ["model/predictions/MatMul:0", bias], ["model/predictions/BiasAdd:0"],
                                  name="model/predictions/BiasAdd"))
    nodes.append(helper.make_node("Softmax", ["model/predictions/BiasAdd:0"], ["predictions"], axis=-1,
                                  name="model/predictions/Softmax"))
    graph = helper.make_graph(nodes, "tf2onnx", [helper.make_tensor_value_info("input_1", TensorProto.FLOAT, ["unk__618", 96, 96, 3])],
                              [helper.make_tensor_value_info("predictions", TensorProto.FLOAT, ["unk__619", 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid("ai.onnx.ml", 2)],
                              producer_name="tf2onnx", producer_version="1.9.3 1190aa")
    onnx.checker.check_model(model, full_check=True)
    return model


def paddle_lcnet(opset, seed):
    """A PP-LCNet-style classifier as paddle2onnx writes it at opset 11,
    built with onnx.helper (no Paddle here): BatchNormalization after each
    convolution, not folded; hard-swish as x * HardSigmoid(x) (no HardSwish
    below opset 14); depthwise 3x3 and 5x5 convolutions; SE gates
    (GlobalAveragePool, Conv, Relu, Conv, HardSigmoid, Mul); a 1x1 conv
    after the pooling; Flatten, Gemm, Softmax; "p2o.DynamicDimension.N"
    dimensions and "p2o."-prefixed names."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(seed)
    nodes, inits, count = [], [], [0]

    def nm(prefix):
        count[0] += 1
        return "%s_%d" % (prefix, count[0])

    def const(a, prefix="w"):
        name = nm("p2o." + prefix)
        inits.append(numpy_helper.from_array(np.asarray(a), name))
        return name

    def op(kind, inputs, prefix, **attrs):
        y = nm(prefix)
        nodes.append(helper.make_node(kind, inputs, [y], name=nm("p2o." + kind), **attrs))
        return y

    def conv(x, cin, cout, k, s, g=1, bias=False):
        w = const((rng.standard_normal((cout, cin // g, k, k)) * np.sqrt(2 / (cin // g * k * k))).astype(np.float32))
        ins = [x, w] + ([const((rng.standard_normal(cout) * 0.1).astype(np.float32), "b")] if bias else [])
        return op("Conv", ins, "conv2d.tmp", strides=[s, s], pads=[k // 2] * 4, group=g, dilations=[1, 1], kernel_shape=[k, k])

    def bn(x, c):
        stats = [(rng.random(c) + 0.5), rng.standard_normal(c) * 0.1, rng.standard_normal(c) * 0.1, rng.random(c) + 0.5]
        return op("BatchNormalization", [x] + [const(a.astype(np.float32)) for a in stats], "batch_norm.tmp",
                  epsilon=1e-5, momentum=0.9)

    def hswish(x):
        return op("Mul", [x, op("HardSigmoid", [x], "hard_sigmoid.tmp", alpha=1 / 6, beta=0.5)], "hard_swish.tmp")

    def se(x, c):
        r = op("Relu", [conv(op("GlobalAveragePool", [x], "pool.tmp"), c, c // 4, 1, 1, bias=True)], "relu.tmp")
        return op("Mul", [x, op("HardSigmoid", [conv(r, c // 4, c, 1, 1, bias=True)], "hs.tmp", alpha=0.2, beta=0.5)],
                  "se.tmp")

    x, cin = hswish(bn(conv("x", 3, 16, 3, 2), 16)), 16
    for cout, s, k, use_se in [(32, 1, 3, False), (64, 2, 3, False), (64, 1, 3, False), (128, 2, 5, True), (128, 1, 5, True)]:
        x = hswish(bn(conv(x, cin, cin, k, s, g=cin), cin))
        if use_se:
            x = se(x, cin)
        x, cin = hswish(bn(conv(x, cin, cout, 1, 1), cout)), cout
    x = hswish(conv(op("GlobalAveragePool", [x], "pool.tmp"), cin, 256, 1, 1, bias=True))
    x = op("Flatten", [x], "flatten.tmp", axis=1)
    x = op("Gemm", [x, const((rng.standard_normal((256, 10)) * 0.05).astype(np.float32)),
                    const(np.zeros(10, np.float32), "b")], "linear.tmp", alpha=1.0, beta=1.0)
    nodes.append(helper.make_node("Softmax", [x], ["softmax_0.tmp_0"], name=nm("p2o.Softmax"), axis=1))
    dims = ["p2o.DynamicDimension.0", 3, "p2o.DynamicDimension.1", "p2o.DynamicDimension.2"]
    graph = helper.make_graph(nodes, "paddle", [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
                              [helper.make_tensor_value_info("softmax_0.tmp_0", TensorProto.FLOAT,
                                                             ["p2o.DynamicDimension.0", 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="PaddlePaddle",
                              ir_version=6)
    onnx.checker.check_model(model, full_check=True)
    return model


def qdq_cnn(opset, seed):
    """A CNN statically quantized in the QDQ format, as ONNX Runtime's
    quantization tool (quantize_static, QuantFormat.QDQ) writes it and as
    int8 deployments on ORT's CPU run it: a QuantizeLinear -> DequantizeLinear
    pair on every activation (uint8, asymmetric, ranges calibrated on seeded
    inputs), weights int8 per output channel behind a DequantizeLinear, biases
    int32 at the input's scale times the weight's. A stem, two 1x1 branches
    from one input (concatenated), a 3x3 conv, a residual add, global pooling
    and a classifier, then a head left in float. ORT fuses each DQ -> op -> Q
    unit into an integer kernel (QLinearConv, QLinearAdd, ...). Built with
    onnx.helper; the float values for calibration come from torch."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    inits, nodes = [], []
    calib = torch.randn(4, 3, 32, 32)

    def const(name, value):
        inits.append(numpy_helper.from_array(value, name))
        return name

    def quantize(name, value):
        """Q -> DQ on the float tensor `name` whose calibration value is
        `value`; returns the DQ's output, its scale and the calibration value
        rounded to the grid (what the next layer is calibrated on)."""
        lo, hi = min(float(value.min()), 0.0), max(float(value.max()), 0.0)
        scale = (hi - lo) / 255.0 or 1.0
        zp = int(np.clip(round(-lo / scale), 0, 255))
        s = const(name + "_scale", np.array(scale, np.float32))
        z = const(name + "_zero_point", np.array(zp, np.uint8))
        nodes.append(helper.make_node("QuantizeLinear", [name, s, z], [name + "_QuantizeLinear_Output"],
                                      name=name + "_QuantizeLinear"))
        nodes.append(helper.make_node("DequantizeLinear", [name + "_QuantizeLinear_Output", s, z],
                                      [name + "_DequantizeLinear_Output"], name=name + "_DequantizeLinear"))
        # What the integer kernels compute from: the value rounded to the grid.
        q = torch.clamp(torch.round(value / scale) + zp, 0, 255)
        return name + "_DequantizeLinear_Output", scale, (q - zp) * scale

    def weight(name, w, x_scale, b):
        """int8 per-channel weight and int32 bias behind DequantizeLinear."""
        ws = np.maximum(np.abs(w).reshape(w.shape[0], -1).max(axis=1), 1e-8) / 127.0
        wq = np.clip(np.round(w / ws.reshape((-1,) + (1,) * (w.ndim - 1))), -127, 127).astype(np.int8)
        const(name + "_quantized", wq)
        const(name + "_scale", ws.astype(np.float32))
        const(name + "_zero_point", np.zeros(w.shape[0], np.int8))
        nodes.append(helper.make_node("DequantizeLinear", [name + "_quantized", name + "_scale", name + "_zero_point"],
                                      [name + "_DequantizeLinear_Output"], axis=0, name=name + "_DequantizeLinear"))
        bs = (ws * x_scale).astype(np.float32)
        bq = np.round(b / bs).astype(np.int32)
        const(name + ".bias_quantized", bq)
        const(name + ".bias_scale", bs)
        const(name + ".bias_zero_point", np.zeros(w.shape[0], np.int32))
        nodes.append(helper.make_node("DequantizeLinear", [name + ".bias_quantized", name + ".bias_scale",
                                                           name + ".bias_zero_point"],
                                      [name + ".bias_DequantizeLinear_Output"], axis=0,
                                      name=name + ".bias_DequantizeLinear"))
        wf = torch.from_numpy((wq.astype(np.float32) * ws.reshape((-1,) + (1,) * (w.ndim - 1))).astype(np.float32))
        bf = torch.from_numpy((bq * bs).astype(np.float32))
        return name + "_DequantizeLinear_Output", name + ".bias_DequantizeLinear_Output", wf, bf

    def conv(x, xs, xv, cin, cout, k, stride, name, relu=True):
        w = (rng.standard_normal((cout, cin, k, k)) * np.sqrt(2.0 / (cin * k * k))).astype(np.float32)
        b = (rng.standard_normal(cout) * 0.1).astype(np.float32)
        wn, bn, wf, bf = weight(name + ".weight", w, xs, b)
        out = name + ("_conv" if relu else "")
        nodes.append(helper.make_node("Conv", [x, wn, bn], [out], pads=[k // 2] * 4, strides=[stride] * 2,
                                      name=name + "/Conv"))
        v = F.conv2d(xv, wf, bf, stride=stride, padding=k // 2)
        if relu:
            nodes.append(helper.make_node("Relu", [out], [name], name=name + "/Relu"))
            v = F.relu(v)
        return quantize(name, v)

    x, xs, xv = quantize("x", calib)
    s, ss, sv = conv(x, xs, xv, 3, 16, 3, 2, "stem")
    a, as_, av = conv(s, ss, sv, 16, 16, 1, 1, "branch_a")
    b, bs_, bv = conv(s, ss, sv, 16, 16, 1, 1, "branch_b")
    nodes.append(helper.make_node("Concat", [a, b], ["cat"], axis=1, name="cat/Concat"))
    c, cs, cv = quantize("cat", torch.cat([av, bv], 1))
    m, ms, mv = conv(c, cs, cv, 32, 32, 3, 1, "mid")
    p, ps, pv = conv(m, ms, mv, 32, 32, 1, 1, "proj", relu=False)
    nodes.append(helper.make_node("Add", [p, c], ["res"], name="res/Add"))
    r, rs, rv = quantize("res", pv + cv)
    nodes.append(helper.make_node("GlobalAveragePool", [r], ["pool"], name="pool/GlobalAveragePool"))
    pool, pools, poolv = quantize("pool", rv.mean(dim=(2, 3), keepdim=True))
    nodes.append(helper.make_node("Flatten", [pool], ["flat"], axis=1, name="flat/Flatten"))
    w = (rng.standard_normal((10, 32)) / np.sqrt(32)).astype(np.float32)
    wn, bn, _, _ = weight("fc.weight", w, pools, (rng.standard_normal(10) * 0.1).astype(np.float32))
    nodes.append(helper.make_node("Gemm", ["flat", wn, bn], ["fc"], transB=1, name="fc/Gemm"))
    # A head left in float (excluded from quantization, as sensitive last
    # layers often are), with hard-swish written by formula: rlflow's to
    # optimise around the units.
    three, six, zero = (const(n, np.array(v, np.float32)) for n, v in [("three", 3), ("six", 6), ("zero", 0)])
    nodes.append(helper.make_node("Add", ["fc", three], ["hs.add"], name="head/Add"))
    nodes.append(helper.make_node("Clip", ["hs.add", zero, six], ["hs.clip"], name="head/Clip"))
    nodes.append(helper.make_node("Mul", ["fc", "hs.clip"], ["hs.mul"], name="head/Mul"))
    nodes.append(helper.make_node("Div", ["hs.mul", six], ["hs"], name="head/Div"))
    head_w = const("head.weight", (rng.standard_normal((10, 10)) / np.sqrt(10)).astype(np.float32))
    head_b = const("head.bias", (rng.standard_normal(10) * 0.1).astype(np.float32))
    nodes.append(helper.make_node("Gemm", ["hs", head_w, head_b], ["y"], transB=1, name="head/Gemm"))
    graph = helper.make_graph(nodes, "qdq_cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                               ["N", 3, "H", "W"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="rlflow-zoo")
    model.ir_version = 7
    onnx.checker.check_model(model)
    return model


def ort_transformers_bert(opset, seed):
    """A BERT classifier as ONNX Runtime's transformer optimiser
    (onnxruntime.transformers.optimizer) writes it, the form many users of
    ONNX Runtime deploy, built with onnx.helper: com.microsoft
    EmbedLayerNormalization (int32 ids, segment ids and mask), Attention
    with its mask index, SkipLayerNormalization with the output projection's
    bias, BiasGelu, MatMul, and the final LayerNormalization in the default
    domain, where ONNX Runtime runs it at any opset (ONNX has it from 17);
    the classifier on the first token."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(seed)
    width, heads, vocab = 64, 4, 1000
    nodes, inits = [], []

    def const(name, a):
        inits.append(numpy_helper.from_array(np.asarray(a), name))
        return name

    def rand(*shape):
        return (rng.standard_normal(shape) * 0.05).astype(np.float32)

    def ms(op, ins, outs, name, **attrs):
        nodes.append(helper.make_node(op, ins, outs, name=name, domain="com.microsoft", **attrs))

    ones, zeros = np.ones(width, np.float32), np.zeros(width, np.float32)
    ms("EmbedLayerNormalization", ["input_ids", "segment_ids", const("word_embeddings", rand(vocab, width)),
                                   const("position_embeddings", rand(128, width)),
                                   const("token_type_embeddings", rand(2, width)), const("embeddings.gamma", ones),
                                   const("embeddings.beta", zeros), "input_mask"],
       ["embed_output", "mask_index"], "EmbedLayerNormalization_0", epsilon=1e-12)
    x = "embed_output"
    for i in range(2):
        p = "layer.%d." % i
        ms("Attention", [x, const(p + "qkv.weight", rand(width, 3 * width)), const(p + "qkv.bias", rand(3 * width)),
                         "mask_index"], [p + "attention"], "Attention_%d" % i, num_heads=heads)
        nodes.append(helper.make_node("MatMul", [p + "attention", const(p + "out.weight", rand(width, width))],
                                      [p + "out"], name="MatMul_out_%d" % i))
        ms("SkipLayerNormalization", [p + "out", x, const(p + "ln1.gamma", ones), const(p + "ln1.beta", zeros),
                                      const(p + "out.bias", rand(width))], [p + "ln1"],
           "SkipLayerNorm_attn_%d" % i, epsilon=1e-12)
        nodes.append(helper.make_node("MatMul", [p + "ln1", const(p + "ffn1.weight", rand(width, 4 * width))],
                                      [p + "ffn1"], name="MatMul_ffn1_%d" % i))
        ms("BiasGelu", [p + "ffn1", const(p + "ffn1.bias", rand(4 * width))], [p + "gelu"], "BiasGelu_%d" % i)
        nodes.append(helper.make_node("MatMul", [p + "gelu", const(p + "ffn2.weight", rand(4 * width, width))],
                                      [p + "ffn2"], name="MatMul_ffn2_%d" % i))
        ms("SkipLayerNormalization", [p + "ffn2", p + "ln1", const(p + "ln2.gamma", ones),
                                      const(p + "ln2.beta", zeros), const(p + "ffn2.bias", rand(width))],
           [p + "ln2"], "SkipLayerNorm_ffn_%d" % i, epsilon=1e-12)
        x = p + "ln2"
    nodes.append(helper.make_node("LayerNormalization", [x, const("final.gamma", ones), const("final.beta", zeros)],
                                  ["final"], name="LayerNorm_final", axis=-1, epsilon=1e-12))
    nodes.append(helper.make_node("Gather", ["final", const("first", np.array(0, np.int64))], ["cls"], axis=1,
                                  name="Gather_cls"))
    nodes.append(helper.make_node("Gemm", ["cls", const("classifier.weight", rand(2, width)),
                                           const("classifier.bias", rand(2))], ["logits"], transB=1,
                                  name="Gemm_classifier"))
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT32, ["batch_size", "seq_len"])
              for n in ["input_ids", "segment_ids", "input_mask"]]
    graph = helper.make_graph(nodes, "bert_ort_optimized", inputs,
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch_size", 2])],
                              initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset),
                                                    helper.make_opsetid("com.microsoft", 1)],
                              producer_name="onnxruntime.transformers", producer_version="1.16.0")
    model.ir_version = 7
    return model


def _ir3(model):
    """IR version 3, as ONNX 1.2/1.3's converters wrote: every initializer
    is also a graph input."""
    from onnx import helper
    model.ir_version = 3
    g = model.graph
    listed = {vi.name for vi in g.input}
    for t in g.initializer:
        if t.name not in listed:
            g.input.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    return model


def winml_tiny_yolov2(opset, seed):
    """Tiny YOLOv2 as the ONNX model zoo's tinyyolov2-7 and -8 hold it
    (WinMLTools, 2018; Windows ML's samples use it), at a quarter of its
    width: the image scaled by ImageScaler (an experimental operator ONNX
    removed at opset 10, which ONNX Runtime runs below it), nine convolutions
    with batch norm and LeakyRelu, max pooling (the last at stride 1 with
    auto_pad SAME_UPPER), IR version 3 (opset 8 in the corpus, as -8)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(seed)
    nodes, inits = [], []

    def const(name, a):
        inits.append(numpy_helper.from_array(np.asarray(a, np.float32), name))
        return name

    nodes.append(helper.make_node("ImageScaler", ["image"], ["scalerPreprocessor"], name="scalerPreprocessor",
                                  scale=1.0 / 255, bias=[-0.5, -0.25, 0.0]))
    x, cin = "scalerPreprocessor", 3
    for i, c in enumerate([4, 8, 16, 32, 64, 128, 256, 256]):
        w = const("convolution%d_W" % i, rng.standard_normal((c, cin, 3, 3)) * np.sqrt(2.0 / (cin * 9)))
        nodes.append(helper.make_node("Conv", [x, w], ["convolution%d" % i], name="convolution%d" % i,
                                      kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1]))
        stats = [const("BatchNormalization%d_%s" % (i, k), v) for k, v in
                 [("scale", 1 + 0.1 * rng.standard_normal(c)), ("B", 0.1 * rng.standard_normal(c)),
                  ("mean", 0.1 * rng.standard_normal(c)), ("variance", 1 + 0.1 * rng.random(c))]]
        nodes.append(helper.make_node("BatchNormalization", ["convolution%d" % i] + stats,
                                      ["BatchNormalization%d" % i], name="BatchNormalization%d" % i, epsilon=1e-5))
        nodes.append(helper.make_node("LeakyRelu", ["BatchNormalization%d" % i], ["activation%d" % i],
                                      name="activation%d" % i, alpha=0.1))
        x = "activation%d" % i
        if i <= 5:
            attrs = dict(kernel_shape=[2, 2], strides=[2, 2]) if i < 5 else \
                dict(kernel_shape=[2, 2], strides=[1, 1], auto_pad="SAME_UPPER")
            nodes.append(helper.make_node("MaxPool", [x], ["pooling%d" % i], name="pooling%d" % i, **attrs))
            x = "pooling%d" % i
        cin = c
    nodes.append(helper.make_node("Conv", [x, const("convolution8_W", rng.standard_normal((125, cin, 1, 1)) * 0.05),
                                           const("convolution8_B", 0.1 * rng.standard_normal(125))],
                                  ["grid"], name="convolution8", kernel_shape=[1, 1]))
    graph = helper.make_graph(nodes, "tinyyolov2", [helper.make_tensor_value_info("image", TensorProto.FLOAT,
                                                                                    ["None", 3, 416, 416])],
                              [helper.make_tensor_value_info("grid", TensorProto.FLOAT, ["None", 125, 13, 13])],
                              initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="WinMLTools",
                              producer_version="1.2.0")
    return _ir3(model)


def coreml_experimental(opset, seed):
    """A small CNN as 2018's CoreML and Caffe conversions (onnxmltools)
    wrote it, IR version 3 at opset 7, with every experimental operator
    ONNX removed at opset 10 that ONNX Runtime still runs below it: Affine,
    ScaledTanh, ParametricSoftplus, Scale, Crop by borders and by a size,
    ThresholdedRelu-1 and DynamicSlice (Slice-10's precursor, its bounds as
    inputs)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(seed)
    nodes, inits = [], []

    def const(name, a, dtype=np.float32):
        inits.append(numpy_helper.from_array(np.asarray(a, dtype), name))
        return name

    def conv(i, x, cin, cout):
        w = const("conv%d_W" % i, rng.standard_normal((cout, cin, 3, 3)) * np.sqrt(1.0 / (cin * 9)))
        b = const("conv%d_B" % i, 0.1 * rng.standard_normal(cout))
        nodes.append(helper.make_node("Conv", [x, w, b], ["conv%d" % i], name="conv%d" % i, kernel_shape=[3, 3],
                                      pads=[1, 1, 1, 1]))
        return "conv%d" % i

    def node(op, ins, name, **attrs):
        nodes.append(helper.make_node(op, ins, [name], name=name, **attrs))
        return name

    x = conv(0, "x", 3, 8)
    x = node("Affine", [x], "affine", alpha=0.5, beta=0.1)
    x = node("ScaledTanh", [x], "scaled_tanh", alpha=1.7159, beta=0.6667)
    x = conv(1, x, 8, 8)
    x = node("ParametricSoftplus", [x], "softplus", alpha=0.8, beta=1.5)
    x = node("Scale", [x], "scale", scale=0.5)
    x = node("Crop", [x], "crop_border", border=[1, 2, 3, 1])
    x = conv(2, x, 8, 8)
    x = node("Crop", [x], "crop_size", border=[2, 1, 0, 0], scale=[12, 10])
    x = node("ThresholdedRelu", [x], "thresholded", alpha=0.05)
    x = node("DynamicSlice", [x, const("ds_starts", [1, 1], np.int64), const("ds_ends", [11, -1], np.int64),
                              const("ds_axes", [2, 3], np.int64)], "dynamic_slice")
    x = conv(3, x, 8, 8)
    nodes[-1].output[0] = "y"
    graph = helper.make_graph(nodes, "coreml_cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                    ["N", 3, "H", "W"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8, 10, 8])],
                              initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="onnxmltools",
                              producer_version="1.2.2")
    return _ir3(model)


# Models with several inputs, exported by their own function:
# name -> (export(path, opset, seed), opset, --input_shape, other shape).
# The decoder is optimised at its prompt step (8 tokens, an empty cache)
# and must be right at a generation step (1 token, 9 cached).
EXPORTED_MODELS = {
    "gpt_decoder_kv_cache_op14": (export_decoder, 14, "ids:1,8;pk0:1,4,0,16", "ids:1,1;pk0:1,4,9,16"),
    "gpt_decoder_merged_op14": (export_merged_decoder, 14, "ids:1,8;pk0:1,4,0,16;use_cache_branch:1",
                                "ids:1,1;pk0:1,4,9,16;use_cache_branch:1"),
    # Its weights in an external data file, as Optimum writes merged
    # decoders over 2 GB.
    "gpt_decoder_merged_op14_external": (export_merged_decoder, 14, "ids:1,8;pk0:1,4,0,16;use_cache_branch:1",
                                         "ids:1,1;pk0:1,4,9,16;use_cache_branch:1"),
    "hf_bert_classifier_op14": (export_hf_bert, 14, "input_ids:1,128;attention_mask:1,128;token_type_ids:1,128",
                                "input_ids:2,40;attention_mask:2,40;token_type_ids:2,40"),
    # The same in float16 (halve), its mask bias float16's lowest value.
    "hf_bert_classifier_fp16_op14": (export_hf_bert, 14, "input_ids:1,128;attention_mask:1,128;token_type_ids:1,128",
                                     "input_ids:2,40;attention_mask:2,40;token_type_ids:2,40"),
    "bert_slice_pooler_op13": (export_bert_slice_pooler, 13,
                               "input_ids:1,128;attention_mask:1,128;token_type_ids:1,128",
                               "input_ids:2,40;attention_mask:2,40;token_type_ids:2,40"),
    # Detection post-processing in the graph (NonZero, NonMaxSuppression).
    "nms_detector_op11": (export_nms_detector, 11, "x:1,3,128,160", "x:1,3,96,96"),
    # Generation inside the model: a Loop whose body is the decoder.
    "greedy_decode_loop_op14": (export_greedy_decode_loop, 14, "ids:1,8", "ids:1,3"),
    # The same appending each step's scores to a list, as a scripted loop does.
    "greedy_decode_list_loop_op14": (export_greedy_decode_list_loop, 14, "ids:1,8", "ids:1,3"),
    "rotary_decoder_op14": (export_rotary_decoder, 14, "input_ids:1,64;attention_mask:1,64",
                            "input_ids:2,24;attention_mask:2,24"),
}

def export_repvgg_a0(path, opset, seed):
    """RepVGG-A0 (its widths and depths: 48, 48, 96, 192, 1280 wide, 1, 2,
    4, 14, 1 blocks) in its training form, 1000 classes, random weights. For
    measurements."""
    torch.manual_seed(seed)
    model = RepVggTrainForm((48, 48, 96, 192, 1280), (1, 2, 4, 14, 1), ac_blocks=0, classes=1000).eval()
    with torch.no_grad():
        torch.onnx.export(model, (torch.randn(1, 3, 224, 224),), path, opset_version=opset, input_names=["x"],
                          output_names=["y"], dynamic_axes=dict(DYN_IMAGE, y={0: "N"}))


def export_nafnet_width16(path, opset, seed):
    """A NAFNet-style U-Net 16 wide with three levels, its norms in NAFNet's
    own form only (epsilon 1e-6, pow(2), weight.view(1, -1, 1, 1)), random
    weights. For measurements at 256 x 256."""
    torch.manual_seed(seed)
    model = NafNetLayerNorm2d(16, 3, forms=[(1e-6, True, True)]).eval()
    with torch.no_grad():
        torch.onnx.export(model, (torch.randn(1, 3, 256, 256),), path, opset_version=opset, input_names=["x"],
                          output_names=["y"], dynamic_axes=dict(DYN_IMAGE, y={0: "N"}))


# Exported only when named in --models (measurements, not the corpus):
# name -> as EXPORTED_MODELS.
EXTRA_MODELS = {
    "gpt_decoder_merged_big_op14": (export_merged_decoder_big, 14, "ids:1,32;pk0:1,8,0,32;use_cache_branch:1",
                                    "ids:1,1;pk0:1,8,64,32;use_cache_branch:1"),
    "gpt_decoder_merged_gpt2_size_op14": (export_merged_decoder_gpt2_size, 14,
                                          "ids:1,32;pk0:1,12,0,64;use_cache_branch:1",
                                          "ids:1,1;pk0:1,12,64,64;use_cache_branch:1"),
    "gpt_decoder_merged_2gb_op14": (export_merged_decoder_2gb, 14, "ids:1,8;pk0:1,4,0,16;use_cache_branch:1",
                                    "ids:1,1;pk0:1,4,9,16;use_cache_branch:1"),
    "gpt_decoder_merged_gpt2_size_op14_external": (export_merged_decoder_gpt2_size, 14,
                                                   "ids:1,32;pk0:1,12,0,64;use_cache_branch:1",
                                                   "ids:1,1;pk0:1,12,64,64;use_cache_branch:1"),
    "repvgg_a0_train_form_op13": (export_repvgg_a0, 13, "x:1,3,224,224", "x:2,3,160,192"),
    "nafnet_width16_op13": (export_nafnet_width16, 13, "x:1,3,256,256", "x:2,3,192,160"),
}

# Models built with onnx.helper at opsets torch 1.13 cannot export:
# name -> (builder(opset, seed), opset, --input_shape, other shape).
ONNX_MODELS = {
    "csp_mish_op18": (csp_mish, 18, "x:1,3,64,64", "x:2,3,48,40"),
    "csp_mish_gelu_op20": (csp_mish, 20, "x:1,3,64,64", "x:2,3,48,40"),
    "qdq_cnn_op13": (qdq_cnn, 13, "x:1,3,64,64", "x:2,3,48,40"),
    # Recurrent layers as Scan bodies (keras2onnx's and CNTK's form).
    "scan_gru_op13": (scan_gru, 13, "x:1,49,40", "x:2,30,40"),
    "tf2onnx_while_rnn_op13": (tf2onnx_while_rnn, 13, "x:1,49,40", "x:2,30,40"),
    # The styles of two other converters (no TensorFlow or Paddle here).
    "tf2onnx_mobilenet_op13": (tf2onnx_mobilenet, 13, "input_1:1,96,96,3", "input_1:2,96,96,3"),
    "paddle_lcnet_op11": (paddle_lcnet, 11, "x:1,3,96,96", "x:2,3,64,80"),
    # After ONNX Runtime's transformer optimiser: contrib operators at opset 12.
    "ort_transformers_bert_op12": (ort_transformers_bert, 12,
                                   "input_ids:1,128;segment_ids:1,128;input_mask:1,128",
                                   "input_ids:2,40;segment_ids:2,40;input_mask:2,40"),
    # ONNX's experimental operators (removed at opset 10), as 2018's
    # converters wrote them and ONNX Runtime still runs them.
    "winml_tiny_yolov2_op8": (winml_tiny_yolov2, 8, "image:1,3,416,416", "image:2,3,416,416"),
    "coreml_experimental_op7": (coreml_experimental, 7, "x:1,3,32,32", "x:2,3,40,48"),
}

# name -> (constructor, example input shape, opset, dynamic axes, --input_shape, other shape, script)
MODELS = {
    "fpn_op9": (Fpn, (1, 3, 64, 64), 9, DYN_IMAGE, "x:1,3,64,64", "x:2,3,96,128", False),
    "fpn_op11": (Fpn, (1, 3, 64, 64), 11, DYN_IMAGE, "x:1,3,64,64", "x:2,3,96,128", False),
    "fpn_op13": (Fpn, (1, 3, 64, 64), 13, DYN_IMAGE, "x:1,3,64,64", "x:2,3,96,128", False),
    "mobilenet_v3_small_op9": (mobilenet_v3_small, (1, 3, 96, 96), 9, DYN_IMAGE, "x:1,3,96,96", "x:2,3,128,160",
                               False),
    "mobilenet_v3_small_op13": (mobilenet_v3_small, (1, 3, 96, 96), 13, DYN_IMAGE, "x:1,3,96,96", "x:2,3,128,160",
                                False),
    "formula_acts_op13": (FormulaActs, (1, 3, 32, 32), 13, DYN_IMAGE, "x:1,3,32,32", "x:2,3,48,40", False),
    "cbam_resnet_op13": (CbamResNet, (1, 3, 128, 128), 13, DYN_IMAGE, "x:1,3,128,128", "x:2,3,96,80", False),
    # A detector of any resolution (multiples of 32) with its box decoding.
    "yolo_detect_op13": (YoloDetect, (1, 3, 128, 160), 13, DYN_IMAGE, "x:1,3,128,160", "x:2,3,96,128", False),
    # Recurrent layers: a text recogniser at opset 9 (its width the LSTM's
    # sequence length) and a keyword spotter at opset 13.
    "crnn_lstm_op9": (Crnn, (1, 1, 32, 128), 9, {"x": {0: "N", 3: "W"}}, "x:1,1,32,128", "x:2,1,32,96", False),
    "keyword_gru_op13": (KeywordGru, (1, 49, 40), 13, {"x": {0: "N", 1: "T"}}, "x:1,49,40", "x:2,30,40", False),
    # Activations and normalisations in the forms ONNX Runtime does not fuse.
    "mobilenet_v3_formula_op13": (mobilenet_v3_formula, (1, 3, 224, 224), 13, DYN_IMAGE, "x:1,3,224,224",
                                  "x:2,3,160,192", False),
    "mobilenet_v3_formula_op11": (mobilenet_v3_formula, (1, 3, 224, 224), 11, DYN_IMAGE, "x:1,3,224,224",
                                  "x:2,3,160,192", False),
    # The same in float16 (weights, inputs and outputs), as models are
    # converted to half precision for deployment; ONNX Runtime's CPU
    # provider computes it in float32 between casts.
    "mobilenet_v3_formula_fp16_op13": (mobilenet_v3_formula, (1, 3, 224, 224), 13, DYN_IMAGE, "x:1,3,224,224",
                                       "x:2,3,160,192", False),
    # The same with its activation modules exported as model-local functions
    # (torch.onnx's export_modules_as_functions, opset 15 and later): each
    # activation is a call of a function, inlined by rlflow at import.
    "mobilenet_v3_formula_functions_op15": (mobilenet_v3_formula, (1, 3, 224, 224), 15, DYN_IMAGE, "x:1,3,224,224",
                                            "x:2,3,160,192", False),
    "formula_variants_op13": (FormulaVariants, (1, 3, 16, 16), 13, DYN_IMAGE, "x:1,3,16,16", "x:2,3,24,20", False),
    "hardswish_scale_first_op13": (HardSwishScaleFirst, (1, 3, 64, 64), 13, DYN_IMAGE, "x:1,3,64,64",
                                   "x:2,3,48,40", False),
    "encoder_formula_op13": (FormulaEncoder, (1, 64, 32), 13, {"x": {0: "N", 1: "S"}}, "x:1,64,32", "x:2,48,32",
                             False),
    "post_norm_encoder_op17": (PostNormEncoder, (1, 64, 32), 17, {"x": {0: "N", 1: "S"}}, "x:1,64,32", "x:2,48,32",
                               False),
    # The same below opset 17: torch writes each nn.LayerNorm out (ReduceMean,
    # Sub, Pow, ReduceMean, Add, Sqrt, Div) with its scale and shift as a
    # Mul and an Add after it.
    "post_norm_encoder_op13": (PostNormEncoder, (1, 64, 32), 13, {"x": {0: "N", 1: "S"}}, "x:1,64,32", "x:2,48,32",
                               False),
    # Static height and width (window arithmetic on them), dynamic batch.
    "swin_tiny_op13": (swin_tiny, (1, 3, 112, 112), 13, {"x": {0: "N"}}, "x:1,3,112,112", "x:2,3,112,112", False),
    "control_flow_op13": (ControlFlow, (1, 3, 16, 16), 13, DYN_IMAGE, "x:1,3,16,16", "x:2,3,24,20", True),
    # A recurrent layer written as a loop over time (torch.jit.script).
    "scripted_elman_op13": (ScriptedElman, (1, 49, 40), 13, {"x": {0: "N", 1: "T"}}, "x:1,49,40", "x:2,30,40",
                            True),
    "scripted_gru_cell_op13": (ScriptedGruCell, (1, 49, 40), 13, {"x": {0: "N", 1: "T"}}, "x:1,49,40",
                               "x:2,30,40", True),
    "scripted_viewed_rnn_op13": (ScriptedViewedRnn, (1, 49, 40), 13, {"x": {0: "N", 1: "T"}}, "x:1,49,40",
                                 "x:2,30,40", True),
    # SAME padding computed from the input size (an odd one given, an uneven
    # pad), as TF-ported models write it; right at another size only if the
    # arithmetic on H and W is not folded at the given one.
    "tf_same_pad_op11": (TfSamePad, (1, 3, 225, 225), 11, DYN_IMAGE, "x:1,3,225,225", "x:2,3,200,301", False),
    # PReLU with a slope per channel after each conv (face-recognition
    # networks), a fixed 112 x 112 face crop and a dynamic batch.
    "prelu_facenet_op13": (PReluFaceNet, (1, 3, 112, 112), 13, {"x": {0: "N"}}, "x:1,3,112,112", "x:2,3,112,112",
                           False),
    # PReLU with one shared slope (SRGAN's generator), dynamic batch and size.
    "cyclegan_reflect_op13": (CycleGanReflect, (1, 3, 64, 64), 13, DYN_IMAGE, "x:1,3,64,64", "x:2,3,48,40", False),
    "prelu_srresnet_op13": (SrResNetPRelu, (1, 3, 64, 64), 13, DYN_IMAGE, "x:1,3,64,64", "x:2,3,48,40", False),
    # PReLU after Conv1d (speech separation: Conv-TasNet), dynamic batch and
    # length (half a second at 16 kHz).
    "prelu_convtasnet_op13": (ConvTasNetPRelu, (1, 1, 8000), 13, {"x": {0: "N", 2: "L"}}, "x:1,1,8000", "x:2,1,6400",
                              False),
    # Mish after every conv (YOLOv4-style CSPDarknet), dynamic batch and size.
    "mish_cspdarknet_op13": (CspDarknetMish, (1, 3, 128, 128), 13, DYN_IMAGE, "x:1,3,128,128", "x:2,3,96,112",
                             False),
    # RepVGG and ACNet blocks in their training form (branches summed),
    # dynamic batch and size.
    "repvgg_train_form_op13": (RepVggTrainForm, (1, 3, 128, 128), 13, DYN_IMAGE, "x:1,3,128,128", "x:2,3,96,112",
                               False),
    # MobileOne blocks in their training form (depthwise and pointwise
    # branches summed), dynamic batch and size.
    "mobileone_train_form_op13": (MobileOneTrainForm, (1, 3, 128, 128), 13, DYN_IMAGE, "x:1,3,128,128",
                                  "x:2,3,96,112", False),
    # NAFNet-style restoration U-Net: layer norms over channels written out
    # (NAFNet, SAM, ConvNeXt), dynamic batch and size.
    "nafnet_layernorm2d_op13": (NafNetLayerNorm2d, (1, 3, 64, 64), 13, DYN_IMAGE, "x:1,3,64,64", "x:2,3,48,40",
                                False),
    # Weights in an external data file, as torch.onnx writes models over 2 GB
    # and onnx.save_model(save_as_external_data=True) writes any: here
    # "<name>.weights" beside the model (tensors of 1 KiB and more).
    "fpn_op11_external": (Fpn, (1, 3, 64, 64), 11, DYN_IMAGE, "x:1,3,64,64", "x:2,3,96,128", False),
}


def export_model(name, out_dir, seed):
    """One MODELS entry, torch.onnx-exported into out_dir."""
    make, shape, opset, dynamic, given, other, script = MODELS[name]
    torch.manual_seed(seed)
    model = make().eval()
    if script:
        model = torch.jit.script(model)
    x = torch.randn(*shape)
    path = os.path.join(out_dir, name + ".onnx")
    with torch.no_grad():
        functions = {HardSwishByFormula, HardSigmoidByFormula} if "_functions" in name else False
        torch.onnx.export(model, (x,), path, opset_version=opset, input_names=["x"], output_names=["y"],
                          dynamic_axes=dict(dynamic, y={0: "N"}), do_constant_folding=False,
                          export_modules_as_functions=functions)
    halve(name, path)
    externalise(name, path)


def externalise(name, path):
    """A model whose name ends in _external gets its weights in one data
    file beside it, "<name>.weights"."""
    if name.endswith("_external"):
        import onnx
        m = onnx.load(path)
        onnx.save_model(m, path, save_as_external_data=True, all_tensors_to_one_file=True,
                        location=name + ".weights", size_threshold=1024)


def halve(name, path):
    """A model whose name has _fp16 in it is converted to float16 as
    converters to half precision write models for deployment
    (onnxconverter-common's convert_float_to_float16 with keep_io_types
    false): weights, constants, Cast targets, inputs and outputs float16,
    except the inputs ONNX requires in float32 (Resize's roi and scales)."""
    if "_fp16" not in name:
        return
    import numpy as np
    import onnx
    from onnx import TensorProto, numpy_helper
    m = onnx.load(path)
    g = m.graph
    keep = set()  # tensors that must stay float32
    for n in g.node:
        if n.op_type == "Resize":
            keep.update(n.input[1:3])
        if n.op_type == "Upsample":
            keep.update(n.input[1:2])

    def half(t):
        if t.data_type == TensorProto.FLOAT and t.name not in keep:
            # Clipped to float16's finite range, as the converters do (a
            # mask's float32 lowest value becomes float16's).
            a = np.clip(numpy_helper.to_array(t), -65504, 65504).astype(np.float16)
            t.CopyFrom(numpy_helper.from_array(a, t.name))

    for t in g.initializer:
        half(t)
    for n in g.node:
        if n.op_type == "Constant" and not set(n.output) & keep:
            for a in n.attribute:
                if a.name == "value":
                    half(a.t)
        for a in n.attribute:
            if n.op_type == "Cast" and a.name == "to" and a.i == TensorProto.FLOAT:
                a.i = TensorProto.FLOAT16
            if n.op_type == "ConstantOfShape" and a.name == "value":
                half(a.t)
    for v in list(g.input) + list(g.output):
        if v.type.tensor_type.elem_type == TensorProto.FLOAT:
            v.type.tensor_type.elem_type = TensorProto.FLOAT16
    del g.value_info[:]
    onnx.checker.check_model(m, full_check=True)
    onnx.save(m, path)


def isolated(fn, *args):
    """fn(*args) in a forked copy of this process, again if it dies by a
    signal: torch 1.13's export_modules_as_functions crashes (SIGSEGV) in
    about one export in four here, at random (its modules are ordered by
    id-based hashes, which change from process to process; the written
    function names change with them), and the crash took the whole corpus
    with it. Five tries, the first forked, the others in new processes
    (spawned: a fork has its parent's memory layout, so the same hashes and
    the same crash); an export that fails otherwise fails the build."""
    for attempt in range(5):
        child = multiprocessing.get_context("fork" if attempt == 0 else "spawn").Process(target=fn, args=args)
        child.start()
        child.join()
        if child.exitcode == 0:
            return
        if child.exitcode > 0:
            break
        print("export %s%r died by signal %d; trying again" % (fn.__name__, args, -child.exitcode), flush=True)
    sys.exit("export failed in %s%r (exit code %s)" % (fn.__name__, args, child.exitcode))


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out_dir", required=True)
    parser.add_argument("--models", default=",".join(list(MODELS) + list(ONNX_MODELS) + list(EXPORTED_MODELS)))
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    torch.set_num_threads(1)
    manifest = []
    for name in args.models.split(","):
        if name in ONNX_MODELS:
            import onnx
            build, opset, given, other = ONNX_MODELS[name]
            onnx.save(build(opset, args.seed), os.path.join(args.out_dir, name + ".onnx"))
            manifest.append("%s %s %s" % (name, given, other))
            print("built", name, "opset", opset, flush=True)
            continue
        if name in EXPORTED_MODELS or name in EXTRA_MODELS:
            export, opset, given, other = EXPORTED_MODELS.get(name) or EXTRA_MODELS[name]
            isolated(export, os.path.join(args.out_dir, name + ".onnx"), opset, args.seed)
            halve(name, os.path.join(args.out_dir, name + ".onnx"))
            externalise(name, os.path.join(args.out_dir, name + ".onnx"))
        else:
            _, _, opset, _, given, other, _ = MODELS[name]
            isolated(export_model, name, args.out_dir, args.seed)
        manifest.append("%s %s %s" % (name, given, other))
        print("exported", name, "opset", opset, flush=True)
    with open(os.path.join(args.out_dir, "models.txt"), "w") as f:
        f.write("\n".join(manifest) + "\n")


if __name__ == "__main__":
    main()
