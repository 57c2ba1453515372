"""torchvision architectures beyond the zoo's, exported as a user would
(random weights: torchvision 0.14's constructors, no download), each with a
symbolic batch (segmentation models: batch, height and width), for trying
the optimiser on them by hand (docs/figures/torchvision_models_2026-12-02.md).

  /usr/bin/python3 zoo/export_torchvision.py [NAME,NAME,...]   # into the current directory
"""
import torch, torchvision, sys
torch.manual_seed(0)
M = torchvision.models
specs = {
 "efficientnet_b0": (lambda: M.efficientnet_b0(), (1,3,224,224), 13),
 "convnext_tiny": (lambda: M.convnext_tiny(), (1,3,224,224), 13),
 "shufflenet_v2": (lambda: M.shufflenet_v2_x1_0(), (1,3,224,224), 11),
 "densenet121": (lambda: M.densenet121(), (1,3,224,224), 9),
 "regnet_y_400mf": (lambda: M.regnet_y_400mf(), (1,3,224,224), 13),
 "mnasnet": (lambda: M.mnasnet1_0(), (1,3,224,224), 12),
 "googlenet": (lambda: M.googlenet(aux_logits=False, init_weights=True), (1,3,224,224), 10),
 "deeplabv3_mnv3": (lambda: M.segmentation.deeplabv3_mobilenet_v3_large(weights_backbone=None, num_classes=21, aux_loss=False), (1,3,256,256), 11),
 "lraspp": (lambda: M.segmentation.lraspp_mobilenet_v3_large(weights_backbone=None, num_classes=21), (1,3,256,256), 13),
 "vgg11_bn": (lambda: M.vgg11_bn(), (1,3,224,224), 7),
 "swin_t": (lambda: M.swin_t(), (1,3,224,224), 14),
 "maxvit_t": (lambda: M.maxvit_t(), (1,3,224,224), 14),
 "efficientnet_v2_s": (lambda: M.efficientnet_v2_s(), (1,3,224,224), 15),
 "squeezenet_op8": (lambda: M.squeezenet1_0(), (1,3,224,224), 8),
 "r3d_18": (lambda: M.video.r3d_18(), (1,3,8,112,112), 13),
}
names = sys.argv[1].split(",") if len(sys.argv) > 1 else list(specs)
for n in names:
    f, shp, op = specs[n]
    try:
        m = f().eval()
        x = torch.randn(*shp)
        dyn = {"x": {0: "N"}} if len(shp)==4 and n not in ("deeplabv3_mnv3","lraspp") else ({"x": {0:"N",2:"H",3:"W"}} if len(shp)==4 else {"x":{0:"N"}})
        torch.onnx.export(m, x, f"{n}.onnx", opset_version=op, input_names=["x"], dynamic_axes=dyn, do_constant_folding=True)
        print("ok", n, flush=True)
    except Exception as e:
        print("FAIL", n, type(e).__name__, str(e)[:200], flush=True)
