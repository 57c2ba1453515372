#include "zoo/zoo.h"

#include <cmath>

#include "core/error.h"
#include "core/graph_builder.h"

namespace rlflow::zoo {
namespace {

AttributeMap Attrs(std::initializer_list<std::pair<const std::string, Attribute>> list) { return AttributeMap(list); }

// CNN building blocks that track channel counts.
class Cnn {
 public:
  explicit Cnn(uint64_t seed, const std::string& name) : b_(seed, 17, name) {}
  GraphBuilder& b() { return b_; }

  ValueId Conv(ValueId x, int cin, int cout, std::pair<int, int> k, std::pair<int, int> stride, std::pair<int, int> pad,
               int groups = 1, bool bias = false) {
    std::string name = b_.Fresh("conv");
    float std = std::sqrt(2.0f / static_cast<float>((cin / groups) * k.first * k.second));
    ValueId w = b_.Weight(name + ".weight", {cout, cin / groups, k.first, k.second}, std);
    std::vector<ValueId> in = {x, w};
    if (bias) in.push_back(b_.Weight(name + ".bias", {cout}, 0.05f));
    return b_.Op("Conv", in,
                 Attrs({{"kernel_shape", Attribute::Ints({k.first, k.second})},
                        {"strides", Attribute::Ints({stride.first, stride.second})},
                        {"pads", Attribute::Ints({pad.first, pad.second, pad.first, pad.second})},
                        {"dilations", Attribute::Ints({1, 1})},
                        {"group", Attribute::Int(groups)}}),
                 name);
  }
  ValueId Conv(ValueId x, int cin, int cout, int k, int stride, int pad, int groups = 1, bool bias = false) {
    return Conv(x, cin, cout, {k, k}, {stride, stride}, {pad, pad}, groups, bias);
  }
  ValueId BN(ValueId x, int c, float eps = 1e-5f) {
    std::string name = b_.Fresh("bn");
    ValueId scale = b_.Uniform(name + ".weight", {c}, 0.8f, 1.2f);
    ValueId shift = b_.Weight(name + ".bias", {c}, 0.05f);
    ValueId mean = b_.Weight(name + ".running_mean", {c}, 0.05f);
    ValueId var = b_.Uniform(name + ".running_var", {c}, 0.8f, 1.2f);
    return b_.Op("BatchNormalization", {x, scale, shift, mean, var}, Attrs({{"epsilon", Attribute::Float(eps)}}), name);
  }
  ValueId Relu(ValueId x) { return b_.Op("Relu", {x}); }
  ValueId ConvBnRelu(ValueId x, int cin, int cout, std::pair<int, int> k, std::pair<int, int> stride,
                     std::pair<int, int> pad, float eps = 1e-5f) {
    return Relu(BN(Conv(x, cin, cout, k, stride, pad), cout, eps));
  }
  ValueId ConvBnRelu(ValueId x, int cin, int cout, int k, int stride = 1, int pad = 0, float eps = 1e-5f) {
    return ConvBnRelu(x, cin, cout, {k, k}, {stride, stride}, {pad, pad}, eps);
  }
  ValueId MaxPool(ValueId x, int k, int s, int p, bool ceil = false) {
    return b_.Op("MaxPool", {x},
                 Attrs({{"kernel_shape", Attribute::Ints({k, k})},
                        {"strides", Attribute::Ints({s, s})},
                        {"pads", Attribute::Ints({p, p, p, p})},
                        {"ceil_mode", Attribute::Int(ceil ? 1 : 0)}}));
  }
  ValueId AvgPool(ValueId x, int k, int s, int p, bool count_include_pad) {
    return b_.Op("AveragePool", {x},
                 Attrs({{"kernel_shape", Attribute::Ints({k, k})},
                        {"strides", Attribute::Ints({s, s})},
                        {"pads", Attribute::Ints({p, p, p, p})},
                        {"count_include_pad", Attribute::Int(count_include_pad ? 1 : 0)}}));
  }
  ValueId Concat(const std::vector<ValueId>& xs) { return b_.Op("Concat", xs, Attrs({{"axis", Attribute::Int(1)}})); }
  ValueId Classifier(ValueId x, int cin, int classes) {
    ValueId pooled = b_.Op("GlobalAveragePool", {x});
    ValueId flat = b_.Op("Flatten", {pooled}, Attrs({{"axis", Attribute::Int(1)}}));
    ValueId w = b_.Weight("fc.weight", {classes, cin}, 1.0f / std::sqrt(static_cast<float>(cin)));
    ValueId bias = b_.Weight("fc.bias", {classes}, 0.01f);
    return b_.Op("Gemm", {flat, w, bias}, Attrs({{"transB", Attribute::Int(1)}}), "fc");
  }

 private:
  GraphBuilder b_;
};

// ---- ResNet / ResNeXt (torchvision layout) ----
ValueId BasicBlock(Cnn& n, ValueId x, int inplanes, int planes, int stride) {
  ValueId y = n.Relu(n.BN(n.Conv(x, inplanes, planes, 3, stride, 1), planes));
  y = n.BN(n.Conv(y, planes, planes, 3, 1, 1), planes);
  ValueId identity = x;
  if (stride != 1 || inplanes != planes) identity = n.BN(n.Conv(x, inplanes, planes, 1, stride, 0), planes);
  return n.Relu(n.b().Op("Add", {y, identity}));
}

ValueId Bottleneck(Cnn& n, ValueId x, int inplanes, int planes, int stride, int groups, int base_width) {
  int width = planes * base_width / 64 * groups;
  ValueId y = n.Relu(n.BN(n.Conv(x, inplanes, width, 1, 1, 0), width));
  y = n.Relu(n.BN(n.Conv(y, width, width, 3, stride, 1, groups), width));
  y = n.BN(n.Conv(y, width, planes * 4, 1, 1, 0), planes * 4);
  ValueId identity = x;
  if (stride != 1 || inplanes != planes * 4) identity = n.BN(n.Conv(x, inplanes, planes * 4, 1, stride, 0), planes * 4);
  return n.Relu(n.b().Op("Add", {y, identity}));
}

Graph BuildResNet(const std::string& name, bool bottleneck, std::vector<int> blocks, int groups, int base_width,
                  uint64_t seed) {
  Cnn n(seed, name);
  ValueId x = n.b().Input("input", {1, 3, 224, 224});
  ValueId y = n.MaxPool(n.ConvBnRelu(x, 3, 64, 7, 2, 3), 3, 2, 1);
  int inplanes = 64;
  const int planes_per_stage[4] = {64, 128, 256, 512};
  for (int stage = 0; stage < 4; ++stage) {
    int planes = planes_per_stage[stage];
    for (int i = 0; i < blocks[stage]; ++i) {
      int stride = (stage > 0 && i == 0) ? 2 : 1;
      if (bottleneck) {
        y = Bottleneck(n, y, inplanes, planes, stride, groups, base_width);
        inplanes = planes * 4;
      } else {
        y = BasicBlock(n, y, inplanes, planes, stride);
        inplanes = planes;
      }
    }
  }
  return n.b().Build({n.Classifier(y, inplanes, 1000)});
}

// ---- SqueezeNet 1.1 ----
ValueId Fire(Cnn& n, ValueId x, int cin, int squeeze, int e1, int e3) {
  ValueId s = n.Relu(n.Conv(x, cin, squeeze, 1, 1, 0, 1, true));
  ValueId a = n.Relu(n.Conv(s, squeeze, e1, 1, 1, 0, 1, true));
  ValueId b = n.Relu(n.Conv(s, squeeze, e3, 3, 1, 1, 1, true));
  return n.Concat({a, b});
}

// ---- Inception V3 (torchvision layout, no aux logits) ----
constexpr float kInceptionEps = 1e-3f;
ValueId Basic(Cnn& n, ValueId x, int cin, int cout, std::pair<int, int> k, std::pair<int, int> s = {1, 1},
              std::pair<int, int> p = {0, 0}) {
  return n.ConvBnRelu(x, cin, cout, k, s, p, kInceptionEps);
}
ValueId Basic(Cnn& n, ValueId x, int cin, int cout, int k, int s = 1, int p = 0) {
  return Basic(n, x, cin, cout, {k, k}, {s, s}, {p, p});
}

ValueId InceptionA(Cnn& n, ValueId x, int cin, int pool_features) {
  ValueId b1 = Basic(n, x, cin, 64, 1);
  ValueId b5 = Basic(n, Basic(n, x, cin, 48, 1), 48, 64, 5, 1, 2);
  ValueId b3 = Basic(n, Basic(n, Basic(n, x, cin, 64, 1), 64, 96, 3, 1, 1), 96, 96, 3, 1, 1);
  ValueId bp = Basic(n, n.AvgPool(x, 3, 1, 1, true), cin, pool_features, 1);
  return n.Concat({b1, b5, b3, bp});
}

ValueId InceptionB(Cnn& n, ValueId x, int cin) {
  ValueId b3 = Basic(n, x, cin, 384, 3, 2);
  ValueId bd = Basic(n, Basic(n, Basic(n, x, cin, 64, 1), 64, 96, 3, 1, 1), 96, 96, 3, 2);
  ValueId bp = n.MaxPool(x, 3, 2, 0);
  return n.Concat({b3, bd, bp});
}

ValueId InceptionC(Cnn& n, ValueId x, int cin, int c7) {
  ValueId b1 = Basic(n, x, cin, 192, 1);
  ValueId b7 = Basic(n, x, cin, c7, 1);
  b7 = Basic(n, b7, c7, c7, {1, 7}, {1, 1}, {0, 3});
  b7 = Basic(n, b7, c7, 192, {7, 1}, {1, 1}, {3, 0});
  ValueId bd = Basic(n, x, cin, c7, 1);
  bd = Basic(n, bd, c7, c7, {7, 1}, {1, 1}, {3, 0});
  bd = Basic(n, bd, c7, c7, {1, 7}, {1, 1}, {0, 3});
  bd = Basic(n, bd, c7, c7, {7, 1}, {1, 1}, {3, 0});
  bd = Basic(n, bd, c7, 192, {1, 7}, {1, 1}, {0, 3});
  ValueId bp = Basic(n, n.AvgPool(x, 3, 1, 1, true), cin, 192, 1);
  return n.Concat({b1, b7, bd, bp});
}

ValueId InceptionD(Cnn& n, ValueId x, int cin) {
  ValueId b3 = Basic(n, Basic(n, x, cin, 192, 1), 192, 320, 3, 2);
  ValueId b7 = Basic(n, x, cin, 192, 1);
  b7 = Basic(n, b7, 192, 192, {1, 7}, {1, 1}, {0, 3});
  b7 = Basic(n, b7, 192, 192, {7, 1}, {1, 1}, {3, 0});
  b7 = Basic(n, b7, 192, 192, 3, 2);
  ValueId bp = n.MaxPool(x, 3, 2, 0);
  return n.Concat({b3, b7, bp});
}

ValueId InceptionE(Cnn& n, ValueId x, int cin) {
  ValueId b1 = Basic(n, x, cin, 320, 1);
  ValueId b3 = Basic(n, x, cin, 384, 1);
  b3 = n.Concat({Basic(n, b3, 384, 384, {1, 3}, {1, 1}, {0, 1}), Basic(n, b3, 384, 384, {3, 1}, {1, 1}, {1, 0})});
  ValueId bd = Basic(n, Basic(n, x, cin, 448, 1), 448, 384, 3, 1, 1);
  bd = n.Concat({Basic(n, bd, 384, 384, {1, 3}, {1, 1}, {0, 1}), Basic(n, bd, 384, 384, {3, 1}, {1, 1}, {1, 0})});
  ValueId bp = Basic(n, n.AvgPool(x, 3, 1, 1, true), cin, 192, 1);
  return n.Concat({b1, b3, bd, bp});
}

// ---- transformer pieces ----
class Tx {
 public:
  Tx(uint64_t seed, const std::string& name, const TransformerConfig& c) : b_(seed, 17, name), c_(c) {}
  GraphBuilder& b() { return b_; }

  ValueId Linear(ValueId x, int in, int out, const std::string& name) {
    ValueId w = b_.Weight(name + ".weight", {in, out}, 0.02f);
    ValueId bias = b_.Weight(name + ".bias", {out}, 0.02f);
    return b_.Op("Add", {b_.Op("MatMul", {x, w}), bias});
  }
  ValueId LayerNorm(ValueId x, const std::string& name) {
    ValueId g = b_.Uniform(name + ".weight", {c_.hidden}, 0.8f, 1.2f);
    ValueId bias = b_.Weight(name + ".bias", {c_.hidden}, 0.02f);
    return b_.Op("LayerNormalization", {x, g, bias},
                 Attrs({{"axis", Attribute::Int(-1)}, {"epsilon", Attribute::Float(1e-12f)}}), name);
  }
  ValueId Gelu(ValueId x) {
    // x * 0.5 * (1 + erf(x / sqrt(2))), as exported by PyTorch.
    ValueId e = b_.Op("Erf", {b_.Op("Div", {x, b_.ConstFloat(std::sqrt(2.0f))})});
    ValueId one_plus = b_.Op("Add", {e, b_.ConstFloat(1.0f)});
    return b_.Op("Mul", {b_.Op("Mul", {x, one_plus}), b_.ConstFloat(0.5f)});
  }
  // x: [1, S, H] -> [1, S, H]
  ValueId Attention(ValueId x, int seq, const std::string& name) {
    int hd = c_.hidden / c_.heads;
    auto heads = [&](ValueId t, std::vector<int64_t> perm) {
      ValueId r = b_.Op("Reshape", {t, b_.ConstInts({1, seq, c_.heads, hd})});
      return b_.Op("Transpose", {r}, Attrs({{"perm", Attribute::Ints(perm)}}));
    };
    ValueId q = heads(Linear(x, c_.hidden, c_.hidden, name + ".query"), {0, 2, 1, 3});
    ValueId k = heads(Linear(x, c_.hidden, c_.hidden, name + ".key"), {0, 2, 3, 1});
    ValueId v = heads(Linear(x, c_.hidden, c_.hidden, name + ".value"), {0, 2, 1, 3});
    ValueId scores = b_.Op("Div", {b_.Op("MatMul", {q, k}), b_.ConstFloat(std::sqrt(static_cast<float>(hd)))});
    ValueId probs = b_.Op("Softmax", {scores}, Attrs({{"axis", Attribute::Int(-1)}}));
    ValueId ctx = b_.Op("Transpose", {b_.Op("MatMul", {probs, v})}, Attrs({{"perm", Attribute::Ints({0, 2, 1, 3})}}));
    ctx = b_.Op("Reshape", {ctx, b_.ConstInts({1, seq, c_.hidden})});
    return Linear(ctx, c_.hidden, c_.hidden, name + ".output");
  }
  ValueId Mlp(ValueId x, const std::string& name) {
    return Linear(Gelu(Linear(x, c_.hidden, c_.ffn, name + ".fc1")), c_.ffn, c_.hidden, name + ".fc2");
  }

 private:
  GraphBuilder b_;
  TransformerConfig c_;
};

}  // namespace

Graph ResNet(int depth, uint64_t seed) {
  if (depth == 18) return BuildResNet("resnet18", false, {2, 2, 2, 2}, 1, 64, seed);
  if (depth == 50) return BuildResNet("resnet50", true, {3, 4, 6, 3}, 1, 64, seed);
  Fail("ResNet depth ", depth, " is not in the zoo (18 or 50)");
}

Graph ResNeXt50_32x4d(uint64_t seed) { return BuildResNet("resnext50_32x4d", true, {3, 4, 6, 3}, 32, 4, seed); }

Graph SqueezeNet1_1(uint64_t seed) {
  Cnn n(seed, "squeezenet1_1");
  ValueId x = n.b().Input("input", {1, 3, 224, 224});
  ValueId y = n.Relu(n.Conv(x, 3, 64, 3, 2, 0, 1, true));
  y = n.MaxPool(y, 3, 2, 0, true);
  y = Fire(n, y, 64, 16, 64, 64);
  y = Fire(n, y, 128, 16, 64, 64);
  y = n.MaxPool(y, 3, 2, 0, true);
  y = Fire(n, y, 128, 32, 128, 128);
  y = Fire(n, y, 256, 32, 128, 128);
  y = n.MaxPool(y, 3, 2, 0, true);
  y = Fire(n, y, 256, 48, 192, 192);
  y = Fire(n, y, 384, 48, 192, 192);
  y = Fire(n, y, 384, 64, 256, 256);
  y = Fire(n, y, 512, 64, 256, 256);
  y = n.Relu(n.Conv(y, 512, 1000, 1, 1, 0, 1, true));
  ValueId pooled = n.b().Op("GlobalAveragePool", {y});
  return n.b().Build({n.b().Op("Flatten", {pooled}, Attrs({{"axis", Attribute::Int(1)}}))});
}

Graph InceptionV3(uint64_t seed) {
  Cnn n(seed, "inception_v3");
  ValueId x = n.b().Input("input", {1, 3, 299, 299});
  ValueId y = Basic(n, x, 3, 32, 3, 2);
  y = Basic(n, y, 32, 32, 3);
  y = Basic(n, y, 32, 64, 3, 1, 1);
  y = n.MaxPool(y, 3, 2, 0);
  y = Basic(n, y, 64, 80, 1);
  y = Basic(n, y, 80, 192, 3);
  y = n.MaxPool(y, 3, 2, 0);
  y = InceptionA(n, y, 192, 32);
  y = InceptionA(n, y, 256, 64);
  y = InceptionA(n, y, 288, 64);
  y = InceptionB(n, y, 288);
  y = InceptionC(n, y, 768, 128);
  y = InceptionC(n, y, 768, 160);
  y = InceptionC(n, y, 768, 160);
  y = InceptionC(n, y, 768, 192);
  y = InceptionD(n, y, 768);
  y = InceptionE(n, y, 1280);
  y = InceptionE(n, y, 2048);
  return n.b().Build({n.Classifier(y, 2048, 1000)});
}

Graph Bert(const TransformerConfig& c, uint64_t seed) {
  Tx t(seed, "bert_base", c);
  GraphBuilder& b = t.b();
  ValueId ids = b.Input("input_ids", {1, c.seq}, DType::kInt64);
  ValueId word = b.Weight("embeddings.word", {c.vocab, c.hidden}, 0.02f);
  ValueId pos = b.Weight("embeddings.position", {c.seq, c.hidden}, 0.02f);
  ValueId x = b.Op("Add", {b.Op("Gather", {word, ids}, Attrs({{"axis", Attribute::Int(0)}})), pos});
  x = t.LayerNorm(x, "embeddings.norm");
  for (int l = 0; l < c.layers; ++l) {
    std::string p = "layer" + std::to_string(l);
    x = t.LayerNorm(b.Op("Add", {x, t.Attention(x, c.seq, p + ".attention")}), p + ".attention.norm");
    x = t.LayerNorm(b.Op("Add", {x, t.Mlp(x, p + ".ffn")}), p + ".ffn.norm");
  }
  return b.Build({x});
}

Graph ViT(const TransformerConfig& c, uint64_t seed) {
  Tx t(seed, "vit_b_16", c);
  GraphBuilder& b = t.b();
  int grid = c.image / c.patch;
  int tokens = grid * grid + 1;
  ValueId img = b.Input("input", {1, 3, c.image, c.image});
  float std = std::sqrt(1.0f / static_cast<float>(3 * c.patch * c.patch));
  ValueId w = b.Weight("conv_proj.weight", {c.hidden, 3, c.patch, c.patch}, std);
  ValueId bias = b.Weight("conv_proj.bias", {c.hidden}, 0.02f);
  ValueId patches = b.Op(
      "Conv", {img, w, bias},
      Attrs({{"kernel_shape", Attribute::Ints({c.patch, c.patch})}, {"strides", Attribute::Ints({c.patch, c.patch})}}),
      "conv_proj");
  ValueId seq = b.Op("Reshape", {patches, b.ConstInts({1, c.hidden, grid * grid})});
  seq = b.Op("Transpose", {seq}, Attrs({{"perm", Attribute::Ints({0, 2, 1})}}));
  ValueId cls = b.Weight("class_token", {1, 1, c.hidden}, 0.02f);
  ValueId x = b.Op("Concat", {cls, seq}, Attrs({{"axis", Attribute::Int(1)}}));
  x = b.Op("Add", {x, b.Weight("pos_embedding", {1, tokens, c.hidden}, 0.02f)});
  for (int l = 0; l < c.layers; ++l) {
    std::string p = "encoder.layer" + std::to_string(l);
    x = b.Op("Add", {x, t.Attention(t.LayerNorm(x, p + ".ln_1"), tokens, p + ".attention")});
    x = b.Op("Add", {x, t.Mlp(t.LayerNorm(x, p + ".ln_2"), p + ".mlp")});
  }
  x = t.LayerNorm(x, "encoder.ln");
  ValueId first = b.Op("Gather", {x, b.Const(TensorData::ScalarInt64(0))}, Attrs({{"axis", Attribute::Int(1)}}));
  ValueId head_w = b.Weight("head.weight", {c.classes, c.hidden}, 0.02f);
  ValueId head_b = b.Weight("head.bias", {c.classes}, 0.02f);
  return b.Build({b.Op("Gemm", {first, head_w, head_b}, Attrs({{"transB", Attribute::Int(1)}}), "head")});
}

const std::vector<std::string>& ModelNames() {
  static const std::vector<std::string> names = {
#include "zoo/model_names.inc"  // from zoo/models.bzl, the one list
  };
  return names;
}

bool IsZooModel(const std::string& name) {
  for (const auto& n : ModelNames())
    if (n == name) return true;
  return false;
}

Graph Build(const std::string& name, uint64_t seed) {
  if (name == "inception_v3") return InceptionV3(seed);
  if (name == "resnet18") return ResNet(18, seed);
  if (name == "resnet50") return ResNet(50, seed);
  if (name == "resnext50_32x4d") return ResNeXt50_32x4d(seed);
  if (name == "squeezenet1_1") return SqueezeNet1_1(seed);
  if (name == "bert_base") return Bert(TransformerConfig{}, seed);
  if (name == "vit_b_16") return ViT(TransformerConfig{}, seed);
  Fail("'", name,
       "' is not a zoo model (known: inception_v3, resnet18, resnet50, resnext50_32x4d, squeezenet1_1, "
       "bert_base, vit_b_16)");
}

}  // namespace rlflow::zoo
