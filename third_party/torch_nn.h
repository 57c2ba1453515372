#pragma once
// The parts of libtorch's C++ API that the agents and world models use
// (modules, initialisers, Adam, gradient clipping, serialisation,
// factories), instead of <torch/torch.h>: measured on this machine, a
// translation unit that includes only these costs about 17 s of g++ -O2
// against 25 s for <torch/torch.h> (which also brings data loaders, JIT,
// FFT, linalg, sparse, special and every nn module and functional).
// A target whose sources include this header lists
// copts = TORCH_NN_COPTS (//third_party:pch.bzl): its files then load it
// precompiled (third_party/README.md).
#include <torch/nn/init.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/modules/rnn.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/adam.h>
#include <torch/serialize.h>
#include <torch/types.h>
#include <torch/utils.h>
