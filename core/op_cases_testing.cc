#include "core/op_cases_testing.h"

#include <cmath>
#include <limits>
#include <memory>

#include "core/tensor.h"

namespace rlflow::testing {
namespace {

using B = GraphBuilder;
AttributeMap A(std::initializer_list<std::pair<const std::string, Attribute>> l) { return AttributeMap(l); }
Attribute I(int64_t v) { return Attribute::Int(v); }
Attribute Is(std::vector<int64_t> v) { return Attribute::Ints(std::move(v)); }
Attribute F(float v) { return Attribute::Float(v); }
Attribute S(std::string v) { return Attribute::String(std::move(v)); }

}  // namespace

std::vector<OpCase> OpCases() {
  std::vector<OpCase> c;
  auto in = [](B& b, const std::string& n, Shape s) { return b.Input(n, s); };
  auto unary = [&](const std::string& op) {
    c.push_back({op, [op, in](B& b) { return b.Op(op, {in(b, op + "_x", {2, 3, 4})}); }});
  };
  for (const char* op : {"Relu", "Sigmoid", "Tanh", "Erf", "Exp", "Neg", "Abs", "Floor", "Ceil", "Identity"}) unary(op);
  c.push_back({"Sqrt", [in](B& b) { return b.Op("Sqrt", {b.Op("Abs", {in(b, "sqrt_x", {3, 5})})}); }});
  c.push_back({"Reciprocal", [in](B& b) {
                 return b.Op("Reciprocal", {b.Op("Add", {b.Op("Abs", {in(b, "rec_x", {3, 5})}), b.ConstFloat(0.5f)})});
               }});
  c.push_back({"Log", [in](B& b) {
                 return b.Op("Log", {b.Op("Add", {b.Op("Abs", {in(b, "log_x", {3, 5})}), b.ConstFloat(0.5f)})});
               }});
  for (const char* op : {"Add", "Sub", "Mul", "Max", "Min"}) {
    std::string o = op;
    c.push_back({o + "_broadcast", [o, in](B& b) {
                   return b.Op(o, {in(b, o + "_a", {2, 3, 4}), in(b, o + "_b", {3, 1})});
                 }});
  }
  // Divisors without zeros (1 + relu(x)).
  c.push_back({"Div_broadcast", [in](B& b) {
                 ValueId d = b.Op("Add", {b.Op("Relu", {in(b, "Div_b", {3, 1})}), b.ConstFloat(1.0f)});
                 return b.Op("Div", {in(b, "Div_a", {2, 3, 4}), d});
               }});
  c.push_back({"Div_scalar", [in](B& b) { return b.Op("Div", {in(b, "div_s_a", {2, 3}), b.ConstFloat(8.0f)}); }});
  // Mod: integers with either sign rule (negative dividends and divisors),
  // floats with fmod=1.
  for (int64_t fmod : {0, 1}) {
    c.push_back({"Mod_int_fmod" + std::to_string(fmod), [fmod](B& b) {
                   ValueId a = b.Input("mod_a" + std::to_string(fmod), {2, 3}, DType::kInt64);
                   ValueId d = b.ConstInts(std::vector<int64_t>{3, -4, 5}, Shape{3});
                   ValueId x = b.Op(
                       "Sub", {a, b.ConstInts(std::vector<int64_t>{7, 11, 13}, Shape{3})});  // some negative dividends
                   return b.Op("Mod", {x, d}, A({{"fmod", I(fmod)}}));
                 }});
  }
  c.push_back({"Mod_float", [in](B& b) {
                 return b.Op("Mod", {in(b, "modf_a", {2, 3}), b.ConstFloat(0.75f)}, A({{"fmod", I(1)}}));
               }});
  c.push_back({"LessOrEqual_GreaterOrEqual", [in](B& b) {
                 ValueId x = in(b, "le_x", {4, 5}), y = b.Op("Floor", {in(b, "le_y", {4, 5})});
                 ValueId fx = b.Op("Floor", {x});
                 return b.Op("Where",
                             {b.Op("LessOrEqual", {fx, y}), x, b.Op("Where", {b.Op("GreaterOrEqual", {y, x}), y, fx})});
               }});
  // Logical operators, and a mask (a bool output) through Not.
  for (const char* op : {"And", "Or", "Xor"}) {
    std::string o = op;
    c.push_back({o, [o](B& b) {
                   ValueId x = b.Input(o + "_a", {3, 4}, DType::kBool), y = b.Input(o + "_b", {4}, DType::kBool);
                   return b.Op("Not", {b.Op(o, {x, y})});
                 }});
  }
  // ScatterND: whole rows (k = 1), single elements (k = 2, a negative
  // index), and reduction add.
  c.push_back({"ScatterND_rows", [in](B& b) {
                 return b.Op("ScatterND",
                             {in(b, "snr_x", {4, 5, 3}), b.ConstInts(std::vector<int64_t>{2, 0}, Shape{2, 1}),
                              in(b, "snr_u", {2, 5, 3})});
               }});
  c.push_back({"ScatterND_elements", [in](B& b) {
                 return b.Op("ScatterND", {in(b, "sne_x", {4, 5, 3}),
                                           b.ConstInts(std::vector<int64_t>{1, 2, 3, 0, -1, 4}, Shape{3, 2}),
                                           in(b, "sne_u", {3, 3})});
               }});
  c.push_back({"ScatterND_add", [in](B& b) {
                 return b.Op("ScatterND",
                             {in(b, "sna_x", {4, 5}), b.ConstInts(std::vector<int64_t>{1, 3, 1}, Shape{3, 1}),
                              in(b, "sna_u", {3, 5})},
                             A({{"reduction", S("add")}}));
               }});
  c.push_back({"Pow", [in](B& b) { return b.Op("Pow", {in(b, "pow_a", {2, 3}), b.ConstFloat(3.0f)}); }});
  c.push_back({"Where_Equal_Less_Greater", [in](B& b) {
                 ValueId x = in(b, "where_x", {4, 5}), y = in(b, "where_y", {4, 5});
                 ValueId lt = b.Op("Less", {x, y});
                 ValueId pick = b.Op("Where", {lt, x, y});
                 ValueId gt = b.Op("Greater", {x, b.ConstFloat(0.0f)});
                 ValueId eq = b.Op("Equal", {b.Op("Floor", {x}), b.ConstFloat(0.0f)});
                 return b.Op("Add", {b.Op("Where", {gt, pick, b.Op("Neg", {pick})}), b.Op("Where", {eq, x, y})});
               }});
  c.push_back({"Clip", [in](B& b) {
                 return b.Op("Clip", {in(b, "clip_x", {3, 4}), b.ConstFloat(-0.5f), b.ConstFloat(0.7f)});
               }});
  c.push_back({"Clip_max_only", [in](B& b) {
                 return b.Op("Clip", {in(b, "clipm_x", {3, 4}), kNoValue, b.ConstFloat(0.2f)});
               }});
  c.push_back({"Clip_no_bounds", [in](B& b) { return b.Op("Clip", {in(b, "clipn_x", {3, 4})}); }});
  // Activations of other exporters, at their defaults and with attributes.
  for (const char* op :
       {"HardSigmoid", "HardSwish", "LeakyRelu", "Elu", "Selu", "Celu", "Softplus", "Softsign", "ThresholdedRelu"}) {
    std::string o = op;
    c.push_back({o, [o, in](B& b) {
                   // Scaled so that every piece of the function is hit.
                   return b.Op(o, {b.Op("Mul", {in(b, o + "_x", {2, 3, 5}), b.ConstFloat(4.0f)})});
                 }});
  }
  c.push_back({"HardSigmoid_attrs", [in](B& b) {
                 return b.Op("HardSigmoid", {b.Op("Mul", {in(b, "hsa_x", {3, 5}), b.ConstFloat(4.0f)})},
                             A({{"alpha", F(0.5f)}, {"beta", F(0.25f)}}));
               }});
  // Hard-swish's gate (1/6, 1/2: ATen's hardsigmoid in the kernel).
  c.push_back({"HardSigmoid_sixth", [in](B& b) {
                 return b.Op("HardSigmoid", {b.Op("Mul", {in(b, "hs6_x", {2, 3, 5}), b.ConstFloat(4.0f)})},
                             A({{"alpha", F(1.0f / 6.0f)}, {"beta", F(0.5f)}}));
               }});
  c.push_back({"LeakyRelu_attrs", [in](B& b) {
                 return b.Op("LeakyRelu", {in(b, "lra_x", {3, 5})}, A({{"alpha", F(0.3f)}}));
               }});
  c.push_back(
      {"Elu_Celu_attrs", [in](B& b) {
         ValueId x = in(b, "eca_x", {3, 5});
         return b.Op("Add", {b.Op("Elu", {x}, A({{"alpha", F(0.5f)}})), b.Op("Celu", {x}, A({{"alpha", F(2.0f)}}))});
       }});
  c.push_back({"Selu_attrs", [in](B& b) {
                 return b.Op("Selu", {in(b, "sea_x", {3, 5})}, A({{"alpha", F(1.5f)}, {"gamma", F(2.0f)}}));
               }});
  c.push_back({"ThresholdedRelu_attrs", [in](B& b) {
                 return b.Op("ThresholdedRelu", {in(b, "tra_x", {3, 5})}, A({{"alpha", F(-0.5f)}}));
               }});
  c.push_back({"PRelu_channel_slope", [in](B& b) {
                 return b.Op("PRelu", {in(b, "pr_x", {2, 3, 4, 5}), in(b, "pr_slope", {3, 1, 1})});
               }});
  // A slope per channel with the batch axis (ATen's prelu, as [C, 1, 1]) and
  // one along the last axis (not a channel slope: composed).
  c.push_back({"PRelu_rank4_channel_slope", [in](B& b) {
                 return b.Op("PRelu", {in(b, "pr4_x", {2, 3, 4, 5}), in(b, "pr4_slope", {1, 3, 1, 1})});
               }});
  c.push_back({"PRelu_last_axis_slope", [in](B& b) {
                 return b.Op("PRelu", {in(b, "prl_x", {2, 3, 4, 3}), in(b, "prl_slope", {3})});
               }});
  c.push_back({"PRelu_scalar_slope", [in](B& b) {
                 return b.Op("PRelu", {in(b, "prs_x", {2, 3}), b.ConstFloat(0.25f)});
               }});
  // Resize in the forms the executor runs (the others stay opaque).
  auto floats = [](B& b, std::vector<float> v) {
    return b.Const(TensorData::FromFloat(v, {static_cast<int64_t>(v.size())}));
  };
  c.push_back({"Resize_nearest_asymmetric_floor", [in, floats](B& b) {
                 return b.Op("Resize", {in(b, "rz1_x", {1, 2, 3, 4}), kNoValue, floats(b, {1, 1, 2, 2})},
                             A({{"mode", S("nearest")},
                                {"coordinate_transformation_mode", S("asymmetric")},
                                {"nearest_mode", S("floor")}}));
               }});
  c.push_back({"Resize_nearest_half_pixel_sizes", [in](B& b) {
                 return b.Op("Resize", {in(b, "rz2_x", {2, 2, 5, 4}), kNoValue, kNoValue, b.ConstInts({2, 2, 7, 9})},
                             A({{"mode", S("nearest")},
                                {"coordinate_transformation_mode", S("half_pixel")},
                                {"nearest_mode", S("round_prefer_ceil")}}));
               }});
  c.push_back({"Resize_linear_half_pixel", [in, floats](B& b) {
                 return b.Op("Resize", {in(b, "rz3_x", {1, 3, 5, 4}), kNoValue, floats(b, {1, 1, 1.5f, 2})},
                             A({{"mode", S("linear")}, {"coordinate_transformation_mode", S("half_pixel")}}));
               }});
  c.push_back({"Resize_linear_align_corners_down", [in](B& b) {
                 return b.Op("Resize", {in(b, "rz4_x", {1, 2, 6, 7}), kNoValue, kNoValue, b.ConstInts({1, 2, 4, 3})},
                             A({{"mode", S("linear")}, {"coordinate_transformation_mode", S("align_corners")}}));
               }});
  // The separable kernel: every other rounding, coordinate mode and rank.
  struct ResizeCase {
    std::string name;
    Shape x;
    std::vector<float> roi, scales;
    std::vector<int64_t> sizes;
    AttributeMap attrs;
  };
  const std::vector<ResizeCase> resize_cases = {
      {"nearest_onnx_defaults", {1, 2, 5, 7}, {}, {1, 1, 1.6f, 0.6f}, {}, A({})},
      {"nearest_tf_half_pixel_for_nn",
       {1, 2, 5, 4},
       {},
       {},
       {1, 2, 3, 10},
       A({{"coordinate_transformation_mode", S("tf_half_pixel_for_nn")}})},
      {"nearest_align_corners_ceil",
       {1, 1, 4, 4},
       {},
       {},
       {1, 1, 7, 5},
       A({{"coordinate_transformation_mode", S("align_corners")}, {"nearest_mode", S("ceil")}})},
      {"nearest_asymmetric_round_prefer_ceil_3d_batch",
       {2, 3, 4},
       {},
       {2, 1, 1.5f},
       {},
       A({{"coordinate_transformation_mode", S("asymmetric")}, {"nearest_mode", S("round_prefer_ceil")}})},
      {"linear_asymmetric",
       {1, 2, 3, 4},
       {},
       {1, 1, 2, 1.5f},
       {},
       A({{"mode", S("linear")}, {"coordinate_transformation_mode", S("asymmetric")}})},
      {"linear_align_corners_fractional",
       {1, 2, 4, 5},
       {},
       {1, 1, 0.6f, 0.7f},
       {},
       A({{"mode", S("linear")}, {"coordinate_transformation_mode", S("align_corners")}})},
      {"cubic_half_pixel", {1, 2, 5, 6}, {}, {1, 1, 1.5f, 0.7f}, {}, A({{"mode", S("cubic")}})},
      {"cubic_exclude_outside_a_half",
       {1, 1, 4, 5},
       {},
       {},
       {1, 1, 7, 3},
       A({{"mode", S("cubic")}, {"cubic_coeff_a", F(-0.5f)}, {"exclude_outside", I(1)}})},
      {"cubic_asymmetric",
       {1, 2, 4, 4},
       {},
       {1, 1, 2, 2},
       {},
       A({{"mode", S("cubic")}, {"coordinate_transformation_mode", S("asymmetric")}})},
      {"cubic_align_corners_fractional",
       {1, 1, 4, 4},
       {},
       {1, 1, 0.8f, 0.8f},
       {},
       A({{"mode", S("cubic")}, {"coordinate_transformation_mode", S("align_corners")}})},
      {"linear_tf_crop_and_resize",
       {1, 1, 4, 5},
       {0, 0, 0.4f, -0.2f, 1, 1, 1.2f, 0.7f},
       {},
       {1, 1, 3, 4},
       A({{"mode", S("linear")},
          {"coordinate_transformation_mode", S("tf_crop_and_resize")},
          {"extrapolation_value", F(10.0f)}})},
  };
  for (const ResizeCase& r : resize_cases)
    c.push_back({"Resize_" + r.name, [r, floats](B& b) {
                   ValueId x = b.Input("rz_" + r.name, r.x);
                   ValueId roi = r.roi.empty() ? kNoValue : floats(b, r.roi);
                   ValueId scales = r.scales.empty() ? kNoValue : floats(b, r.scales);
                   if (r.sizes.empty()) return b.Op("Resize", {x, roi, scales}, r.attrs);
                   return b.Op("Resize", {x, roi, scales, b.ConstInts(r.sizes)}, r.attrs);
                 }});
  // torch's nearest upsampling of an integer tensor (a segmentation mask):
  // the separable kernel (ATen's has no int32 kernel).
  c.push_back({"Resize_nearest_asymmetric_floor_int32", [floats](B& b) {
                 return b.Op("Resize",
                             {b.Input("rzi_x", {1, 2, 3, 4}, DType::kInt32), kNoValue, floats(b, {1, 1, 2, 1.5f})},
                             A({{"mode", S("nearest")},
                                {"coordinate_transformation_mode", S("asymmetric")},
                                {"nearest_mode", S("floor")}}));
               }});
  // Recurrent layers: every output flattened into one (Y, Y_h and LSTM's
  // Y_c), so the case compares all three. (ONNX Runtime 1.30 refuses
  // layout 1, batch first: ONNX's node tests check it.)
  struct RecurrentCase {
    std::string name, op;
    int64_t gates, num_dir, layout;
    bool bias, lens, initial, peepholes;
    AttributeMap attrs;
  };
  const std::vector<RecurrentCase> recurrent_cases = {
      {"RNN_defaults", "RNN", 1, 1, 0, false, false, false, false, A({})},
      {"RNN_bidirectional_relu_lens", "RNN", 1, 2, 0, true, true, true, false,
       A({{"direction", S("bidirectional")}, {"activations", Attribute::Strings({"Relu", "Tanh"})}})},
      {"GRU_reset_after_bias_lens", "GRU", 3, 1, 0, true, true, true, false, A({})},
      {"GRU_torch_bidirectional", "GRU", 3, 2, 0, true, false, true, false,
       A({{"direction", S("bidirectional")}, {"linear_before_reset", I(1)}})},
      {"GRU_reverse_clip", "GRU", 3, 1, 0, true, true, true, false,
       A({{"direction", S("reverse")}, {"clip", F(0.5f)}})},
      {"LSTM_peepholes_lens_reverse", "LSTM", 4, 1, 0, true, true, true, true, A({{"direction", S("reverse")}})},
      {"LSTM_bidirectional", "LSTM", 4, 2, 0, true, false, true, false, A({{"direction", S("bidirectional")}})},
      {"LSTM_softsign_clip", "LSTM", 4, 1, 0, false, false, false, false,
       A({{"activations", Attribute::Strings({"Sigmoid", "Softsign", "Softplus"})}, {"clip", F(1.5f)}})},
  };
  static const int32_t kLens[] = {5, 2, 4};  // sequence_lens: one full, two shorter
  for (const RecurrentCase& r : recurrent_cases)
    c.push_back({r.name, [r](B& b) {
                   const int64_t seq = 5, batch = 3, in_size = 4, hidden = 6, nd = r.num_dir;
                   AttributeMap attrs = r.attrs;
                   attrs["hidden_size"] = Attribute::Int(hidden);
                   auto input = [&](const std::string& what, Shape s) { return b.Input(r.name + "_" + what, s); };
                   std::vector<ValueId> ins = {
                       input("x", r.layout == 0 ? Shape{seq, batch, in_size} : Shape{batch, seq, in_size}),
                       input("w", {nd, r.gates * hidden, in_size}), input("r", {nd, r.gates * hidden, hidden})};
                   ins.push_back(r.bias ? input("b", {nd, 2 * r.gates * hidden}) : kNoValue);
                   ins.push_back(
                       r.lens ? b.Const(TensorData(DType::kInt32, {batch},
                                                   std::string(reinterpret_cast<const char*>(kLens), sizeof(kLens))))
                              : kNoValue);
                   const Shape state = r.layout == 0 ? Shape{nd, batch, hidden} : Shape{batch, nd, hidden};
                   ins.push_back(r.initial ? input("h0", state) : kNoValue);
                   const int outputs = r.op == "LSTM" ? 3 : 2;
                   if (r.op == "LSTM") {
                     ins.push_back(r.initial ? input("c0", state) : kNoValue);
                     ins.push_back(r.peepholes ? input("p", {nd, 3 * hidden}) : kNoValue);
                   }
                   while (ins.back() == kNoValue) ins.pop_back();
                   std::vector<ValueId> outs = b.OpN(r.op, ins, outputs, attrs);
                   std::vector<ValueId> flat;
                   for (ValueId v : outs) flat.push_back(b.Op("Flatten", {v}, A({{"axis", I(0)}})));
                   return b.Op("Concat", flat, A({{"axis", I(1)}}));
                 }});
  // Output lengths that depend on the values.
  auto bools = [](B& b, std::vector<uint8_t> v) {
    return b.Const(TensorData(DType::kBool, {static_cast<int64_t>(v.size())},
                              std::string(reinterpret_cast<const char*>(v.data()), v.size())));
  };
  c.push_back({"NonZero", [in](B& b) { return b.Op("NonZero", {b.Op("Relu", {in(b, "nz_x", {3, 4, 5})})}); }, true});
  c.push_back({"Compress_axis",
               [in, bools](B& b) {
                 return b.Op("Compress", {in(b, "cmp_x", {3, 5, 2}), bools(b, {1, 0, 0, 1})}, A({{"axis", I(1)}}));
               },
               true});
  c.push_back({"Compress_flat",
               [in, bools](B& b) {
                 return b.Op("Compress", {in(b, "cmpf_x", {2, 3}), bools(b, {0, 1, 1, 0, 1})});
               },
               true});
  // Unique of rounded values (repeats): the values in order of first
  // occurrence, then the three index outputs of rows along an axis.
  c.push_back({"Unique_first_occurrence",
               [in](B& b) {
                 ValueId x = b.Op("Round", {b.Op("Mul", {in(b, "uq_x", {4, 6}), b.ConstFloat(1.5f)})});
                 return b.OpN("Unique", {x}, 1, A({{"sorted", I(0)}}))[0];
               },
               true});
  c.push_back({"Unique_axis_indices",
               [in](B& b) {
                 ValueId x = b.Op("Sign", {in(b, "uqa_x", {7, 2})});
                 std::vector<ValueId> o = b.OpN("Unique", {x}, 4, A({{"axis", I(0)}}));
                 return b.Op("Concat", {o[1], o[2], o[3]}, A({{"axis", I(0)}}));
               },
               true});
  c.push_back({"NonMaxSuppression_corners",
               [in](B& b) {
                 return b.Op(
                     "NonMaxSuppression",
                     {in(b, "nms_boxes", {2, 8, 4}), in(b, "nms_scores", {2, 3, 8}), b.ConstInts({3}, Shape{1}),
                      b.Const(TensorData::FromFloat({0.2f}, {1})), b.Const(TensorData::FromFloat({-0.5f}, {1}))});
               },
               true});
  c.push_back({"NonMaxSuppression_center_point_box",
               [in](B& b) {
                 ValueId centers = in(b, "nmsc_xy", {1, 10, 2});
                 ValueId sizes = b.Op("Add", {b.Op("Abs", {in(b, "nmsc_wh", {1, 10, 2})}), b.ConstFloat(0.5f)});
                 ValueId boxes = b.Op("Concat", {centers, sizes}, A({{"axis", I(2)}}));
                 return b.Op("NonMaxSuppression",
                             {boxes, in(b, "nmsc_scores", {1, 1, 10}), b.ConstInts({10}, Shape{1}),
                              b.Const(TensorData::FromFloat({0.1f}, {1}))},
                             A({{"center_point_box", I(1)}}));
               },
               true});
  for (int k = 0; k < 2; ++k)
    c.push_back({k == 0 ? "RoiAlign_avg_half_pixel" : "RoiAlign_max_output_half_pixel", [k, in](B& b) {
                   ValueId rois = b.Const(TensorData::FromFloat({0.5f, 1.0f, 6.0f, 7.5f, 2.0f, 0.3f, 8.8f, 5.1f, 1.0f,
                                                                 1.0f, 3.0f, 2.0f, -2.0f, 4.0f, 12.0f, 9.5f},
                                                                {4, 4}));
                   AttributeMap attrs = A({{"output_height", I(3)}, {"output_width", I(2)}});
                   if (k == 1) {
                     attrs["mode"] = S("max");
                     attrs["coordinate_transformation_mode"] = S("output_half_pixel");
                     attrs["sampling_ratio"] = I(2);
                     attrs["spatial_scale"] = F(0.5f);
                   }
                   return b.Op("RoiAlign",
                               {in(b, "roi_x" + std::to_string(k), {2, 3, 8, 9}), rois, b.ConstInts({0, 1, 1, 0})},
                               attrs);
                 }});
  // Training losses: targets with ignore_index among them, class weights.
  auto positive = [in](B& b, const std::string& n, Shape s) {
    return b.Op("Add", {b.Op("Abs", {in(b, n, s)}), b.ConstFloat(0.1f)});
  };
  c.push_back({"NegativeLogLikelihoodLoss_none_weight_ignore", [in, positive](B& b) {
                 ValueId lp = b.Op("LogSoftmax", {in(b, "nll_x", {3, 4, 5})}, A({{"axis", I(1)}}));
                 ValueId target = b.ConstInts({0, 3, 2, 1, 2, 3, 3, 0, 2, 1, 1, 2, 0, 0, 3}, Shape{3, 5});
                 return b.Op("NegativeLogLikelihoodLoss", {lp, target, positive(b, "nll_w", {4})},
                             A({{"reduction", S("none")}, {"ignore_index", I(2)}}));
               }});
  c.push_back({"NegativeLogLikelihoodLoss_mean", [in](B& b) {
                 return b.Op("NegativeLogLikelihoodLoss", {in(b, "nllm_x", {5, 6}), b.ConstInts({5, 0, 2, 2, 1})});
               }});
  c.push_back({"SoftmaxCrossEntropyLoss_mean_weight_ignore", [in, positive](B& b) {
                 ValueId labels = b.ConstInts({0, 1, 2, -1, 2, 2, 1, 0, -1, 0, 1, 1, 2, 0, 0, 1}, Shape{2, 4, 2});
                 return b.Op("SoftmaxCrossEntropyLoss",
                             {in(b, "sce_x", {2, 3, 4, 2}), labels, positive(b, "sce_w", {3})},
                             A({{"ignore_index", I(-1)}}));
               }});
  c.push_back({"SoftmaxCrossEntropyLoss_log_prob", [in](B& b) {
                 return b.OpN("SoftmaxCrossEntropyLoss", {in(b, "scel_x", {4, 5}), b.ConstInts({4, 0, 1, 3})}, 2,
                              A({{"reduction", S("sum")}}))[1];
               }});
  // ReduceSum over an axis computed at run time (the index of a maximum).
  c.push_back({"ReduceSum_runtime_axes",
               [in](B& b) {
                 ValueId axis = b.Op("ArgMax", {in(b, "rsrt_pick", {3})}, A({{"keepdims", I(1)}}));
                 return b.Op("ReduceSum", {in(b, "rsrt_x", {2, 3, 4}), axis});
               },
               true});
  // Signal processing (opset 17) and Det.
  c.push_back({"HannWindow_times_x", [in](B& b) {
                 return b.Op("Mul", {b.Op("HannWindow", {b.ConstInts({10}, Shape{})}), in(b, "hann_x", {10})});
               }});
  c.push_back({"HammingWindow_symmetric", [in](B& b) {
                 return b.Op("Mul", {b.Op("HammingWindow", {b.ConstInts({7}, Shape{})}, A({{"periodic", I(0)}})),
                                     in(b, "hamm_x", {7})});
               }});
  c.push_back({"BlackmanWindow_times_x", [in](B& b) {
                 return b.Op("Mul", {b.Op("BlackmanWindow", {b.ConstInts({12}, Shape{})}), in(b, "black_x", {12})});
               }});
  c.push_back(
      {"DFT_real_onesided_padded", [in](B& b) {
         return b.Op("DFT", {in(b, "dft_x", {2, 7, 3, 1}), b.ConstInts({10}, Shape{})}, A({{"onesided", I(1)}}));
       }});
  c.push_back({"DFT_complex_inverse_axis2", [in](B& b) {
                 return b.Op("DFT", {in(b, "idft_x", {2, 3, 6, 2})}, A({{"inverse", I(1)}, {"axis", I(2)}}));
               }});
  c.push_back({"STFT_window_onesided", [in](B& b) {
                 ValueId window = b.Op("HannWindow", {b.ConstInts({16}, Shape{})});
                 return b.Op("STFT", {in(b, "stft_x", {2, 100, 1}), b.ConstInts({6}, Shape{}), window});
               }});
  c.push_back({"STFT_complex_frame_length", [in](B& b) {
                 return b.Op(
                     "STFT",
                     {in(b, "stftc_x", {1, 40, 2}), b.ConstInts({5}, Shape{}), kNoValue, b.ConstInts({8}, Shape{})},
                     A({{"onesided", I(0)}}));
               }});
  c.push_back({"Det", [in](B& b) { return b.Op("Det", {in(b, "det_x", {2, 3, 4, 4})}); }});
  // A log-mel front end's filters (Whisper-like: 16 kHz, 20 Hz to 7.6 kHz).
  c.push_back({"MelWeightMatrix_times_x", [in](B& b) {
                 auto scalar_int = [&b](int32_t v) {
                   return b.Const(TensorData(DType::kInt32, {}, std::string(reinterpret_cast<const char*>(&v), 4)));
                 };
                 ValueId mel = b.Op("MelWeightMatrix", {scalar_int(10), scalar_int(64), scalar_int(16000),
                                                        b.ConstFloat(20.0f), b.ConstFloat(7600.0f)});
                 return b.Op("Mul", {mel, in(b, "mel_x", {33, 10})});
               }});
  // Pad's edge and reflect modes of integers and over four axes (gathered
  // indices), ScatterND multiplying (duplicate indices), MaxPool of uint8.
  c.push_back({"Pad_edge_int32", [](B& b) {
                 return b.Op("Pad", {b.Input("pade_x", {2, 3, 4}, DType::kInt32), b.ConstInts({0, 2, 1, 1, 0, 3})},
                             A({{"mode", S("edge")}}));
               }});
  c.push_back({"Pad_reflect_four_axes", [in](B& b) {
                 return b.Op("Pad", {in(b, "padr_x", {3, 4, 3, 5}), b.ConstInts({1, 2, 0, 3, 2, 1, 2, 0})},
                             A({{"mode", S("reflect")}}));
               }});
  c.push_back({"ScatterND_mul_duplicates", [in](B& b) {
                 ValueId idx = b.ConstInts({1, 0, 1, 3}, Shape{4, 1});
                 return b.Op("ScatterND", {in(b, "sndm_x", {4, 3}), idx, in(b, "sndm_u", {4, 3})},
                             A({{"reduction", S("mul")}}));
               }});
  c.push_back({"MaxPool_uint8", [](B& b) {
                 return b.Op("MaxPool", {b.Input("mpu8_x", {1, 2, 5, 6}, DType::kUInt8)},
                             A({{"kernel_shape", Is({3, 2})}, {"strides", Is({2, 2})}, {"pads", Is({1, 0, 1, 0})}}));
               }});
  c.push_back({"Tile", [in](B& b) { return b.Op("Tile", {in(b, "tile_x", {2, 3}), b.ConstInts({2, 3})}); }});
  c.push_back({"Trilu_upper", [in](B& b) { return b.Op("Trilu", {in(b, "triu_x", {2, 4, 5})}); }});
  c.push_back({"Trilu_lower_k", [in](B& b) {
                 return b.Op("Trilu", {in(b, "tril_x", {3, 5, 4}), b.ConstInts({1}, Shape{})}, A({{"upper", I(0)}}));
               }});
  c.push_back({"DepthToSpace_DCR", [in](B& b) {
                 return b.Op("DepthToSpace", {in(b, "d2s_x", {1, 8, 2, 3})}, A({{"blocksize", I(2)}}));
               }});
  c.push_back(
      {"DepthToSpace_CRD", [in](B& b) {
         return b.Op("DepthToSpace", {in(b, "d2sc_x", {2, 8, 3, 2})}, A({{"blocksize", I(2)}, {"mode", S("CRD")}}));
       }});
  c.push_back({"SpaceToDepth", [in](B& b) {
                 return b.Op("SpaceToDepth", {in(b, "s2d_x", {1, 2, 4, 6})}, A({{"blocksize", I(2)}}));
               }});
  // Arg/TopK outputs are int64: cast to float so that one model holds every case.
  c.push_back(
      {"ArgMax_keepdims", [in](B& b) {
         return b.Op("Cast", {b.Op("ArgMax", {in(b, "am_x", {3, 5, 2})}, A({{"axis", I(1)}}))}, A({{"to", I(1)}}));
       }});
  c.push_back({"ArgMin_last_index", [in](B& b) {
                 // Floor makes ties; select_last_index picks the last of them.
                 ValueId x = b.Op("Floor", {in(b, "amn_x", {4, 6})});
                 return b.Op(
                     "Cast",
                     {b.Op("ArgMin", {x}, A({{"axis", I(-1)}, {"keepdims", I(0)}, {"select_last_index", I(1)}}))},
                     A({{"to", I(1)}}));
               }});
  c.push_back({"TopK", [in](B& b) {
                 auto vi = b.OpN("TopK", {in(b, "topk_x", {3, 7}), b.ConstInts({3})}, 2, A({{"axis", I(1)}}));
                 return b.Op("Add", {vi[0], b.Op("Cast", {vi[1]}, A({{"to", I(1)}}))});
               }});
  // CastLike: to int64 (truncating) and back; through float16 (Relu
  // computed in float32 and rounded by the executor; ORT at level all drops
  // the round trip through float16), on multiples of 1/8 that float16 holds
  // exactly.
  c.push_back({"CastLike_int64", [in](B& b) {
                 ValueId x = b.Op("Mul", {in(b, "cl_x", {3, 4}), b.ConstFloat(3.0f)});
                 ValueId i = b.Op("CastLike", {x, b.ConstInts({0})});
                 return b.Op("CastLike", {i, b.ConstFloat(0.0f)});
               }});
  c.push_back({"CastLike_float16", [in](B& b) {
                 ValueId x = b.Op("Floor", {b.Op("Mul", {in(b, "clh_x", {2, 5}), b.ConstFloat(8.0f)})});
                 x = b.Op("Mul", {x, b.ConstFloat(0.125f)});
                 ValueId h = b.Op("CastLike", {x, b.Const(TensorData::FromDouble({0.0}, {}, DType::kFloat16))});
                 return b.Op("CastLike", {b.Op("Relu", {h}), x});
               }});
  c.push_back({"TopK_smallest", [in](B& b) {
                 auto vi = b.OpN("TopK", {in(b, "topks_x", {5, 4}), b.ConstInts({2})}, 2,
                                 A({{"axis", I(0)}, {"largest", I(0)}}));
                 return b.Op("Add", {vi[0], b.Op("Cast", {vi[1]}, A({{"to", I(1)}}))});
               }});
  c.push_back({"InstanceNormalization", [in](B& b) {
                 return b.Op("InstanceNormalization",
                             {in(b, "in_x", {2, 3, 4, 5}), in(b, "in_scale", {3}), in(b, "in_b", {3})},
                             A({{"epsilon", F(1e-3f)}}));
               }});
  c.push_back({"Cast_roundtrip", [in](B& b) {
                 ValueId x = b.Op("Mul", {in(b, "cast_x", {3, 4}), b.ConstFloat(10.0f)});
                 ValueId i = b.Op("Cast", {x}, A({{"to", I(7)}}));
                 return b.Op("Cast", {i}, A({{"to", I(1)}}));
               }});
  // Convolutions.
  auto conv = [in](const std::string& name, Shape x, Shape w, AttributeMap attrs, bool bias) {
    return OpCase{name, [=](B& b) {
                    std::vector<ValueId> ins = {in(b, name + "_x", x), b.Weight(name + "_w", w, 0.3f)};
                    if (bias) ins.push_back(b.Weight(name + "_b", {w[0]}, 0.3f));
                    return b.Op("Conv", ins, attrs);
                  }};
  };
  c.push_back(conv("Conv_basic", {1, 3, 9, 9}, {4, 3, 3, 3}, A({{"pads", Is({1, 1, 1, 1})}}), true));
  c.push_back(conv("Conv_asym_pads_stride", {1, 2, 10, 9}, {3, 2, 3, 2},
                   A({{"pads", Is({0, 1, 2, 0})}, {"strides", Is({2, 3})}}), false));
  c.push_back(conv("Conv_dilation_group", {1, 4, 11, 11}, {6, 2, 3, 3},
                   A({{"dilations", Is({2, 2})}, {"group", I(2)}, {"pads", Is({2, 1, 2, 1})}}), true));
  c.push_back(conv("Conv_same_upper", {1, 3, 8, 7}, {2, 3, 4, 3},
                   A({{"auto_pad", S("SAME_UPPER")}, {"strides", Is({2, 2})}}), true));
  c.push_back(conv("Conv_same_lower", {1, 3, 8, 7}, {2, 3, 4, 3}, A({{"auto_pad", S("SAME_LOWER")}}), false));
  c.push_back(
      conv("Conv_depthwise", {1, 4, 6, 6}, {4, 1, 3, 3}, A({{"group", I(4)}, {"pads", Is({1, 1, 1, 1})}}), true));
  c.push_back(conv("Conv_1d", {1, 3, 12}, {5, 3, 3}, A({{"pads", Is({1, 2})}, {"strides", Is({2})}}), true));
  // 1x1 depthwise convolutions (the executor computes them as a per-channel
  // product): bias, strides that leave a remainder, asymmetric pads (the
  // border is the bias alone), a channel multiplier, 1-D and 3-D.
  c.push_back(conv("Conv_depthwise_1x1", {2, 4, 5, 6}, {4, 1, 1, 1}, A({{"group", I(4)}}), true));
  c.push_back(conv("Conv_depthwise_1x1_stride_pads", {1, 3, 7, 6}, {3, 1, 1, 1},
                   A({{"group", I(3)}, {"pads", Is({1, 0, 0, 2})}, {"strides", Is({2, 3})}}), true));
  c.push_back(conv("Conv_depthwise_1x1_multiplier", {1, 3, 4, 4}, {6, 1, 1, 1},
                   A({{"group", I(3)}, {"strides", Is({1, 2})}}), false));
  c.push_back(conv("Conv_depthwise_1x1_1d", {1, 5, 9}, {5, 1, 1}, A({{"group", I(5)}, {"strides", Is({2})}}), true));
  c.push_back(conv("Conv_depthwise_1x1_3d", {1, 2, 3, 4, 5}, {2, 1, 1, 1, 1},
                   A({{"group", I(2)}, {"pads", Is({0, 1, 0, 1, 0, 1})}}), true));
  // Transposed convolutions (decoders, FPN/U-Net upsampling): pads, output
  // padding, output_shape and SAME_* with odd total paddings (which side
  // gets the odd unit), groups, dilations, 1-D and 3-D.
  auto deconv = [in](const std::string& name, Shape x, Shape w, AttributeMap attrs, int64_t bias) {
    return OpCase{name, [=](B& b) {
                    std::vector<ValueId> ins = {in(b, name + "_x", x), b.Weight(name + "_w", w, 0.3f)};
                    if (bias > 0) ins.push_back(b.Weight(name + "_b", {bias}, 0.3f));
                    return b.Op("ConvTranspose", ins, attrs);
                  }};
  };
  c.push_back(deconv("ConvTranspose_basic", {1, 3, 5, 5}, {3, 4, 3, 3},
                     A({{"strides", Is({2, 2})}, {"pads", Is({1, 1, 1, 1})}}), 4));
  c.push_back(deconv("ConvTranspose_output_padding", {1, 3, 5, 4}, {3, 2, 3, 3},
                     A({{"strides", Is({2, 2})}, {"pads", Is({1, 1, 1, 1})}, {"output_padding", Is({1, 1})}}), 2));
  c.push_back(deconv("ConvTranspose_asym_pads", {1, 2, 4, 5}, {2, 3, 3, 2},
                     A({{"strides", Is({2, 3})}, {"pads", Is({0, 1, 2, 0})}}), 0));
  c.push_back(deconv("ConvTranspose_asym_output_padding", {1, 2, 4, 4}, {2, 2, 3, 3},
                     A({{"strides", Is({2, 2})}, {"pads", Is({1, 0, 0, 1})}, {"output_padding", Is({1, 0})}}), 2));
  c.push_back(deconv("ConvTranspose_output_shape_odd", {1, 2, 4, 4}, {2, 3, 3, 3},
                     A({{"strides", Is({2, 2})}, {"output_shape", Is({8, 9})}}), 3));
  c.push_back(deconv("ConvTranspose_output_shape_larger", {1, 1, 3, 3}, {1, 2, 3, 3},
                     A({{"strides", Is({3, 2})}, {"output_shape", Is({10, 8})}}), 2));
  c.push_back(deconv("ConvTranspose_same_upper", {1, 2, 4, 5}, {2, 2, 4, 3},
                     A({{"strides", Is({2, 2})}, {"auto_pad", S("SAME_UPPER")}}), 2));
  c.push_back(deconv("ConvTranspose_same_lower", {1, 2, 4, 5}, {2, 2, 4, 3},
                     A({{"strides", Is({2, 2})}, {"auto_pad", S("SAME_LOWER")}}), 0));
  c.push_back(deconv("ConvTranspose_group_dilation", {1, 4, 5, 5}, {4, 3, 3, 3},
                     A({{"group", I(2)}, {"dilations", Is({2, 2})}, {"pads", Is({1, 1, 1, 1})}}), 6));
  c.push_back(
      deconv("ConvTranspose_1d", {1, 3, 7}, {3, 2, 4}, A({{"strides", Is({3})}, {"output_padding", Is({2})}}), 2));
  c.push_back(deconv("ConvTranspose_3d", {1, 2, 3, 4, 4}, {2, 2, 2, 2, 2}, A({{"strides", Is({2, 2, 2})}}), 2));
  // Einsum as transformer exports write it: batched matmul, attention
  // scores with a transposed operand, an ellipsis, implicit output, a
  // reduction, a three-operand product.
  auto einsum = [in](const std::string& name, const std::string& eq, std::vector<Shape> shapes) {
    return OpCase{name, [=](B& b) {
                    std::vector<ValueId> ins;
                    for (size_t k = 0; k < shapes.size(); ++k)
                      ins.push_back(in(b, name + "_" + std::to_string(k), shapes[k]));
                    return b.Op("Einsum", ins, A({{"equation", S(eq)}}));
                  }};
  };
  c.push_back(einsum("Einsum_bmm", "bij,bjk->bik", {{2, 3, 4}, {2, 4, 5}}));
  c.push_back(einsum("Einsum_attention", "bhqd,bhkd->bhqk", {{1, 2, 3, 4}, {1, 2, 5, 4}}));
  c.push_back(einsum("Einsum_ellipsis", "...ij,...jk->...ik", {{2, 3, 4, 2}, {1, 3, 2, 3}}));
  c.push_back(einsum("Einsum_implicit", "ij,jk", {{3, 4}, {4, 2}}));
  c.push_back(einsum("Einsum_reduce_transpose", "i j k -> k i", {{3, 4, 5}}));
  c.push_back(einsum("Einsum_three", "ab,bc,cd->ad", {{2, 3}, {3, 4}, {4, 2}}));
  c.push_back({"BatchNormalization", [in](B& b) {
                 return b.Op(
                     "BatchNormalization",
                     {in(b, "bn_x", {2, 3, 4, 4}), b.Uniform("bn_s", {3}, 0.5f, 1.5f), b.Weight("bn_b", {3}, 0.3f),
                      b.Weight("bn_m", {3}, 0.3f), b.Uniform("bn_v", {3}, 0.5f, 1.5f)},
                     A({{"epsilon", F(1e-3f)}}));
               }});
  // Pooling.
  auto pool = [in](const std::string& name, const std::string& op, Shape x, AttributeMap attrs) {
    return OpCase{name, [=](B& b) { return b.Op(op, {in(b, name + "_x", x)}, attrs); }};
  };
  c.push_back(pool("MaxPool_basic", "MaxPool", {1, 2, 9, 9},
                   A({{"kernel_shape", Is({3, 3})}, {"strides", Is({2, 2})}, {"pads", Is({1, 1, 1, 1})}})));
  c.push_back(pool("MaxPool_ceil", "MaxPool", {1, 2, 10, 10},
                   A({{"kernel_shape", Is({3, 3})}, {"strides", Is({2, 2})}, {"ceil_mode", I(1)}})));
  c.push_back(pool("MaxPool_asym_dilated", "MaxPool", {1, 2, 11, 10},
                   A({{"kernel_shape", Is({2, 3})}, {"pads", Is({0, 2, 1, 0})}, {"dilations", Is({2, 1})}})));
  c.push_back(pool("MaxPool_same_upper", "MaxPool", {1, 1, 7, 7},
                   A({{"kernel_shape", Is({2, 2})}, {"auto_pad", S("SAME_UPPER")}, {"strides", Is({2, 2})}})));
  c.push_back(pool("AveragePool_include_pad", "AveragePool", {1, 2, 8, 8},
                   A({{"kernel_shape", Is({3, 3})}, {"pads", Is({1, 1, 1, 1})}, {"count_include_pad", I(1)}})));
  c.push_back(pool("AveragePool_exclude_pad", "AveragePool", {1, 2, 8, 8},
                   A({{"kernel_shape", Is({3, 3})}, {"pads", Is({1, 1, 1, 1})}, {"strides", Is({2, 2})}})));
  c.push_back(pool("AveragePool_asym_exclude", "AveragePool", {1, 2, 7, 9},
                   A({{"kernel_shape", Is({3, 2})}, {"pads", Is({0, 1, 2, 1})}})));
  c.push_back(pool("AveragePool_asym_include", "AveragePool", {1, 2, 7, 9},
                   A({{"kernel_shape", Is({3, 2})}, {"pads", Is({2, 0, 0, 1})}, {"count_include_pad", I(1)}})));
  c.push_back(pool("AveragePool_ceil", "AveragePool", {1, 1, 9, 9},
                   A({{"kernel_shape", Is({2, 2})}, {"strides", Is({2, 2})}, {"ceil_mode", I(1)}})));
  c.push_back(pool("GlobalAveragePool", "GlobalAveragePool", {2, 3, 5, 4}, {}));
  // Pad.
  for (const char* mode : {"constant", "reflect", "edge"}) {
    std::string m = mode;
    c.push_back(
        {"Pad_" + m, [m, in](B& b) {
           std::vector<ValueId> ins = {in(b, "pad_" + m + "_x", {1, 2, 4, 5}), b.ConstInts({0, 0, 1, 2, 0, 0, 2, 1})};
           if (m == "constant") ins.push_back(b.ConstFloat(0.25f));
           return b.Op("Pad", ins, A({{"mode", S(m)}}));
         }});
  }
  c.push_back({"Pad_negative", [in](B& b) {
                 return b.Op("Pad", {in(b, "padneg_x", {3, 6}), b.ConstInts({1, -2, 0, 1})});
               }});
  // Matrix products.
  c.push_back({"MatMul_batched_broadcast", [in](B& b) {
                 return b.Op("MatMul", {in(b, "mm_a", {2, 1, 3, 4}), in(b, "mm_b", {5, 4, 6})});
               }});
  c.push_back({"MatMul_vector_matrix", [in](B& b) {
                 return b.Op("MatMul", {in(b, "mv_a", {4}), in(b, "mv_b", {2, 4, 3})});
               }});
  c.push_back({"MatMul_matrix_vector", [in](B& b) {
                 return b.Op("MatMul", {in(b, "mw_a", {3, 4}), in(b, "mw_b", {4})});
               }});
  c.push_back({"Gemm_trans_alpha_beta", [in](B& b) {
                 return b.Op("Gemm", {in(b, "gemm_a", {4, 3}), in(b, "gemm_b", {5, 4}), in(b, "gemm_c", {5})},
                             A({{"transA", I(1)}, {"transB", I(1)}, {"alpha", F(0.5f)}, {"beta", F(2.0f)}}));
               }});
  c.push_back({"Gemm_no_bias", [in](B& b) {
                 return b.Op("Gemm", {in(b, "gemm2_a", {3, 4}), in(b, "gemm2_b", {4, 2})});
               }});
  c.push_back({"Softmax_axis1", [in](B& b) {
                 return b.Op("Softmax", {in(b, "sm_x", {2, 3, 4})}, A({{"axis", I(1)}}));
               }});
  c.push_back({"LayerNormalization_axis", [in](B& b) {
                 return b.Op(
                     "LayerNormalization",
                     {in(b, "ln_x", {2, 3, 4}), b.Uniform("ln_g", {3, 4}, 0.5f, 1.5f), b.Weight("ln_b", {3, 4}, 0.2f)},
                     A({{"axis", I(-2)}, {"epsilon", F(1e-4f)}}));
               }});
  // ONNX Runtime's contrib operator (com.microsoft): with every optional
  // input, and with all four outputs (the output, the rows' mean and
  // inverse standard deviation, the sum) combined into one.
  c.push_back({"SkipLayerNormalization", [in](B& b) {
                 return b.Op(
                     "com.microsoft.SkipLayerNormalization",
                     {in(b, "skln_x", {2, 3, 8}), in(b, "skln_s", {2, 3, 8}), b.Uniform("skln_g", {8}, 0.5f, 1.5f),
                      b.Weight("skln_b", {8}, 0.2f), b.Weight("skln_bias", {8}, 0.3f)},
                     A({{"epsilon", F(1e-5f)}}));
               }});
  c.push_back({"SkipLayerNormalization_outputs", [in](B& b) {
                 std::vector<ValueId> o =
                     b.OpN("com.microsoft.SkipLayerNormalization",
                           {in(b, "sln4_x", {4, 16}), in(b, "sln4_s", {4, 16}), b.Uniform("sln4_g", {16}, 0.5f, 1.5f)},
                           4, A({{"epsilon", F(1e-6f)}}));
                 ValueId stats = b.Op("Add", {o[1], b.Op("Mul", {o[2], b.ConstFloat(0.01f)})});
                 return b.Op("Add", {b.Op("Add", {o[0], stats}), o[3]});
               }});
  c.push_back({"ReduceMean", [in](B& b) {
                 return b.Op("ReduceMean", {in(b, "rm_x", {2, 3, 4})}, A({{"axes", Is({0, -1})}, {"keepdims", I(0)}}));
               }});
  c.push_back({"ReduceMean_all", [in](B& b) { return b.Op("ReduceMean", {in(b, "rma_x", {2, 3})}); }});
  c.push_back({"ReduceMax", [in](B& b) {
                 return b.Op("ReduceMax", {in(b, "rx_x", {2, 3, 4})}, A({{"axes", Is({1})}}));
               }});
  c.push_back({"ReduceMin", [in](B& b) {
                 return b.Op("ReduceMin", {in(b, "rmin_x", {2, 3, 4})}, A({{"axes", Is({0, 2})}}));
               }});
  c.push_back({"ReduceProd", [in](B& b) {
                 return b.Op("ReduceProd", {in(b, "rp_x", {2, 3, 4})}, A({{"axes", Is({1, -1})}, {"keepdims", I(0)}}));
               }});
  c.push_back({"ReduceL1", [in](B& b) {
                 return b.Op("ReduceL1", {in(b, "rl1_x", {2, 3, 4})}, A({{"axes", Is({2})}}));
               }});
  c.push_back({"ReduceL2", [in](B& b) {
                 return b.Op("ReduceL2", {in(b, "rl2_x", {2, 3, 4})}, A({{"axes", Is({0, 1})}}));
               }});
  c.push_back({"ReduceSumSquare", [in](B& b) { return b.Op("ReduceSumSquare", {in(b, "rss_x", {2, 3, 4})}); }});
  c.push_back({"ReduceLogSum", [in](B& b) {
                 return b.Op("ReduceLogSum", {b.Op("Abs", {in(b, "rls_x", {2, 3, 4})})}, A({{"axes", Is({1})}}));
               }});
  c.push_back(
      {"ReduceLogSumExp", [in](B& b) {
         return b.Op("ReduceLogSumExp", {in(b, "rlse_x", {2, 3, 4})}, A({{"axes", Is({2})}, {"keepdims", I(0)}}));
       }});
  c.push_back({"ReduceSum", [in](B& b) {
                 return b.Op("ReduceSum", {in(b, "rsum_x", {2, 3, 4}), b.ConstInts({0, -1})});
               }});
  c.push_back({"ReduceSum_all", [in](B& b) {
                 return b.Op("ReduceSum", {in(b, "rsa_x", {2, 3, 4})}, A({{"keepdims", I(0)}}));
               }});
  c.push_back({"ReduceSum_noop", [in](B& b) {
                 return b.Op("ReduceSum", {in(b, "rsn_x", {2, 3})}, A({{"noop_with_empty_axes", I(1)}}));
               }});
  // Data movement.
  c.push_back({"Concat", [in](B& b) {
                 return b.Op("Concat", {in(b, "cat_a", {2, 3}), in(b, "cat_b", {2, 1}), in(b, "cat_c", {2, 2})},
                             A({{"axis", I(-1)}}));
               }});
  c.push_back({"Split_sizes", [in](B& b) {
                 auto parts = b.OpN("Split", {in(b, "split_x", {2, 7}), b.ConstInts({2, 5})}, 2, A({{"axis", I(1)}}));
                 return b.Op("Mul", {b.Op("ReduceMean", {parts[0]}, A({{"axes", Is({1})}})),
                                     b.Op("ReduceMax", {parts[1]}, A({{"axes", Is({1})}}))});
               }});
  c.push_back({"Split_equal", [in](B& b) {
                 auto parts = b.OpN("Split", {in(b, "split2_x", {6, 2})}, 3);
                 return b.Op("Sub", {b.Op("Add", {parts[0], parts[1]}), parts[2]});
               }});
  c.push_back({"Slice_basic", [in](B& b) {
                 return b.Op("Slice", {in(b, "sl_x", {5, 6, 7}), b.ConstInts({1, -5}), b.ConstInts({100, -1}),
                                       b.ConstInts({0, 2}), b.ConstInts({2, 2})});
               }});
  c.push_back({"Slice_negative_step", [in](B& b) {
                 return b.Op("Slice", {in(b, "sln_x", {5, 6}), b.ConstInts({-1, 4}), b.ConstInts({-100, 0}),
                                       b.ConstInts({0, 1}), b.ConstInts({-2, -1})});
               }});
  c.push_back({"Slice_default_axes", [in](B& b) {
                 return b.Op("Slice", {in(b, "sld_x", {4, 5}), b.ConstInts({1}), b.ConstInts({3})});
               }});
  c.push_back({"Transpose_perm", [in](B& b) {
                 return b.Op("Transpose", {in(b, "tr_x", {2, 3, 4})}, A({{"perm", Is({1, 2, 0})}}));
               }});
  c.push_back({"Transpose_default", [in](B& b) { return b.Op("Transpose", {in(b, "trd_x", {2, 3, 4})}); }});
  c.push_back({"Reshape_zero_minus_one", [in](B& b) {
                 return b.Op("Reshape", {in(b, "rs_x", {2, 3, 4}), b.ConstInts({0, -1, 2})});
               }});
  c.push_back({"Flatten_axis2", [in](B& b) {
                 return b.Op("Flatten", {in(b, "fl_x", {2, 3, 4, 5})}, A({{"axis", I(2)}}));
               }});
  c.push_back({"Flatten_axis0", [in](B& b) { return b.Op("Flatten", {in(b, "fl0_x", {2, 3})}, A({{"axis", I(0)}})); }});
  c.push_back({"Squeeze_Unsqueeze", [in](B& b) {
                 ValueId s = b.Op("Squeeze", {in(b, "sq_x", {1, 3, 1, 4}), b.ConstInts({0, -2})});
                 return b.Op("Unsqueeze", {s, b.ConstInts({-1, 1})});
               }});
  c.push_back({"Squeeze_all", [in](B& b) { return b.Op("Squeeze", {in(b, "sqa_x", {1, 3, 1})}); }});
  c.push_back({"Gather_negative_2d", [in](B& b) {
                 return b.Op("Gather", {in(b, "ga_x", {3, 5, 2}), b.ConstInts({0, -1, 2, -5, 1, 1}, Shape{2, 3})},
                             A({{"axis", I(1)}}));
               }});
  c.push_back({"Gather_scalar", [in](B& b) {
                 return b.Op("Gather", {in(b, "gs_x", {4, 3}), b.Const(TensorData::ScalarInt64(-2))});
               }});
  c.push_back({"Expand", [in](B& b) { return b.Op("Expand", {in(b, "ex_x", {3, 1}), b.ConstInts({2, 1, 4})}); }});
  c.push_back({"Dropout", [in](B& b) { return b.Op("Dropout", {in(b, "do_x", {2, 3})}); }});
  // Shape computations (folded at import, so these test the kernels through folding).
  c.push_back(
      {"Shape_ConstantOfShape_Range", [in](B& b) {
         ValueId x = in(b, "shp_x", {2, 3, 4});
         ValueId shape = b.Op("Shape", {x}, A({{"start", I(1)}}));
         ValueId ones = b.Op(
             "ConstantOfShape", {shape},
             A({{"value", Attribute::Tensor(std::make_shared<const TensorData>(TensorData::FromFloat({2.0f}, {1})))}}));
         ValueId range = b.Op("Cast",
                              {b.Op("Range", {b.Const(TensorData::ScalarInt64(0)), b.Const(TensorData::ScalarInt64(4)),
                                              b.Const(TensorData::ScalarInt64(1))})},
                              A({{"to", I(1)}}));
         return b.Op("Add", {b.Op("Mul", {x, ones}), range});
       }});
  c.push_back({"Constant_node", [in](B& b) {
                 ValueId k = b.Op("Constant", {}, A({{"value_floats", Attribute::Floats({1.5f, -2.0f, 0.5f})}}));
                 return b.Op("Mul", {in(b, "cn_x", {2, 3}), k});
               }});
  // Trigonometric and hyperbolic functions on their domains: the inverse
  // sine, cosine and hyperbolic tangent of tanh(x) (in (-1, 1)), the inverse
  // hyperbolic cosine of 1 + |x|.
  for (const char* op : {"Sin", "Cos", "Tan", "Atan", "Sinh", "Cosh", "Asinh", "Sign"}) unary(op);
  for (const char* op : {"Asin", "Acos", "Atanh"}) {
    std::string o = op;
    c.push_back({o, [o, in](B& b) { return b.Op(o, {b.Op("Tanh", {in(b, o + "_x", {3, 4})})}); }});
  }
  c.push_back({"Acosh", [in](B& b) {
                 return b.Op("Acosh", {b.Op("Add", {b.Op("Abs", {in(b, "acosh_x", {3, 4})}), b.ConstFloat(1.0f)})});
               }});
  // Round: halves to the even neighbour (-2.5 -> -2, 0.5 -> 0, 1.5 -> 2).
  c.push_back({"Round", [in](B& b) {
                 ValueId halves = b.Const(TensorData::FromFloat({-2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f}, {6}));
                 ValueId x = b.Op("Mul", {in(b, "round_x", {2, 6}), b.ConstFloat(3.0f)});
                 return b.Op("Add", {b.Op("Round", {x}), b.Op("Round", {halves})});
               }});
  c.push_back({"Sign_int", [](B& b) {
                 ValueId x = b.Op("Sub", {b.Input("sgn_i", {2, 3}, DType::kInt64),
                                          b.ConstInts(std::vector<int64_t>{7, 0, -3}, Shape{3})});
                 return b.Op("Sign", {x});
               }});
  // IsNaN / IsInf on NaNs and infinities; IsInf with each sign left out.
  auto specials = [](B& b) {
    const float inf = std::numeric_limits<float>::infinity();
    return b.Const(TensorData::FromFloat({std::nanf(""), inf, -inf, 0.0f, -1.0f, 2.0f}, {6}));
  };
  c.push_back({"IsNaN", [in, specials](B& b) {
                 return b.Op("Or", {b.Op("IsNaN", {specials(b)}), b.Op("IsNaN", {in(b, "isnan_x", {2, 6})})});
               }});
  for (int64_t neg : {0, 1}) {
    c.push_back(
        {"IsInf_negative" + std::to_string(neg), [neg, specials](B& b) {
           return b.Op("IsInf", {specials(b)}, A({{"detect_negative", I(neg)}, {"detect_positive", I(1 - neg)}}));
         }});
  }
  c.push_back({"IsInf_both", [specials](B& b) { return b.Op("IsInf", {specials(b)}); }});
  // Sum and Mean of one, two and three inputs, broadcast.
  c.push_back({"Sum_Mean", [in](B& b) {
                 ValueId x = in(b, "sm3_x", {2, 3, 4}), y = in(b, "sm3_y", {3, 1}), z = in(b, "sm3_z", {4});
                 ValueId sum = b.Op("Sum", {x, y, z}), mean = b.Op("Mean", {x, y, z});
                 return b.Op("Sum", {b.Op("Mean", {sum}), b.Op("Sum", {mean, b.Op("Mean", {y, z})})});
               }});
  c.push_back({"Shrink", [in](B& b) {
                 return b.Op("Shrink", {in(b, "shrink_x", {3, 5})}, A({{"bias", F(0.25f)}, {"lambd", F(0.75f)}}));
               }});
  c.push_back({"LogSoftmax_axis1", [in](B& b) {
                 return b.Op("LogSoftmax", {in(b, "lsm_x", {2, 3, 4})}, A({{"axis", I(1)}}));
               }});
  // Hardmax: ties (Floor) go to the first largest element.
  c.push_back({"Hardmax", [in](B& b) {
                 return b.Op("Hardmax", {b.Op("Floor", {in(b, "hm_x", {3, 5})})}, A({{"axis", I(-1)}}));
               }});
  c.push_back({"GlobalMaxPool", [in](B& b) { return b.Op("GlobalMaxPool", {in(b, "gmp_x", {2, 3, 4, 5})}); }});
  // LayerNormalization's Mean and InvStdDev outputs, combined into one.
  c.push_back({"LayerNormalization_statistics", [in](B& b) {
                 std::vector<ValueId> o =
                     b.OpN("LayerNormalization", {in(b, "lns_x", {2, 3, 4}), b.Uniform("lns_g", {4}, 0.5f, 1.5f)}, 3,
                           A({{"axis", I(2)}, {"epsilon", F(1e-3f)}}));
                 return b.Op("Add", {o[0], b.Op("Add", {o[1], b.Op("Mul", {o[2], b.ConstFloat(0.01f)})})});
               }});
  // GatherElements: negative indices, a smaller index tensor, on axes 0 and 1.
  c.push_back({"GatherElements", [in](B& b) {
                 ValueId x = in(b, "ge_x", {3, 4});
                 ValueId i0 = b.ConstInts({0, -1, 2, 1, -3, 0}, Shape{2, 3});
                 ValueId i1 = b.ConstInts({3, -4, 1, 2, 2, -1, 0, 0, 1, 3, -2, 2}, Shape{3, 4});
                 ValueId g0 = b.Op("GatherElements", {x, i0}, A({{"axis", I(0)}}));
                 ValueId g1 = b.Op("GatherElements", {x, i1}, A({{"axis", I(1)}}));
                 return b.Op("Add", {b.Op("Pad", {g0, b.ConstInts({0, 0, 1, 1})}), g1});
               }});
  // CumSum: plain, exclusive, reverse, both, on a negative axis; int64.
  c.push_back({"CumSum", [in](B& b) {
                 ValueId x = in(b, "cs_x", {3, 4});
                 ValueId sum = b.Op("CumSum", {x, b.Const(TensorData::ScalarInt64(1))});
                 for (auto [ex, rev] : std::vector<std::pair<int64_t, int64_t>>{{1, 0}, {0, 1}, {1, 1}})
                   sum = b.Op("Add", {sum, b.Op("CumSum", {x, b.Const(TensorData::ScalarInt64(-2))},
                                                A({{"exclusive", I(ex)}, {"reverse", I(rev)}}))});
                 return sum;
               }});
  c.push_back(
      {"CumSum_int", [](B& b) {
         ValueId x = b.Input("csi_x", {5}, DType::kInt64);
         return b.Op("CumSum", {x, b.Const(TensorData::ScalarInt64(0))}, A({{"exclusive", I(1)}, {"reverse", I(1)}}));
       }});
  // ScatterElements: replace on axis 1 (negative indices), add and multiply
  // with duplicate indices on axis 0.
  c.push_back({"ScatterElements", [in](B& b) {
                 ValueId x = in(b, "se_x", {3, 4});
                 ValueId i1 = b.ConstInts({3, -4, 1, 2, 0, -1}, Shape{2, 3});
                 ValueId i0 = b.ConstInts({0, 2, 0, 1, 0, 0, 1, 2}, Shape{2, 4});
                 ValueId y = b.Op("ScatterElements", {x, i1, in(b, "se_u1", {2, 3})}, A({{"axis", I(1)}}));
                 y = b.Op("ScatterElements", {y, i0, in(b, "se_u2", {2, 4})}, A({{"reduction", S("add")}}));
                 return b.Op("ScatterElements", {y, i0, in(b, "se_u3", {2, 4})}, A({{"reduction", S("mul")}}));
               }});
  // OneHot: negative and out-of-range indices, on an inner axis, int64
  // indices and a float depth.
  c.push_back({"OneHot", [in](B& b) {
                 ValueId idx = b.ConstInts({0, 3, -1, 5, -6, 2}, Shape{2, 3});
                 ValueId depth = b.Const(TensorData::FromFloat({4.0f}, {}));
                 ValueId values = b.Const(TensorData::FromFloat({-0.5f, 2.0f}, {2}));
                 ValueId hot = b.Op("OneHot", {idx, depth, values}, A({{"axis", I(1)}}));
                 return b.Op("Mul", {hot, in(b, "oh_x", {2, 4, 3})});
               }});
  // Max and Min of one and of three inputs (broadcast).
  c.push_back({"Max_Min_variadic", [in](B& b) {
                 ValueId x = in(b, "mm3_x", {2, 3, 4}), y = in(b, "mm3_y", {3, 1}), z = in(b, "mm3_z", {4});
                 return b.Op("Add", {b.Op("Max", {x, y, z}), b.Op("Min", {b.Op("Min", {x, y, z})})});
               }});
  // LRN: windows of 3 and 5 channels (ONNX Runtime refuses even sizes).
  for (int64_t size : {3, 5}) {
    c.push_back({"LRN_size" + std::to_string(size), [size, in](B& b) {
                   return b.Op("LRN", {in(b, "lrn_x" + std::to_string(size), {2, 5, 3, 3})},
                               A({{"size", I(size)}, {"alpha", F(0.02f)}, {"beta", F(0.6f)}, {"bias", F(1.5f)}}));
                 }});
  }
  c.push_back({"MeanVarianceNormalization", [in](B& b) {
                 ValueId x = in(b, "mvn_x", {2, 3, 4, 5});
                 return b.Op("Add", {b.Op("MeanVarianceNormalization", {x}),
                                     b.Op("MeanVarianceNormalization", {x}, A({{"axes", Is({1, -1})}}))});
               }});
  // GridSample: each mode and padding, the grid reaching outside [-1, 1].
  for (const char* mode : {"bilinear", "nearest", "bicubic"}) {
    for (const char* padding : {"zeros", "border", "reflection"}) {
      const std::string name = std::string("GridSample_") + mode + "_" + padding;
      const int64_t corners = std::string(padding) == "border";
      c.push_back({name, [name, mode, padding, corners, in](B& b) {
                     ValueId grid = b.Op("Mul", {in(b, name + "_g", {2, 3, 4, 2}), b.ConstFloat(0.8f)});
                     return b.Op("GridSample", {in(b, name + "_x", {2, 3, 5, 6}), grid},
                                 A({{"mode", S(mode)}, {"padding_mode", S(padding)}, {"align_corners", I(corners)}}));
                   }});
    }
  }
  // GatherND: plain (k = 2, a negative index), slices (k = 1), batch_dims 1.
  c.push_back({"GatherND", [in](B& b) {
                 ValueId x = in(b, "gnd_x", {3, 4, 2});
                 ValueId elements = b.Op("GatherND", {x, b.ConstInts({0, 1, 2, -1, 1, 3}, Shape{3, 2})});  // [3, 2]
                 ValueId rows = b.Op("GatherND", {x, b.ConstInts({2, 0, 1}, Shape{3, 1})});                // [3, 4, 2]
                 ValueId batched =
                     b.Op("GatherND", {x, b.ConstInts({3, 0, -2}, Shape{3, 1})}, A({{"batch_dims", I(1)}}));  // [3, 2]
                 ValueId summed = b.Op("ReduceSum", {rows, b.ConstInts({1})}, A({{"keepdims", I(0)}}));
                 return b.Op("Add", {b.Op("Add", {elements, batched}), summed});
               }});
  for (int64_t batch_axis : {0, 1}) {
    const std::string name = "ReverseSequence_batch" + std::to_string(batch_axis);
    c.push_back({name, [name, batch_axis, in](B& b) {
                   ValueId lens = b.ConstInts(std::vector<int64_t>{4, 0, 1, 3}, Shape{4});
                   Shape shape = batch_axis == 0 ? Shape{4, 5, 2} : Shape{5, 4, 2};
                   return b.Op("ReverseSequence", {in(b, name + "_x", shape), lens},
                               A({{"batch_axis", I(batch_axis)}, {"time_axis", I(1 - batch_axis)}}));
                 }});
  }
  // EyeLike: above and below the diagonal, int64 and float (folded: the
  // input's shape is static).
  c.push_back(
      {"EyeLike", [in](B& b) {
         ValueId x = in(b, "eye_x", {3, 5});
         ValueId up = b.Op("EyeLike", {x}, A({{"k", I(2)}}));
         ValueId down = b.Op("Cast", {b.Op("EyeLike", {x}, A({{"k", I(-1)}, {"dtype", I(7)}}))}, A({{"to", I(1)}}));
         return b.Op("Add", {b.Op("Mul", {x, up}), down});
       }});
  c.push_back({"Size", [in](B& b) {
                 ValueId x = in(b, "size_x", {2, 3, 4});
                 return b.Op("Mul", {x, b.Op("Cast", {b.Op("Size", {x})}, A({{"to", I(1)}}))});
               }});
  return c;
}

}  // namespace rlflow::testing
