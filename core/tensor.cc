#include "core/tensor.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <sstream>

#include "core/error.h"

namespace rlflow {

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return 4;
    case DType::kUInt8: return 1;
    case DType::kInt8: return 1;
    case DType::kUInt16: return 2;
    case DType::kInt16: return 2;
    case DType::kInt32: return 4;
    case DType::kInt64: return 8;
    case DType::kBool: return 1;
    case DType::kFloat16: return 2;
    case DType::kFloat64: return 8;
    case DType::kUInt32: return 4;
    case DType::kUInt64: return 8;
    case DType::kBFloat16: return 2;
    case DType::kString:
    case DType::kUndefined: return 0;
  }
  return 0;
}

std::string DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "float32";
    case DType::kUInt8: return "uint8";
    case DType::kInt8: return "int8";
    case DType::kUInt16: return "uint16";
    case DType::kInt16: return "int16";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kString: return "string";
    case DType::kBool: return "bool";
    case DType::kFloat16: return "float16";
    case DType::kFloat64: return "float64";
    case DType::kUInt32: return "uint32";
    case DType::kUInt64: return "uint64";
    case DType::kBFloat16: return "bfloat16";
    case DType::kUndefined: return "undefined";
  }
  return "undefined";
}

bool IsFloatingPoint(DType d) {
  return d == DType::kFloat32 || d == DType::kFloat64 || d == DType::kFloat16 || d == DType::kBFloat16;
}

bool IsInteger(DType d) {
  switch (d) {
    case DType::kUInt8:
    case DType::kInt8:
    case DType::kUInt16:
    case DType::kInt16:
    case DType::kInt32:
    case DType::kInt64:
    case DType::kUInt32:
    case DType::kUInt64: return true;
    default: return false;
  }
}

DType DTypeFromCode(int32_t code) {
  switch (code) {
    case 1:
    case 2:
    case 3:
    case 4:
    case 5:
    case 6:
    case 7:
    case 8:
    case 9:
    case 10:
    case 11:
    case 12:
    case 13:
    case 16: return static_cast<DType>(code);
    default: return DType::kUndefined;
  }
}

std::string ShapeToString(const Shape& shape) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) os << ",";
    if (shape[i] == kUnknownDim)
      os << "?";
    else
      os << shape[i];
  }
  os << "]";
  return os.str();
}

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  bool unknown = false;
  for (int64_t d : shape) {
    if (d < 0) {
      unknown = true;
      continue;
    }
    // Overflow-checked: dims such as [2^32, 2^32] must not wrap to 0 elements.
    if (__builtin_mul_overflow(n, d, &n))
      Fail("shape ", ShapeToString(shape), " has more elements than fit in 64 bits");
  }
  return unknown ? -1 : n;
}

namespace {
int64_t max_tensor_bytes = int64_t{8} << 30;
}
int64_t MaxTensorBytes() { return max_tensor_bytes; }
void SetMaxTensorBytes(int64_t bytes) { max_tensor_bytes = bytes; }

void CheckTensorFits(const TensorType& type, const std::string& what) {
  if (!type.rank_known) return;
  int64_t bytes = static_cast<int64_t>(std::max<size_t>(DTypeSize(type.dtype), 1));
  bool overflow = false;
  for (int64_t d : type.shape) {
    if (d < 0) return;
    overflow = overflow || __builtin_mul_overflow(bytes, d, &bytes);
  }
  if (overflow || bytes > max_tensor_bytes)
    Fail(what, " would be ", type.ToString(), ", ",
         overflow ? std::string("more bytes than fit in 64 bits") : std::to_string(bytes >> 20) + " MB",
         ", over the limit of ", max_tensor_bytes >> 20, " MB per tensor");
}

bool TensorType::IsStatic() const {
  if (!rank_known) return false;
  for (int64_t d : shape)
    if (d < 0) return false;
  return true;
}

std::string TensorType::ToString() const { return DTypeName(dtype) + (rank_known ? ShapeToString(shape) : "[...]"); }

bool TensorType::operator==(const TensorType& o) const {
  return dtype == o.dtype && rank_known == o.rank_known && shape == o.shape;
}

// ---- hashing (64-bit mixing in the style of splitmix/wyhash) ----
namespace {
inline uint64_t Mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}
}  // namespace

uint64_t HashBytes(const void* data, size_t size, uint64_t seed) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  uint64_t h = Mix(seed ^ (0x9e3779b97f4a7c15ULL + size));
  // Four independent lanes keep this fast on large weights.
  uint64_t lanes[4] = {h, h ^ 0x1234567ULL, h ^ 0x89abcdefULL, h ^ 0xfedcba98ULL};
  size_t i = 0;
  for (; i + 32 <= size; i += 32) {
    for (int k = 0; k < 4; ++k) {
      uint64_t w;
      std::memcpy(&w, p + i + 8 * k, 8);
      lanes[k] = (lanes[k] ^ w) * 0x9fb21c651e98df25ULL;
      lanes[k] ^= lanes[k] >> 29;
    }
  }
  for (; i + 8 <= size; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    lanes[0] = Mix(lanes[0] ^ w);
  }
  uint64_t tail = 0;
  for (size_t k = 0; i < size; ++i, ++k) tail |= static_cast<uint64_t>(p[i]) << (8 * k);
  lanes[1] = Mix(lanes[1] ^ tail);
  return Mix(lanes[0] ^ Mix(lanes[1] ^ Mix(lanes[2] ^ Mix(lanes[3]))));
}

uint64_t HashCombine(uint64_t a, uint64_t b) {
  return Mix(a * 0x9e3779b97f4a7c15ULL ^ (b + 0x632be59bd9b4e019ULL + (a << 6) + (a >> 2)));
}

uint64_t HashString(const std::string& s) { return HashBytes(s.data(), s.size(), 0x5bd1e995); }

// ---- TensorData ----
TensorData::TensorData(DType dtype, Shape shape, std::string bytes) {
  type_.dtype = dtype;
  type_.shape = std::move(shape);
  for (int64_t d : type_.shape) RLFLOW_CHECK(d >= 0, "tensor data with unknown dimension ", ShapeToString(type_.shape));
  size_t expected = static_cast<size_t>(type_.NumElements()) * DTypeSize(dtype);
  RLFLOW_CHECK(dtype != DType::kUndefined && dtype != DType::kString, "tensor data of type ", DTypeName(dtype),
               " is not supported");
  RLFLOW_CHECK(bytes.size() == expected, "tensor data of type ", type_.ToString(), " has ", bytes.size(),
               " bytes, expected ", expected);
  bytes_ = std::make_shared<const std::string>(std::move(bytes));
  uint64_t h = HashBytes(bytes_->data(), bytes_->size(), static_cast<uint64_t>(dtype));
  for (int64_t d : type_.shape) h = HashCombine(h, static_cast<uint64_t>(d));
  hash_ = h;
}

TensorData TensorData::FromInt64(const std::vector<int64_t>& values, Shape shape) {
  RLFLOW_CHECK(static_cast<int64_t>(values.size()) == rlflow::NumElements(shape), "FromInt64: ", values.size(),
               " values for shape ", ShapeToString(shape));
  std::string bytes(values.size() * 8, '\0');
  if (!values.empty()) std::memcpy(&bytes[0], values.data(), bytes.size());
  return TensorData(DType::kInt64, std::move(shape), std::move(bytes));
}

TensorData TensorData::FromFloat(const std::vector<float>& values, Shape shape) {
  RLFLOW_CHECK(static_cast<int64_t>(values.size()) == rlflow::NumElements(shape), "FromFloat: ", values.size(),
               " values for shape ", ShapeToString(shape));
  std::string bytes(values.size() * 4, '\0');
  if (!values.empty()) std::memcpy(&bytes[0], values.data(), bytes.size());
  return TensorData(DType::kFloat32, std::move(shape), std::move(bytes));
}

namespace {

// IEEE 754 binary16 and bfloat16 from and to their bits.
double HalfToDouble(uint16_t h) {
  const double sign = (h & 0x8000u) ? -1.0 : 1.0;
  const int exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  if (exp == 0) return sign * std::ldexp(mant, -24);
  if (exp == 31) return mant == 0 ? sign * HUGE_VAL : std::nan("");
  return sign * std::ldexp(1024 + mant, exp - 25);
}

uint16_t DoubleToHalf(double v) {
  const uint16_t sign = std::signbit(v) ? 0x8000u : 0;
  if (std::isnan(v)) return 0x7e00u;
  const double a = std::fabs(v);
  if (std::isinf(a)) return sign | 0x7c00u;
  if (a < std::ldexp(1.0, -14)) return sign | static_cast<uint16_t>(std::nearbyint(std::ldexp(a, 24)));
  int e = 0;
  const double m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  int exp = e - 1 + 15;
  double q = std::nearbyint((m * 2 - 1) * 1024);
  if (q == 1024) {
    q = 0;
    ++exp;
  }
  if (exp >= 31) return sign | 0x7c00u;  // beyond 65504: infinity
  return sign | static_cast<uint16_t>((exp << 10) | static_cast<int>(q));
}

double BFloat16ToDouble(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t DoubleToBFloat16(double v) {
  const float f = static_cast<float>(v);
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if (std::isnan(f)) return 0x7fc0u;
  bits += 0x7fffu + ((bits >> 16) & 1);  // to nearest, ties to even
  return static_cast<uint16_t>(bits >> 16);
}

}  // namespace

double RoundToFloatType(double v, DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return static_cast<float>(v);
    case DType::kFloat64: return v;
    case DType::kFloat16: return HalfToDouble(DoubleToHalf(v));
    case DType::kBFloat16: return BFloat16ToDouble(DoubleToBFloat16(v));
    default: Fail("RoundToFloatType: ", DTypeName(dtype), " is not a floating-point type");
  }
}

TensorData TensorData::FromDouble(const std::vector<double>& values, Shape shape, DType dtype) {
  RLFLOW_CHECK(static_cast<int64_t>(values.size()) == rlflow::NumElements(shape), "FromDouble: ", values.size(),
               " values for shape ", ShapeToString(shape));
  std::string bytes(values.size() * DTypeSize(dtype), '\0');
  for (size_t k = 0; k < values.size(); ++k) {
    char* at = &bytes[k * DTypeSize(dtype)];
    switch (dtype) {
      case DType::kFloat32: {
        const float f = static_cast<float>(values[k]);
        std::memcpy(at, &f, 4);
        break;
      }
      case DType::kFloat64: std::memcpy(at, &values[k], 8); break;
      case DType::kFloat16:
      case DType::kBFloat16: {
        const uint16_t h = dtype == DType::kFloat16 ? DoubleToHalf(values[k]) : DoubleToBFloat16(values[k]);
        std::memcpy(at, &h, 2);
        break;
      }
      default: Fail("FromDouble: ", DTypeName(dtype), " is not a floating-point type");
    }
  }
  return TensorData(dtype, std::move(shape), std::move(bytes));
}

namespace {
template <typename T>
void AppendAs(const std::string& bytes, int64_t n, std::vector<int64_t>* out) {
  for (int64_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, bytes.data() + i * sizeof(T), sizeof(T));
    out->push_back(static_cast<int64_t>(v));
  }
}
template <typename T>
void AppendAsDouble(const std::string& bytes, int64_t n, std::vector<double>* out) {
  for (int64_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, bytes.data() + i * sizeof(T), sizeof(T));
    out->push_back(static_cast<double>(v));
  }
}
}  // namespace

std::vector<int64_t> TensorData::ToInt64() const {
  std::vector<int64_t> out;
  int64_t n = NumElements();
  out.reserve(n);
  switch (dtype()) {
    case DType::kInt64: AppendAs<int64_t>(*bytes_, n, &out); break;
    case DType::kInt32: AppendAs<int32_t>(*bytes_, n, &out); break;
    case DType::kInt16: AppendAs<int16_t>(*bytes_, n, &out); break;
    case DType::kInt8: AppendAs<int8_t>(*bytes_, n, &out); break;
    case DType::kUInt8:
    case DType::kBool: AppendAs<uint8_t>(*bytes_, n, &out); break;
    case DType::kUInt16: AppendAs<uint16_t>(*bytes_, n, &out); break;
    case DType::kUInt32: AppendAs<uint32_t>(*bytes_, n, &out); break;
    case DType::kUInt64: AppendAs<uint64_t>(*bytes_, n, &out); break;
    default: Fail("expected an integer tensor, got ", type_.ToString());
  }
  return out;
}

std::vector<double> TensorData::ToDouble() const {
  std::vector<double> out;
  int64_t n = NumElements();
  out.reserve(n);
  switch (dtype()) {
    case DType::kFloat32: AppendAsDouble<float>(*bytes_, n, &out); break;
    case DType::kFloat64: AppendAsDouble<double>(*bytes_, n, &out); break;
    case DType::kFloat16:
    case DType::kBFloat16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, bytes_->data() + i * 2, 2);
        out.push_back(dtype() == DType::kFloat16 ? HalfToDouble(h) : BFloat16ToDouble(h));
      }
      break;
    default: {
      for (int64_t v : ToInt64()) out.push_back(static_cast<double>(v));
    }
  }
  return out;
}

bool TensorData::operator==(const TensorData& o) const {
  return type_ == o.type_ && hash_ == o.hash_ && *bytes_ == *o.bytes_;
}

}  // namespace rlflow
