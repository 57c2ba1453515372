"""The model zoo's names: the one list. The C++ builders' ModelNames() is
generated from it (//zoo:model_names), the torch export covers exactly these,
and per-model tests are made from it."""

ZOO_MODELS = [
    "inception_v3",
    "resnet18",
    "resnet50",
    "resnext50_32x4d",
    "squeezenet1_1",
    "bert_base",
    "vit_b_16",
]
