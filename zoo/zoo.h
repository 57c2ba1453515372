#pragma once
// The model zoo: C++ builders for the evaluation graphs of the source papers
// (batch 1, random weights from a seed). BatchNormalization stays explicit in
// the CNNs so that later rules can fold it.
#include <cstdint>
#include <string>
#include <vector>

#include "core/graph.h"

namespace rlflow::zoo {

// inception_v3, resnet18, resnet50, resnext50_32x4d, squeezenet1_1,
// bert_base, vit_b_16.
const std::vector<std::string>& ModelNames();
bool IsZooModel(const std::string& name);
// Throws rlflow::Error for an unknown name.
Graph Build(const std::string& name, uint64_t seed = 1);

Graph ResNet(int depth, uint64_t seed);  // 18 or 50
Graph ResNeXt50_32x4d(uint64_t seed);
Graph SqueezeNet1_1(uint64_t seed);
Graph InceptionV3(uint64_t seed);
// Transformer encoders. Defaults are BERT-Base (12 layers, hidden 768, 12
// heads, FFN 3072, sequence 128, vocabulary 30522) and ViT-Base/16.
struct TransformerConfig {
  int layers = 12;
  int hidden = 768;
  int heads = 12;
  int ffn = 3072;
  int seq = 128;
  int vocab = 30522;
  int image = 224;
  int patch = 16;
  int classes = 1000;
};
Graph Bert(const TransformerConfig& config, uint64_t seed);
Graph ViT(const TransformerConfig& config, uint64_t seed);

}  // namespace rlflow::zoo
