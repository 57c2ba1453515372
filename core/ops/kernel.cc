#include "core/ops/kernel.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>

#include <cstring>

#include "core/error.h"

namespace rlflow {

const at::Tensor& KernelContext::in(int i) const {
  if (!has(i)) Fail("input " + std::to_string(i) + " is missing");
  return inputs[i];
}

std::vector<int64_t> KernelContext::IntsInput(int i) const {
  at::Tensor t = in(i).to(at::kLong).contiguous().reshape({-1});
  const int64_t* p = t.data_ptr<int64_t>();
  return std::vector<int64_t>(p, p + t.numel());
}

at::ScalarType ToAtenType(DType d) {
  switch (d) {
    case DType::kFloat32: return at::kFloat;
    case DType::kFloat64: return at::kDouble;
    case DType::kFloat16: return at::kHalf;
    case DType::kBFloat16: return at::kBFloat16;
    case DType::kInt64: return at::kLong;
    case DType::kInt32: return at::kInt;
    case DType::kInt16: return at::kShort;
    case DType::kInt8: return at::kChar;
    case DType::kUInt8: return at::kByte;
    case DType::kBool: return at::kBool;
    default: Fail("element type ", DTypeName(d), " is not supported by the CPU executor");
  }
}

DType FromAtenType(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return DType::kFloat32;
    case at::kDouble: return DType::kFloat64;
    case at::kHalf: return DType::kFloat16;
    case at::kBFloat16: return DType::kBFloat16;
    case at::kLong: return DType::kInt64;
    case at::kInt: return DType::kInt32;
    case at::kShort: return DType::kInt16;
    case at::kChar: return DType::kInt8;
    case at::kByte: return DType::kUInt8;
    case at::kBool: return DType::kBool;
    default: Fail("ATen type ", c10::toString(t), " has no rlflow equivalent");
  }
}

at::Tensor ToAten(const TensorDataPtr& data) {
  auto keep = data;
  std::vector<int64_t> sizes(data->shape().begin(), data->shape().end());
  // ATen never writes to these: kernels do not modify their inputs.
  void* ptr = const_cast<void*>(data->data());
  if (data->size_bytes() == 0) return at::empty(sizes, at::TensorOptions().dtype(ToAtenType(data->dtype())));
  return at::from_blob(
      ptr, sizes, [keep](void*) {}, at::TensorOptions().dtype(ToAtenType(data->dtype())));
}

TensorData FromAten(const at::Tensor& tensor) {
  at::Tensor t = tensor.contiguous();
  Shape shape(t.sizes().begin(), t.sizes().end());
  std::string bytes(static_cast<size_t>(t.numel()) * t.element_size(), '\0');
  if (!bytes.empty()) std::memcpy(&bytes[0], t.data_ptr(), bytes.size());
  return TensorData(FromAtenType(t.scalar_type()), std::move(shape), std::move(bytes));
}

}  // namespace rlflow

namespace rlflow {

const OpDef& KernelDefFor(const Node& node) {
  const OpDef* def = node.opaque() ? nullptr : OpRegistry::Global().Find(node.domain, node.op);
  if (def == nullptr || def->kernel == nullptr)
    Fail("node ", node.Describe(), ": operator '", (node.domain.empty() ? "" : node.domain + "."), node.op,
         "' has no CPU kernel (it is kept as an opaque node)");
  return *def;
}

std::vector<at::Tensor> RunKernel(const Node& node, const OpDef& def, std::vector<at::Tensor> inputs,
                                  const std::vector<DType>& output_types) {
  bool widened = false;
  if (!def.half_kernel) {
    for (at::Tensor& t : inputs) {
      if (t.defined() && (t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16)) {
        t = t.to(at::kFloat);
        widened = true;
      }
    }
  }
  KernelContext ctx(node, def, std::move(inputs));
  try {
    def.kernel(ctx);
    if (widened) {
      for (size_t k = 0; k < ctx.outputs.size() && k < output_types.size(); ++k) {
        const DType t = output_types[k];
        if ((t == DType::kFloat16 || t == DType::kBFloat16) && ctx.outputs[k].defined() &&
            ctx.outputs[k].scalar_type() == at::kFloat)
          ctx.outputs[k] = ctx.outputs[k].to(ToAtenType(t));
      }
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    Fail("node ", node.Describe(), " failed: ", FirstLine(e.what()));
  }
  if (ctx.outputs.size() < node.outputs.size())
    Fail("node ", node.Describe(), ": kernel produced ", ctx.outputs.size(), " outputs, expected ",
         node.outputs.size());
  ctx.outputs.resize(node.outputs.size());
  return std::move(ctx.outputs);
}

std::vector<DType> OutputTypes(const Graph& g, const Node& node) {
  std::vector<DType> types;
  types.reserve(node.outputs.size());
  for (ValueId v : node.outputs) types.push_back(v == kNoValue ? DType::kUndefined : g.value(v).type.dtype);
  return types;
}

}  // namespace rlflow
