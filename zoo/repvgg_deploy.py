"""RepVGG-A0 re-parameterised by hand, as the model's own switch-to-deploy
step does (each block's branches folded into one 3x3 conv), from the seed
zoo/export_real.py exports repvgg_a0_train_form_op13 with: the reference that
rlflow's result is compared with (docs/figures/repvgg_reparam_2026-12-03.md).

    /usr/bin/python3 zoo/repvgg_deploy.py OUT.onnx
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_real import RepVggTrainForm  # noqa: E402


def fold(kernel, bn):
    """The kernel and bias of a conv (no bias) followed by batch norm `bn`."""
    scale = bn.weight / (bn.running_var + bn.eps).sqrt()
    return kernel * scale.reshape(-1, 1, 1, 1), bn.bias - bn.running_mean * scale


class Deploy(nn.Module):
    def __init__(self, trained):
        super().__init__()
        self.convs = nn.ModuleList()
        self.fc = trained.fc
        for block in trained.features:
            kernel, bias = fold(block.k3[0].weight, block.k3[1])
            k1, b1 = fold(block.k1[0].weight, block.k1[1])
            kernel, bias = kernel + F.pad(k1, [1, 1, 1, 1]), bias + b1
            if block.identity is not None:
                c = block.identity.num_features
                eye = torch.zeros(c, c, 3, 3)
                for i in range(c):
                    eye[i, i, 1, 1] = 1
                ki, bi = fold(eye, block.identity)
                kernel, bias = kernel + ki, bias + bi
            conv = nn.Conv2d(kernel.shape[1], kernel.shape[0], 3, block.k3[0].stride, 1)
            conv.weight.data, conv.bias.data = kernel.detach(), bias.detach()
            self.convs.append(conv)

    def forward(self, x):
        for conv in self.convs:
            x = torch.relu(conv(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def main():
    torch.manual_seed(1)  # export_real.py's default --seed
    trained = RepVggTrainForm((48, 48, 96, 192, 1280), (1, 2, 4, 14, 1), ac_blocks=0, classes=1000).eval()
    deploy = Deploy(trained).eval()
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        print("deploy form against training form: max |difference| %.3g (outputs up to %.3g)" %
              ((deploy(x) - trained(x)).abs().max().item(), trained(x).abs().max().item()))
        torch.onnx.export(deploy, (x,), sys.argv[1], opset_version=13, input_names=["x"], output_names=["y"])


if __name__ == "__main__":
    main()
