#pragma once
// Tensor types and immutable host tensor data (weights, constants).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace rlflow {

// Element types. The numeric codes are ONNX's TensorProto.DataType codes.
enum class DType : int32_t {
  kUndefined = 0,
  kFloat32 = 1,
  kUInt8 = 2,
  kInt8 = 3,
  kUInt16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,
  kBool = 9,
  kFloat16 = 10,
  kFloat64 = 11,
  kUInt32 = 12,
  kUInt64 = 13,
  kBFloat16 = 16,
};

// Size in bytes of one element (0 for undefined/string).
size_t DTypeSize(DType dtype);
std::string DTypeName(DType dtype);
bool IsFloatingPoint(DType dtype);
bool IsInteger(DType dtype);  // signed or unsigned integers (not bool)
// Parses an ONNX data type code; unknown codes give kUndefined.
DType DTypeFromCode(int32_t code);

// Dimensions; kUnknownDim marks a dimension whose size is not known.
using Shape = std::vector<int64_t>;
constexpr int64_t kUnknownDim = -1;

std::string ShapeToString(const Shape& shape);
// Product of the dimensions; -1 if any is unknown. 1 for a scalar. Throws
// rlflow::Error if the product overflows 64 bits.
int64_t NumElements(const Shape& shape);

struct TensorType;
// The largest tensor (in bytes) a model may have; larger ones are refused
// before anything is allocated. Process-wide; 8 GiB unless set.
int64_t MaxTensorBytes();
void SetMaxTensorBytes(int64_t bytes);

struct TensorType {
  DType dtype = DType::kUndefined;
  Shape shape;
  bool rank_known = true;  // false: nothing is known about the shape

  bool IsStatic() const;  // rank known and every dimension known
  int64_t NumElements() const { return rlflow::NumElements(shape); }
  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  std::string ToString() const;  // e.g. "float32[1,3,224,224]"
  bool operator==(const TensorType& other) const;
  bool operator!=(const TensorType& other) const { return !(*this == other); }
};

// Throws rlflow::Error naming `what` if a tensor of this type would exceed
// MaxTensorBytes() (unknown shapes pass).
void CheckTensorFits(const TensorType& type, const std::string& what);

// `v` rounded to the nearest value of a floating-point `dtype` (ties to even),
// as a double: what a constant of that type holds.
double RoundToFloatType(double v, DType dtype);

// Immutable tensor contents (row-major, little-endian), shared cheaply
// between graphs: copying a Graph never copies weights.
class TensorData {
 public:
  TensorData(DType dtype, Shape shape, std::string bytes);
  static TensorData FromInt64(const std::vector<int64_t>& values, Shape shape);
  static TensorData FromFloat(const std::vector<float>& values, Shape shape);
  // Values rounded (to nearest, ties to even) to a floating-point `dtype`:
  // float32, float64, float16 or bfloat16.
  static TensorData FromDouble(const std::vector<double>& values, Shape shape, DType dtype);
  static TensorData ScalarInt64(int64_t value) { return FromInt64({value}, {}); }
  // Zeros of a static type (a weight whose values do not matter, for timing).
  // kMaxTimingZeros: the most elements such a stand-in has (1 GiB of
  // float32); a larger one stays an input.
  static constexpr int64_t kMaxTimingZeros = int64_t{1} << 28;
  static TensorData Zeros(const TensorType& type) {
    return TensorData(type.dtype, type.shape,
                      std::string(static_cast<size_t>(type.NumElements()) * DTypeSize(type.dtype), '\0'));
  }

  const TensorType& type() const { return type_; }
  DType dtype() const { return type_.dtype; }
  const Shape& shape() const { return type_.shape; }
  int64_t NumElements() const { return type_.NumElements(); }
  const void* data() const { return bytes_->data(); }
  const std::string& bytes() const { return *bytes_; }
  size_t size_bytes() const { return bytes_->size(); }
  // A hash of dtype, shape and contents, computed once at construction.
  uint64_t content_hash() const { return hash_; }
  // Values of an integer (or bool) tensor as int64.
  std::vector<int64_t> ToInt64() const;
  // Values of a floating-point or integer tensor as double.
  std::vector<double> ToDouble() const;
  bool operator==(const TensorData& other) const;

 private:
  TensorType type_;
  std::shared_ptr<const std::string> bytes_;
  uint64_t hash_ = 0;
};

using TensorDataPtr = std::shared_ptr<const TensorData>;

// Fast 64-bit hashing used for structural and content hashes.
uint64_t HashBytes(const void* data, size_t size, uint64_t seed = 0);
uint64_t HashCombine(uint64_t a, uint64_t b);
uint64_t HashString(const std::string& s);

}  // namespace rlflow
