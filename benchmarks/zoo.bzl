"""The zoo's model names (keep in sync with benchmarks/zoo/zoo.cc ModelNames())."""

ZOO_MODELS = [
    "inception_v3",
    "resnet18",
    "resnet50",
    "resnext50_32x4d",
    "squeezenet1_1",
    "bert_base",
    "vit_b_16",
]
