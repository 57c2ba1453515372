#include "core/onnx_io.h"

#include <fcntl.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format_lite.h>
#include <onnx/checker.h>
#include <onnx/defs/data_type_utils.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>
#include <onnx/version_converter/convert.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <typeinfo>
#include <unordered_map>

#include "core/error.h"
#include "core/file_util.h"
#include "core/onnx_detail.h"
#include "core/onnx_functions.h"
#include "core/onnx_upgrade.h"
#include "core/op_registry.h"
#include "core/passes/fold_constants.h"

namespace rlflow {
namespace {

using onnx_detail::CollectOuterReads;

bool IsDefaultDomain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

// ---- tensors ----
template <typename Field, typename T>
std::string PackField(const Field& field, int64_t n, const std::string& name) {
  if (static_cast<int64_t>(field.size()) != n)
    Fail("initializer '", name, "' has ", field.size(), " values, its shape needs ", n);
  std::string bytes(static_cast<size_t>(n) * sizeof(T), '\0');
  for (int64_t i = 0; i < n; ++i) {
    T v = static_cast<T>(field.Get(static_cast<int>(i)));
    std::memcpy(&bytes[i * sizeof(T)], &v, sizeof(T));
  }
  return bytes;
}

bool IsExternal(const onnx::TensorProto& t) { return t.data_location() == onnx::TensorProto::EXTERNAL; }

std::string ExternalLocation(const onnx::TensorProto& t) {
  for (const auto& e : t.external_data())
    if (e.key() == "location") return e.value();
  return "";
}

// The bytes of a tensor stored in an external data file (ONNX's external
// data: "location" relative to the model's directory, "offset" and "length"
// in bytes; "checksum" is not checked). Errors name the tensor and the file.
// Where a tensor's external data is: its file (open, read-only) and the
// byte range there, checked against the file's size.
struct ExternalSpan {
  int fd = -1;
  std::string path;
  int64_t offset = 0, length = 0;
  ExternalSpan() = default;
  ExternalSpan(const ExternalSpan&) = delete;
  ExternalSpan& operator=(const ExternalSpan&) = delete;
  ~ExternalSpan() {
    if (fd >= 0) ::close(fd);
  }
  // Bytes [offset + from, offset + from + n) into `out`.
  void Read(int64_t from, size_t n, char* out, const std::string& what) const {
    size_t done = 0;
    while (done < n) {
      ssize_t k = ::pread(fd, out + done, std::min(n - done, kMaxBytesPerIoCall),
                          static_cast<off_t>(offset + from + static_cast<int64_t>(done)));
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0)
        Fail(what, ": reading its external data file '", path, "' failed: ", std::strerror(k < 0 ? errno : EIO));
      done += static_cast<size_t>(k);
    }
  }
};

void OpenExternalData(const onnx::TensorProto& t, const std::string* dir, const std::string& what, ExternalSpan* span) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& e : t.external_data()) {
    auto number = [&](const char* key) {
      size_t used = 0;
      long long v = -1;
      try {
        v = std::stoll(e.value(), &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == 0 || used != e.value().size() || v < 0)
        Fail(what, ": its external data ", key, " '", e.value(), "' is not a byte count");
      return static_cast<int64_t>(v);
    };
    if (e.key() == "location") {
      location = e.value();
    } else if (e.key() == "offset") {
      offset = number("offset");
    } else if (e.key() == "length") {
      length = number("length");
    }
  }
  if (location.empty()) Fail(what, " is stored externally but its external_data names no location");
  if (dir == nullptr)
    Fail(what, " is stored in the external data file '", location,
         "', which is read only when the model is read from its file (the file's directory holds the data)");
  if (location[0] == '/')
    Fail(what, ": its external data location '", location,
         "' is an absolute path (ONNX requires a path relative to the model's directory)");
  for (size_t p = 0; p <= location.size();) {
    size_t q = location.find('/', p);
    if (q == std::string::npos) q = location.size();
    if (location.compare(p, q - p, "..") == 0 && q - p == 2)
      Fail(what, ": its external data location '", location, "' leaves the model's directory");
    p = q + 1;
  }
  const std::string path = (dir->empty() ? std::string(".") : *dir) + "/" + location;
  span->path = path;
  span->fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (span->fd < 0) Fail(what, ": cannot read its external data file '", path, "': ", std::strerror(errno));
  struct stat st;
  if (::fstat(span->fd, &st) != 0 || !S_ISREG(st.st_mode))
    Fail(what, ": its external data file '", path, "' is not a regular file");
  const int64_t size = static_cast<int64_t>(st.st_size);
  if (length < 0) length = std::max<int64_t>(0, size - offset);
  if (offset > size || length > size - offset)
    Fail(what, ": its external data file '", path, "' has ", size, " bytes; the tensor is stored at bytes ", offset,
         " to ", offset + length, " (truncated file?)");
  span->offset = offset;
  span->length = length;
}

std::string ReadExternalData(const onnx::TensorProto& t, const std::string* dir, const std::string& label = "") {
  const std::string what = label.empty() ? "tensor '" + t.name() + "'" : label;
  ExternalSpan span;
  OpenExternalData(t, dir, what, &span);
  std::string bytes(static_cast<size_t>(span.length), '\0');
  span.Read(0, bytes.size(), bytes.data(), what);
  return bytes;
}

// `take`: `t` itself, mutable: its raw data is moved into the result (not
// copied), leaving `t` without it.
TensorData FromTensorProto(const onnx::TensorProto& t, const std::string* external_dir = nullptr,
                           onnx::TensorProto* take = nullptr) {
  const std::string& name = t.name();
  if (t.has_segment()) Fail("tensor '", name, "' is segmented, which is not supported");
  DType dtype = DTypeFromCode(t.data_type());
  if (dtype == DType::kUndefined || dtype == DType::kString)
    Fail("tensor '", name, "' has unsupported element type ", t.data_type());
  Shape shape(t.dims().begin(), t.dims().end());
  for (int64_t d : shape)
    if (d < 0) Fail("tensor '", name, "' has a negative dimension");
  TensorType type;
  type.dtype = dtype;
  type.shape = shape;
  CheckTensorFits(type, "tensor '" + name + "'");
  int64_t n = NumElements(shape);
  if (IsExternal(t)) {
    std::string raw = ReadExternalData(t, external_dir);
    const size_t need = static_cast<size_t>(n) * DTypeSize(dtype);
    if (raw.size() != need)
      Fail("tensor '", name, "' has ", raw.size(), " bytes of external data in '", ExternalLocation(t), "', its type ",
           DTypeName(dtype), ShapeToString(shape), " needs ", need, raw.size() < need ? " (truncated file?)" : "");
    return TensorData(dtype, shape, std::move(raw));
  }
  if (t.has_raw_data()) {
    if (t.raw_data().size() != static_cast<size_t>(n) * DTypeSize(dtype))
      Fail("tensor '", name, "' has ", t.raw_data().size(), " bytes of data, its type ", DTypeName(dtype),
           ShapeToString(shape), " needs ", static_cast<size_t>(n) * DTypeSize(dtype));
    if (take != nullptr) return TensorData(dtype, shape, std::move(*take->mutable_raw_data()));
    return TensorData(dtype, shape, t.raw_data());
  }
  std::string bytes;
  switch (dtype) {
    case DType::kFloat32: bytes = PackField<decltype(t.float_data()), float>(t.float_data(), n, name); break;
    case DType::kFloat64: bytes = PackField<decltype(t.double_data()), double>(t.double_data(), n, name); break;
    case DType::kInt64: bytes = PackField<decltype(t.int64_data()), int64_t>(t.int64_data(), n, name); break;
    case DType::kInt32: bytes = PackField<decltype(t.int32_data()), int32_t>(t.int32_data(), n, name); break;
    case DType::kInt16: bytes = PackField<decltype(t.int32_data()), int16_t>(t.int32_data(), n, name); break;
    case DType::kInt8: bytes = PackField<decltype(t.int32_data()), int8_t>(t.int32_data(), n, name); break;
    case DType::kUInt16:
    case DType::kFloat16:
    case DType::kBFloat16: bytes = PackField<decltype(t.int32_data()), uint16_t>(t.int32_data(), n, name); break;
    case DType::kUInt8:
    case DType::kBool: bytes = PackField<decltype(t.int32_data()), uint8_t>(t.int32_data(), n, name); break;
    case DType::kUInt32: bytes = PackField<decltype(t.uint64_data()), uint32_t>(t.uint64_data(), n, name); break;
    case DType::kUInt64: bytes = PackField<decltype(t.uint64_data()), uint64_t>(t.uint64_data(), n, name); break;
    default: Fail("tensor '", name, "' has unsupported element type ", DTypeName(dtype));
  }
  return TensorData(dtype, shape, std::move(bytes));
}

// The external data location ReimportGraph writes for a weight it passes
// by reference (WriteOptions::weights_by_reference): no file, the import
// takes the tensor from ImportOptions::known_weights.
constexpr char kByReferenceLocation[] = "rlflow-weight-by-reference";

bool IsByReference(const onnx::TensorProto& t) { return IsExternal(t) && ExternalLocation(t) == kByReferenceLocation; }

// Marks `t` as a by-reference stand-in (its data is a known weight).
void MarkByReference(onnx::TensorProto* t) {
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* e = t->add_external_data();
  e->set_key("location");
  e->set_value(kByReferenceLocation);
}

// The known tensor (ImportOptions::known_weights) `t` may share, or null.
const TensorDataPtr* KnownWeight(const onnx::TensorProto& t, const ImportOptions& options) {
  if (!options.known_weights) return nullptr;
  auto it = options.known_weights->find(t.name());
  if (it == options.known_weights->end()) return nullptr;
  const TensorData& known = *it->second;
  const bool same_type =
      static_cast<int32_t>(known.dtype()) == t.data_type() && known.shape() == Shape(t.dims().begin(), t.dims().end());
  if (same_type && IsExternal(t)) return &it->second;
  if (same_type && t.has_raw_data() && t.raw_data().size() == known.size_bytes() &&
      std::memcmp(t.raw_data().data(), known.data(), known.size_bytes()) == 0)
    return &it->second;
  return nullptr;
}

// A top-level initializer's data: the known tensor of its name, element type
// and shape where there is one (shared: an inline one only where its bytes
// are equal; an external one is the same model's file, read once already),
// else read (external data from `external_dir`).
TensorDataPtr InitializerData(const onnx::TensorProto& t, const std::string* external_dir, const ImportOptions& options,
                              onnx::TensorProto* take = nullptr) {
  if (const TensorDataPtr* known = KnownWeight(t, options)) return *known;
  if (options.known_weights && IsByReference(t))
    Fail("tensor '", t.name(), "' was passed by reference, but no weight of its name, type and shape is known");
  return std::make_shared<const TensorData>(FromTensorProto(t, external_dir, take));
}

// ONNX's checker requires a shape field on each input and output of the
// main graph; ONNX Runtime runs models whose interface declares none for
// one (any shape), and rlflow writes the interface as the model declared
// it. The model checked gives each such input or output an empty shape
// (the checker without full_check compares it with nothing); returns their
// types, whose shapes the caller clears after the check.
std::vector<onnx::TypeProto_Tensor*> ShapeTheInterfaceForTheChecker(onnx::ModelProto* model) {
  std::vector<onnx::TypeProto_Tensor*> given;
  auto* g = model->mutable_graph();
  for (auto* list : {g->mutable_input(), g->mutable_output()})
    for (auto& vi : *list)
      if (vi.type().has_tensor_type() && !vi.type().tensor_type().has_shape()) {
        given.push_back(vi.mutable_type()->mutable_tensor_type());
        given.back()->mutable_shape();
      }
  return given;
}

// onnx::checker on an exported model (throws as it does). Weights exported
// by reference have no data to check: the copy checked has them as graph
// inputs of their types (small: the large weights are not in it).
// ONNX Runtime's default-domain operators ONNX lacks at the model's opset
// are checked as custom operators (MoveOrtOnnxDomainOperatorsForChecker).
void CheckExported(const onnx::ModelProto& model) {
  bool by_reference = false;
  for (const auto& t : model.graph().initializer()) by_reference = by_reference || IsByReference(t);
  const bool ort_operators = HasOrtOnnxDomainOperators(model);
  bool shapeless = false;
  for (const auto* list : {&model.graph().input(), &model.graph().output()})
    for (const auto& vi : *list)
      shapeless = shapeless || (vi.type().has_tensor_type() && !vi.type().tensor_type().has_shape());
  if (!by_reference && !ort_operators && !shapeless) {
    onnx::checker::check_model(model);
    return;
  }
  onnx::ModelProto copy = model;
  MoveOrtOnnxDomainOperatorsForChecker(&copy);
  ShapeTheInterfaceForTheChecker(&copy);
  auto* inits = copy.mutable_graph()->mutable_initializer();
  for (int k = inits->size() - 1; k >= 0; --k) {
    const onnx::TensorProto& t = inits->Get(k);
    if (!IsByReference(t)) continue;
    auto* vi = copy.mutable_graph()->add_input();
    vi->set_name(t.name());
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(t.data_type());
    auto* shape = tt->mutable_shape();
    for (int64_t d : t.dims()) shape->add_dim()->set_dim_value(d);
    inits->DeleteSubrange(k, 1);
  }
  onnx::checker::check_model(copy);
}

// A tensor's name, element type and shape, without its data.
void ToTensorHeader(const TensorData& data, const std::string& name, onnx::TensorProto* t) {
  t->set_name(name);
  t->set_data_type(static_cast<int32_t>(data.dtype()));
  for (int64_t d : data.shape()) t->add_dims(d);
}

// A by-reference stand-in for a weight (see kByReferenceLocation).
void ToReferenceProto(const TensorData& data, const std::string& name, onnx::TensorProto* t) {
  ToTensorHeader(data, name, t);
  MarkByReference(t);
}

void ToTensorProto(const TensorData& data, const std::string& name, onnx::TensorProto* t) {
  ToTensorHeader(data, name, t);
  t->set_raw_data(data.bytes());
}

// ---- types ----
TensorType FromTypeProto(const onnx::TypeProto& tp, const std::string& name, bool* is_tensor) {
  TensorType t;
  *is_tensor = tp.has_tensor_type();
  if (!tp.has_tensor_type()) {
    t.rank_known = false;
    return t;
  }
  const auto& tt = tp.tensor_type();
  t.dtype = DTypeFromCode(tt.elem_type());
  if (!tt.has_shape()) {
    t.rank_known = false;
    return t;
  }
  for (const auto& dim : tt.shape().dim()) t.shape.push_back(dim.has_dim_value() ? dim.dim_value() : kUnknownDim);
  (void)name;
  return t;
}

void ToValueInfo(const std::string& name, const TensorType& t, onnx::ValueInfoProto* vi) {
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(static_cast<int32_t>(t.dtype));
  if (t.rank_known) {
    auto* shape = tt->mutable_shape();
    for (int64_t d : t.shape) {
      auto* dim = shape->add_dim();
      if (d >= 0) dim->set_dim_value(d);
    }
  }
}

// ---- attributes ----
Attribute FromAttributeProto(const onnx::AttributeProto& a) {
  switch (a.type()) {
    case onnx::AttributeProto::INT: return Attribute::Int(a.i());
    case onnx::AttributeProto::FLOAT: return Attribute::Float(a.f());
    case onnx::AttributeProto::STRING: return Attribute::String(a.s());
    case onnx::AttributeProto::INTS: return Attribute::Ints({a.ints().begin(), a.ints().end()});
    case onnx::AttributeProto::FLOATS: return Attribute::Floats({a.floats().begin(), a.floats().end()});
    case onnx::AttributeProto::STRINGS: return Attribute::Strings({a.strings().begin(), a.strings().end()});
    case onnx::AttributeProto::TENSOR:
      if (a.t().data_type() != onnx::TensorProto::STRING)
        return Attribute::Tensor(std::make_shared<const TensorData>(FromTensorProto(a.t())));
      break;
    default: break;
  }
  Attribute other;
  other.type = AttrType::kOther;
  other.s = a.SerializeAsString();
  return other;
}

void ToAttributeProto(const std::string& name, const Attribute& attr, onnx::AttributeProto* a) {
  if (attr.type == AttrType::kOther) {
    a->ParseFromString(attr.s);
    a->set_name(name);
    return;
  }
  a->set_name(name);
  switch (attr.type) {
    case AttrType::kInt:
      a->set_type(onnx::AttributeProto::INT);
      a->set_i(attr.i);
      break;
    case AttrType::kFloat:
      a->set_type(onnx::AttributeProto::FLOAT);
      a->set_f(attr.f);
      break;
    case AttrType::kString:
      a->set_type(onnx::AttributeProto::STRING);
      a->set_s(attr.s);
      break;
    case AttrType::kInts:
      a->set_type(onnx::AttributeProto::INTS);
      for (int64_t v : attr.ints) a->add_ints(v);
      break;
    case AttrType::kFloats:
      a->set_type(onnx::AttributeProto::FLOATS);
      for (float v : attr.floats) a->add_floats(v);
      break;
    case AttrType::kStrings:
      a->set_type(onnx::AttributeProto::STRINGS);
      for (const auto& v : attr.strings) a->add_strings(v);
      break;
    case AttrType::kTensor:
      a->set_type(onnx::AttributeProto::TENSOR);
      ToTensorProto(*attr.tensor, "", a->mutable_t());
      break;
    case AttrType::kOther: break;
  }
}

// Why a node cannot be modelled (empty if it can).
std::string ModelledReason(const onnx::NodeProto& np, const OpDef* def, int64_t opset, const AttributeMap& attrs,
                           const Node& probe) {
  if (def == nullptr) return "not in the op registry";
  if (opset < def->since_opset)
    return IsOrtOnnxDomainOperator(np.op_type(), opset)
               ? "ONNX Runtime's own operator (ONNX has it from opset " + std::to_string(def->since_opset) + ")"
               : "opset " + std::to_string(opset) + " predates the modelled semantics";
  for (const auto& [name, attr] : attrs)
    if (attr.type == AttrType::kOther) return "attribute '" + name + "' has a form the registry does not model";
  try {
    CheckNodeAgainstDef(probe, *def);
  } catch (const Error& e) {
    return e.what();
  }
  (void)np;
  return "";
}

std::vector<std::string> ImplicitInputs(const onnx::NodeProto& np) {
  std::set<std::string> reads;
  for (const auto& a : np.attribute()) {
    if (a.has_g()) CollectOuterReads(a.g(), {}, &reads);
    for (const auto& sub : a.graphs()) CollectOuterReads(sub, {}, &reads);
  }
  return {reads.begin(), reads.end()};
}

std::string NodeLabel(const onnx::NodeProto& np, int k) {
  return "'" + (np.name().empty() ? np.op_type() + "_" + std::to_string(k) : np.name()) + "' (" + np.op_type() + ")";
}

// Checks that every tensor a node reads is defined exactly once and puts the
// nodes in topological order (ONNX's shape inference assumes both and
// crashes otherwise). Errors name the node.
bool CheckAndSortNodes(onnx::GraphProto* gp, const std::string& what) {
  std::unordered_map<std::string, int> producer;  // tensor -> node index (-1: input/initializer)
  for (const auto& t : gp->initializer()) producer[t.name()] = -1;
  for (const auto& vi : gp->input()) producer[vi.name()] = -1;
  const int n = gp->node_size();
  for (int k = 0; k < n; ++k) {
    for (const auto& o : gp->node(k).output()) {
      if (o.empty()) continue;
      auto [it, inserted] = producer.emplace(o, k);
      if (!inserted) Fail("tensor '", o, "' is defined more than once (node ", NodeLabel(gp->node(k), k), ")");
    }
  }
  std::vector<std::vector<int>> users(n);
  std::vector<int> pending(n, 0);
  for (int k = 0; k < n; ++k) {
    const onnx::NodeProto& np = gp->node(k);
    std::vector<std::string> reads(np.input().begin(), np.input().end());
    for (const auto& in : ImplicitInputs(np)) reads.push_back(in);
    std::set<int> deps;
    for (const auto& in : reads) {
      if (in.empty()) continue;
      auto it = producer.find(in);
      if (it == producer.end())
        Fail("node ", NodeLabel(np, k), " reads tensor '", in,
             "', which is not a graph input, an initializer or a node output");
      if (it->second >= 0) deps.insert(it->second);
    }
    for (int d : deps) users[d].push_back(k);
    pending[k] = static_cast<int>(deps.size());
  }
  for (const auto& vi : gp->output())
    if (!producer.count(vi.name()))
      Fail("graph output '", vi.name(), "' is not produced by any node, input or initializer");
  std::vector<int> order;
  std::vector<int> ready;
  for (int k = n - 1; k >= 0; --k)
    if (pending[k] == 0) ready.push_back(k);
  // Stable: among ready nodes, the earliest in the file first.
  std::set<int> queue(ready.begin(), ready.end());
  while (!queue.empty()) {
    int k = *queue.begin();
    queue.erase(queue.begin());
    order.push_back(k);
    for (int u : users[k])
      if (--pending[u] == 0) queue.insert(u);
  }
  if (static_cast<int>(order.size()) != n) {
    for (int k = 0; k < n; ++k)
      if (pending[k] > 0) Fail("model ", what, " has a cycle through node ", NodeLabel(gp->node(k), k));
  }
  bool sorted = true;
  for (int k = 0; k < n; ++k) sorted = sorted && order[k] == k;
  if (sorted) return false;
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  for (int k : order) *nodes.Add() = gp->node(k);
  gp->mutable_node()->Swap(&nodes);
  return true;
}

// A sparse tensor (COO: values [NNZ], indices [NNZ] linearised or
// [NNZ, rank]) as the dense tensor it stands for, named as it is. Errors name
// the tensor.
onnx::TensorProto DenseFromSparse(const onnx::SparseTensorProto& sp) {
  const std::string& name = sp.values().name();
  Shape shape(sp.dims().begin(), sp.dims().end());
  TensorData values = FromTensorProto(sp.values());
  TensorType dense{values.dtype(), shape, true};
  CheckTensorFits(dense, "sparse tensor '" + name + "'");
  const int64_t n = dense.NumElements();
  const int64_t nnz = values.NumElements();
  if (values.shape().size() != 1) Fail("sparse tensor '", name, "': its values are not 1-D");
  std::vector<int64_t> indices;
  if (sp.has_indices()) indices = FromTensorProto(sp.indices()).ToInt64();
  const bool per_axis = sp.has_indices() && sp.indices().dims_size() == 2;
  if (static_cast<int64_t>(indices.size()) != nnz * (per_axis ? static_cast<int64_t>(shape.size()) : 1))
    Fail("sparse tensor '", name, "': ", indices.size(), " indices for ", nnz, " values of a tensor of rank ",
         shape.size());
  const size_t item = DTypeSize(values.dtype());
  std::string bytes(static_cast<size_t>(n) * item, '\0');
  for (int64_t k = 0; k < nnz; ++k) {
    int64_t at = 0;
    if (per_axis) {
      for (size_t a = 0; a < shape.size(); ++a) {
        const int64_t i = indices[static_cast<size_t>(k) * shape.size() + a];
        if (i < 0 || i >= shape[a]) Fail("sparse tensor '", name, "': index ", i, " out of range at axis ", a);
        at = at * shape[a] + i;
      }
    } else {
      at = indices[static_cast<size_t>(k)];
      if (at < 0 || at >= n) Fail("sparse tensor '", name, "': index ", at, " out of range for ", n, " elements");
    }
    std::memcpy(bytes.data() + static_cast<size_t>(at) * item,
                static_cast<const char*>(values.data()) + static_cast<size_t>(k) * item, item);
  }
  onnx::TensorProto t;
  ToTensorProto(TensorData(values.dtype(), shape, std::move(bytes)), name, &t);
  return t;
}

// Sparse initializers and Constant nodes of a sparse value made dense, as
// ONNX Runtime does at load (rlflow's graph and writer hold dense tensors).
// Returns how many.
int DensifySparseTensors(onnx::GraphProto* gp) {
  int made = 0;
  for (const auto& sp : gp->sparse_initializer()) {
    *gp->add_initializer() = DenseFromSparse(sp);
    ++made;
  }
  gp->clear_sparse_initializer();
  for (auto& np : *gp->mutable_node()) {
    for (auto& a : *np.mutable_attribute()) {
      if (np.op_type() == "Constant" && np.domain().empty() && a.name() == "sparse_value" && a.has_sparse_tensor()) {
        onnx::TensorProto t = DenseFromSparse(a.sparse_tensor());
        t.clear_name();
        a.set_name("value");
        a.set_type(onnx::AttributeProto::TENSOR);
        a.clear_sparse_tensor();
        *a.mutable_t() = std::move(t);
        ++made;
      }
      if (a.has_g()) made += DensifySparseTensors(a.mutable_g());
      for (auto& g : *a.mutable_graphs()) made += DensifySparseTensors(&g);
    }
  }
  return made;
}

// Node names used by more than one node of a graph (hand-edited models,
// graphs merged by tools), which ONNX Runtime refuses ("two nodes with same
// node name"): each later one renamed `name_2`, `name_3`, ... (a name no
// node of the graph has), in subgraphs too, each graph on its own. Returns
// the names renamed.
std::vector<std::string> RenameDuplicateNodeNames(onnx::GraphProto* gp) {
  std::vector<std::string> renamed;
  std::set<std::string> names;
  for (const auto& np : gp->node()) names.insert(np.name());
  std::set<std::string> seen;
  for (auto& np : *gp->mutable_node()) {
    if (!np.name().empty() && !seen.insert(np.name()).second) {
      int k = 2;
      while (names.count(np.name() + "_" + std::to_string(k))) ++k;
      renamed.push_back(np.name());
      np.set_name(np.name() + "_" + std::to_string(k));
      names.insert(np.name());
      seen.insert(np.name());
    }
    for (auto& a : *np.mutable_attribute()) {
      auto sub = [&](onnx::GraphProto* g) {
        for (auto& name : RenameDuplicateNodeNames(g)) renamed.push_back(std::move(name));
      };
      if (a.has_g()) sub(a.mutable_g());
      for (auto& g : *a.mutable_graphs()) sub(&g);
    }
  }
  return renamed;
}

// Declared types and initializers that contradict each other or the ONNX
// spec, which ONNX Runtime refuses: negative dimensions, and a graph input
// whose initializer (its default value, or its weight before IR 4) has
// another element type or shape.
void CheckDeclaredTypes(const onnx::GraphProto& gp) {
  auto check_dims = [](const onnx::ValueInfoProto& vi, const char* kind) {
    if (!vi.type().has_tensor_type() || !vi.type().tensor_type().has_shape()) return;
    const auto& dims = vi.type().tensor_type().shape().dim();
    for (int k = 0; k < dims.size(); ++k)
      if (dims.Get(k).has_dim_value() && dims.Get(k).dim_value() < 0)
        Fail(kind, " '", vi.name(), "' declares dimension ", dims.Get(k).dim_value(), " at axis ", k,
             "; dimensions are >= 0 (a symbolic dimension has a name, dim_param)");
  };
  for (const auto& vi : gp.input()) check_dims(vi, "graph input");
  for (const auto& vi : gp.output()) check_dims(vi, "graph output");
  for (const auto& vi : gp.value_info()) check_dims(vi, "tensor");
  std::map<std::string, const onnx::TensorProto*> inits;
  for (const auto& t : gp.initializer()) inits[t.name()] = &t;
  for (const auto& vi : gp.input()) {
    auto it = inits.find(vi.name());
    if (it == inits.end() || !vi.type().has_tensor_type()) continue;
    const onnx::TensorProto& t = *it->second;
    const auto& tt = vi.type().tensor_type();
    if (tt.elem_type() != 0 && tt.elem_type() != t.data_type())
      Fail("graph input '", vi.name(), "' is declared with element type ", tt.elem_type(),
           " but its initializer has element type ", t.data_type());
    if (!tt.has_shape()) continue;
    std::string declared = "[", actual = "[";
    bool differ = tt.shape().dim_size() != t.dims_size();
    for (int k = 0; k < tt.shape().dim_size(); ++k) {
      const auto& d = tt.shape().dim(k);
      declared += (k ? "," : "") + (d.has_dim_value()       ? std::to_string(d.dim_value())
                                    : d.dim_param().empty() ? "?"
                                                            : d.dim_param());
      if (!differ && d.has_dim_value() && d.dim_value() != t.dims(k)) differ = true;
    }
    for (int k = 0; k < t.dims_size(); ++k) actual += (k ? "," : "") + std::to_string(t.dims(k));
    if (differ)
      Fail("graph input '", vi.name(), "' is declared with shape ", declared, "] but its initializer has shape ",
           actual, "]");
  }
}

// Each node against ONNX's schema for the model's opset (attribute names and
// types, required attributes, input and output counts), before anything
// interprets it: invalid ONNX is an error naming the node, while valid ONNX
// the registry does not model becomes an opaque node.
void CheckNodesAgainstSchemas(const onnx::ModelProto& model) {
  onnx::checker::CheckerContext ctx;
  ctx.set_ir_version(static_cast<int>(std::min<int64_t>(model.ir_version(), onnx::Version::IR_VERSION)));
  std::unordered_map<std::string, int> opsets;
  for (const auto& imp : model.opset_import()) opsets[imp.domain()] = static_cast<int>(imp.version());
  ctx.set_opset_imports(opsets);
  onnx::checker::LexicalScopeContext names;
  for (const auto& vi : model.graph().input()) names.add(vi.name());
  for (const auto& t : model.graph().initializer()) names.add(t.name());
  for (const auto& n : model.graph().node())
    for (const auto& o : n.output()) names.add(o);
  int default_opset = 0;
  for (const auto& [domain, version] : opsets)
    if (IsDefaultDomain(domain)) default_opset = version;
  for (int k = 0; k < model.graph().node_size(); ++k) {
    const onnx::NodeProto& np = model.graph().node(k);
    if (IsDefaultDomain(np.domain()) && (IsOrtExperimentalOperator(np.op_type(), default_opset) ||
                                         (IsOrtOnnxDomainOperator(np.op_type(), default_opset) &&
                                          onnx::OpSchemaRegistry::Schema(np.op_type(), default_opset, "") == nullptr)))
      continue;  // ONNX has none at this opset; ONNX Runtime's own
    if (IsDefaultDomain(np.domain()) && IsExperimentalOperator(np.op_type(), default_opset))
      Fail("node ", NodeLabel(np, k), " is one of ONNX's experimental operators, removed at opset 10; ",
           default_opset >= 10 ? "ONNX Runtime runs it only in models below opset 10 (this one imports opset " +
                                     std::to_string(default_opset) + ")"
                               : std::string("ONNX Runtime does not run it"));
    try {
      onnx::checker::check_node(np, ctx, names);
    } catch (const std::exception& e) {
      Fail("node ", NodeLabel(np, k), " is not valid ONNX: ", FirstLine(e.what()));
    }
    // Arity against the schema of the model's opset, also where the checker
    // has no opinion (e.g. opsets beyond what it validates).
    auto domain = opsets.find(np.domain() == "ai.onnx" ? "" : np.domain());
    if (domain == opsets.end()) continue;
    const onnx::OpSchema* schema =
        onnx::OpSchemaRegistry::Schema(np.op_type(), domain->second, np.domain() == "ai.onnx" ? "" : np.domain());
    if (schema == nullptr) continue;
    if (np.output_size() > schema->max_output() || np.output_size() < schema->min_output())
      Fail("node ", NodeLabel(np, k), " has ", np.output_size(), " outputs; ", np.op_type(), " has ",
           schema->min_output(), " to ", schema->max_output());
    if (np.input_size() > schema->max_input())
      Fail("node ", NodeLabel(np, k), " has ", np.input_size(), " inputs; ", np.op_type(), " takes at most ",
           schema->max_input());
  }
}

// The given dimensions moved for a second binding (see SecondBinding).
// `declared(input, axis, &name)`: whether that dimension is symbolic in the
// input's declared type (or the type states no shape), and its name.
std::map<std::string, std::vector<int64_t>> MoveGivenDims(
    const std::map<std::string, std::vector<int64_t>>& given,
    const std::function<bool(const std::string&, int, std::string*)>& declared) {
  std::map<std::string, std::vector<int64_t>> out = given;
  std::map<std::string, int> halvable;  // dimension name -> its place among the halvable ones
  for (auto& [input, shape] : out)
    for (size_t k = 0; k < shape.size(); ++k) {
      std::string name;
      if (!declared(input, static_cast<int>(k), &name)) continue;
      if (name.empty()) name = input + "#" + std::to_string(k);
      const int64_t v = shape[k];
      const bool halves = v >= 4 && v % 2 == 0;
      if (halves) halvable.emplace(name, static_cast<int>(halvable.size()));
      shape[k] = halves && halvable.at(name) % 2 == 1 ? 2 * v : OtherBindingOf(v);
    }
  return out;
}

// Where the symbolic dimensions of the graph inputs are bound for the
// search (see ImportOptions::input_shapes).
struct InputBinding {
  int64_t free = 1;
  std::map<std::string, std::vector<int64_t>> given;  // input name -> shape
  std::map<std::string, int64_t> params;              // dim_param -> value, from `given`
  std::map<std::string, std::vector<int64_t>> probe;  // `given` at the second binding (MoveGivenDims)
  std::map<std::string, int64_t> probe_params;        // dim_param -> its value there
  int64_t Value(const std::string& input, int axis, const std::string& param) const {
    auto it = given.find(input);
    if (it != given.end() && axis >= 0 && axis < static_cast<int>(it->second.size())) return it->second[axis];
    if (!param.empty())
      if (auto p = params.find(param); p != params.end()) return p->second;
    return free;
  }
  // Bound to `free`: neither the input's shape nor the dimension's name given.
  bool Free(const std::string& input, const std::string& param) const {
    return !given.count(input) && (param.empty() || !params.count(param));
  }
  // A second binding, to find what depends on the dimension: the free value
  // moves as it always has (1 -> 3, 3 -> 5); a value the user gave moves as
  // OtherBindingOf says.
  int64_t Probe(const std::string& input, int axis, const std::string& param) const {
    const bool user = given.count(input) || (!param.empty() && params.count(param));
    if (!user) return free == 3 ? 5 : 3;
    auto it = probe.find(input);
    if (it != probe.end() && axis >= 0 && axis < static_cast<int>(it->second.size())) return it->second[axis];
    if (!param.empty())
      if (auto p = probe_params.find(param); p != probe_params.end()) return p->second;
    return OtherBindingOf(Value(input, axis, param));
  }
};

std::string DeclaredShapeText(const onnx::TypeProto& type) {
  if (!type.has_tensor_type() || !type.tensor_type().has_shape()) return "(no shape)";
  std::string out = "[";
  const auto& dims = type.tensor_type().shape().dim();
  for (int k = 0; k < dims.size(); ++k) {
    const auto& d = dims.Get(k);
    out += (k ? "," : "") + (d.has_dim_value()       ? std::to_string(d.dim_value())
                             : d.dim_param().empty() ? "?"
                                                     : d.dim_param());
  }
  return out + "]";
}

// The second bindings the import and the check try, in order, for a
// dimension bound to `first` (moved to `probe`): moved, doubled, smaller
// (see the import's probe).
std::vector<int64_t> SecondValuesOf(int64_t first, int64_t probe) {
  return {probe, first > 0 ? 2 * first : 2, SmallerBindingOf(first)};
}

// Symbolic dimensions the model itself fixes: a CNN's channels declared
// symbolic (an input that declares no shape, or tf2onnx's `unk__` names),
// read by a Conv whose weight has 3. Asked only where the graph infers at
// its first binding but at none of the joint second bindings (see the
// import's probe), per group of dimensions (those of one name move
// together, an unnamed one alone; `group` names each dims entry's): the
// groups the graph infers at none of the second values of, with the rest
// at their first values. None where every group is so (the model runs at
// one binding only: a Reshape to a constant shape). `bound(value)`: the
// graph with its symbolic dimensions bound to value(k), per dims entry;
// `first(k)`: the first binding's value; `probe`: the moved one's.
std::set<std::string> GroupsTheModelFixes(const std::function<Graph(const std::function<int64_t(size_t)>&)>& bound,
                                          const std::function<int64_t(size_t)>& first,
                                          const std::vector<int64_t>& probe, const std::vector<std::string>& group) {
  FoldOptions quiet;
  std::vector<std::string> stale;
  quiet.stale_shapes = &stale;
  auto infers = [&](const std::function<int64_t(size_t)>& value) {
    Graph p = bound(value);
    try {
      InferShapesAndFold(p, quiet);
      return true;
    } catch (const Error&) {
      return false;
    }
  };
  const std::set<std::string> groups(group.begin(), group.end());
  std::set<std::string> fixed;
  for (const std::string& name : groups) {
    bool moves = false;
    for (size_t kind = 0; kind < 3 && !moves; ++kind)
      moves = infers([&](size_t j) { return group[j] == name ? SecondValuesOf(first(j), probe[j])[kind] : first(j); });
    if (!moves) fixed.insert(name);
  }
  if (fixed.size() == groups.size()) fixed.clear();
  return fixed;
}

// Binds the dimensions of the `fixed` groups at their first values for
// good: recorded in ModelInfo::fixed_axes and a warning per input, and
// dropped from `dims`, `probe` and `group` (per dims entry).
void DropFixedAxes(Graph& g, const std::set<std::string>& fixed, const std::function<int64_t(size_t)>& first,
                   std::vector<std::pair<ValueId, int>>* dims, std::vector<int64_t>* probe,
                   std::vector<std::string>* group, ImportReport* rep) {
  std::vector<std::pair<ValueId, int>> kept;
  std::vector<int64_t> kept_probe;
  std::vector<std::string> kept_group;
  std::map<std::string, std::string> text;  // input -> its fixed axes
  for (size_t k = 0; k < dims->size(); ++k) {
    if (!fixed.count((*group)[k])) {
      kept.push_back((*dims)[k]);
      kept_probe.push_back((*probe)[k]);
      kept_group.push_back((*group)[k]);
      continue;
    }
    const auto [id, axis] = (*dims)[k];
    const std::string& input = g.value(id).name;
    g.info().fixed_axes[input].push_back(axis);
    const std::string& name = (*group)[k];
    std::string& t = text[input];
    t += (t.empty() ? "" : ", ") +
         ("axis " + std::to_string(axis) + (name.find('#') == std::string::npos ? " (" + name + ")" : "") + " at " +
          std::to_string(first(k)));
  }
  for (const auto& [input, axes] : text)
    rep->warnings.push_back("graph input '" + input + "': the model fixes " + axes +
                            " (its nodes infer at no other value with the rest as bound): bound there for every "
                            "binding, the check's second one too");
  *dims = std::move(kept);
  *probe = std::move(kept_probe);
  *group = std::move(kept_group);
}

InputBinding BindInputShapes(const onnx::GraphProto& gp, int64_t ir_version, const ImportOptions& options) {
  InputBinding b;
  b.free = options.free_dim_value;
  b.given = options.input_shapes;
  if (b.given.empty()) return b;
  std::set<std::string> weights;  // before IR 4, initializers are listed as inputs
  if (ir_version < 4)
    for (const auto& t : gp.initializer()) weights.insert(t.name());
  std::map<std::string, const onnx::ValueInfoProto*> inputs;
  std::string names;
  for (const auto& vi : gp.input()) {
    if (weights.count(vi.name())) continue;
    inputs[vi.name()] = &vi;
    names += (names.empty() ? "" : ", ") + ("'" + vi.name() + "' " + DeclaredShapeText(vi.type()));
  }
  for (const auto& [name, shape] : b.given) {
    auto it = inputs.find(name);
    if (it == inputs.end()) {
      // "a:1,3,8,8,b:1,5": shapes of several inputs joined by a comma (the
      // name is what comes before the last colon: tf2onnx's names hold one).
      const size_t colon = name.find(':');
      const bool joined_by_comma = colon != std::string::npos && inputs.count(name.substr(0, colon)) > 0;
      Fail("--input_shape names '", name, "', which is not a graph input (inputs: ", names, ")",
           joined_by_comma ? "; the shapes of several inputs are separated by ';' (NAME:D1,D2;NAME2:D1,...)" : "");
    }
    const onnx::TypeProto& type = it->second->type();
    for (size_t k = 0; k < shape.size(); ++k)
      if (shape[k] < 0)
        Fail("--input_shape for input '", name, "': dimension ", k, " is ", shape[k], "; dimensions must be >= 0");
    if (!type.has_tensor_type() || !type.tensor_type().has_shape()) continue;  // the given shape is the shape
    const auto& dims = type.tensor_type().shape().dim();
    if (dims.size() != static_cast<int>(shape.size()))
      Fail("--input_shape for input '", name, "' gives ", shape.size(), " dimensions; the input has rank ", dims.size(),
           " ", DeclaredShapeText(type));
    for (int k = 0; k < dims.size(); ++k) {
      const auto& d = dims.Get(k);
      if (d.has_dim_value() && d.dim_value() != shape[k])
        Fail("--input_shape for input '", name, "': dimension ", k, " is fixed at ", d.dim_value(), " in the model ",
             DeclaredShapeText(type), ", ", shape[k], " given");
      if (d.has_dim_param() && !d.dim_param().empty()) {
        auto [p, inserted] = b.params.emplace(d.dim_param(), shape[k]);
        if (!inserted && p->second != shape[k])
          Fail("--input_shape binds symbolic dimension '", d.dim_param(), "' to both ", p->second, " and ", shape[k]);
      }
    }
  }
  b.probe = MoveGivenDims(b.given, [&](const std::string& input, int axis, std::string* name) {
    const onnx::TypeProto& type = inputs.at(input)->type();
    if (!type.has_tensor_type() || !type.tensor_type().has_shape()) return true;
    const auto& d = type.tensor_type().shape().dim(axis);
    *name = d.dim_param();
    return !d.has_dim_value();
  });
  for (const auto& [input, shape] : b.probe) {
    const onnx::TypeProto& type = inputs.at(input)->type();
    if (!type.has_tensor_type() || !type.tensor_type().has_shape()) continue;
    for (size_t k = 0; k < shape.size(); ++k) {
      const auto& d = type.tensor_type().shape().dim(static_cast<int>(k));
      if (!d.dim_param().empty()) b.probe_params.emplace(d.dim_param(), shape[k]);
    }
  }
  return b;
}

// Element types against each operator's type constraints (ONNX Runtime
// refuses a model that breaks them, e.g. a Reshape whose shape is int32;
// ONNX's shape inference does not check initializers). Types are those the
// model states: graph inputs, initializers, value_info (ONNX-inferred ones
// included). Variadic parameters apply to the rest of the inputs.
void CheckInputTypes(const onnx::ModelProto& model) {
  const onnx::GraphProto& gp = model.graph();
  std::unordered_map<std::string, int32_t> types;
  for (const auto& vi : gp.value_info())
    if (vi.type().has_tensor_type()) types[vi.name()] = vi.type().tensor_type().elem_type();
  for (const auto& vi : gp.input())
    if (vi.type().has_tensor_type()) types[vi.name()] = vi.type().tensor_type().elem_type();
  for (const auto& t : gp.initializer()) types[t.name()] = t.data_type();
  std::unordered_map<std::string, int> opsets;
  for (const auto& imp : model.opset_import())
    opsets[IsDefaultDomain(imp.domain()) ? "" : imp.domain()] = imp.version();
  for (int k = 0; k < gp.node_size(); ++k) {
    const onnx::NodeProto& np = gp.node(k);
    const std::string domain = IsDefaultDomain(np.domain()) ? "" : np.domain();
    auto version = opsets.find(domain);
    if (version == opsets.end()) continue;
    const onnx::OpSchema* schema = onnx::OpSchemaRegistry::Schema(np.op_type(), version->second, domain);
    if (schema == nullptr || schema->inputs().empty()) continue;
    const auto& formals = schema->inputs();
    for (int i = 0; i < np.input_size(); ++i) {
      if (np.input(i).empty()) continue;
      auto t = types.find(np.input(i));
      if (t == types.end() || t->second == 0) continue;
      const auto& formal = formals[std::min<size_t>(static_cast<size_t>(i), formals.size() - 1)];
      if (i >= static_cast<int>(formals.size()) && formal.GetOption() != onnx::OpSchema::Variadic) continue;
      const auto& allowed = formal.GetTypes();
      if (allowed.empty()) continue;
      onnx::TypeProto tp;
      tp.mutable_tensor_type()->set_elem_type(t->second);
      onnx::DataType type = onnx::Utils::DataTypeUtils::ToType(tp);
      if (allowed.count(type)) continue;
      std::string allowed_text;
      for (const auto& a : allowed) allowed_text += (allowed_text.empty() ? "" : ", ") + *a;
      Fail("node ", NodeLabel(np, k), " is not valid ONNX: input ", i, " '", np.input(i), "' is ", *type, "; ",
           np.op_type(), "-", version->second, " takes ", allowed_text, " there");
    }
  }
}

// Tensors in node attributes and subgraphs get their external data inline
// (so that opaque nodes are exported self-contained; such tensors are small
// in practice). Top-level initializers stay external until they are read.
// Returns whether any tensor was stored externally.
bool InlineNestedExternal(onnx::GraphProto* g, const std::string* dir, bool top) {
  bool any = false;
  auto inline_one = [&](onnx::TensorProto* t, const onnx::NodeProto* np, const std::string& attr) {
    if (!IsExternal(*t)) return;
    std::string raw = ReadExternalData(
        *t, dir,
        np == nullptr ? ""
                      : "the tensor of node '" + np->name() + "' (" + np->op_type() + ") attribute '" + attr + "'");
    t->clear_external_data();
    t->set_data_location(onnx::TensorProto::DEFAULT);
    t->set_raw_data(std::move(raw));
    any = true;
  };
  if (!top) {
    for (auto& t : *g->mutable_initializer()) inline_one(&t, nullptr, "");
  } else {
    // Weights passed by reference (ReimportGraph) are in memory, not in a file.
    for (const auto& t : g->initializer()) any = any || (IsExternal(t) && !IsByReference(t));
  }
  for (auto& np : *g->mutable_node())
    for (auto& a : *np.mutable_attribute()) {
      if (a.has_t()) inline_one(a.mutable_t(), &np, a.name());
      for (auto& t : *a.mutable_tensors()) inline_one(&t, &np, a.name());
      if (a.has_g()) any = InlineNestedExternal(a.mutable_g(), dir, false) || any;
      for (auto& sg : *a.mutable_graphs()) any = InlineNestedExternal(&sg, dir, false) || any;
    }
  return any;
}

// The external data locations the tensors of `g` and its subgraphs name
// (weights passed by reference are in memory, not in a file).
void CollectExternalLocations(const onnx::GraphProto& g, std::set<std::string>* out) {
  auto one = [&](const onnx::TensorProto& t) {
    if (IsExternal(t) && !IsByReference(t) && !ExternalLocation(t).empty()) out->insert(ExternalLocation(t));
  };
  for (const auto& t : g.initializer()) one(t);
  for (const auto& np : g.node())
    for (const auto& a : np.attribute()) {
      if (a.has_t()) one(a.t());
      for (const auto& t : a.tensors()) one(t);
      if (a.has_g()) CollectExternalLocations(a.g(), out);
      for (const auto& sg : a.graphs()) CollectExternalLocations(sg, out);
    }
}

// Outputs of nodes rlflow will keep opaque (not in the registry, or with
// subgraphs) that have no static type after ONNX's inference get one from
// the type oracle (one run of the model), stated as value_info.
void TypeUnmodelledOutputs(onnx::ModelProto* model, const ImportOptions& options, ImportReport* rep) {
  onnx::GraphProto* gp = model->mutable_graph();
  std::map<std::string, int> info;
  for (int k = 0; k < gp->value_info_size(); ++k) info[gp->value_info(k).name()] = k;
  std::set<std::string> outputs;
  for (const auto& o : gp->output()) outputs.insert(o.name());
  auto is_static = [](const onnx::TypeProto& t) {
    if (!t.has_tensor_type() || !t.tensor_type().has_shape() || t.tensor_type().elem_type() == 0) return false;
    for (const auto& d : t.tensor_type().shape().dim())
      if (!d.has_dim_value()) return false;
    return true;
  };
  const OpRegistry& reg = OpRegistry::Global();
  const int64_t opset = DefaultDomainOpset(*model);
  std::vector<std::string> untyped;
  for (const auto& np : gp->node()) {
    bool subgraphs = false;
    for (const auto& a : np.attribute()) subgraphs = subgraphs || a.has_g() || a.graphs_size() > 0;
    // Modelled at this opset (LayerNormalization before 17 is ONNX Runtime's).
    const OpDef* def = reg.Find(IsDefaultDomain(np.domain()) ? "" : np.domain(), np.op_type());
    if (!subgraphs && def != nullptr && (!IsDefaultDomain(np.domain()) || def->since_opset <= opset)) continue;
    for (const auto& o : np.output()) {
      if (o.empty() || outputs.count(o)) continue;
      auto it = info.find(o);
      // Sequence, map and optional values need no tensor type.
      if (it != info.end() && !gp->value_info(it->second).type().has_tensor_type() &&
          gp->value_info(it->second).type().value_case() != onnx::TypeProto::VALUE_NOT_SET)
        continue;
      if (it == info.end() || !is_static(gp->value_info(it->second).type())) untyped.push_back(o);
    }
  }
  if (untyped.empty()) return;
  ImportOptions::TensorTypes types;
  try {
    // The oracle runs the model from a file of its own: external data inline.
    std::string bytes;
    bool external = false;
    for (const auto& t : gp->initializer()) external = external || IsExternal(t);
    // A model converted from opsets 18+ runs at its own opset.
    const int source = rep->opset_before_conversion;
    if (!external && source <= kMaxOpset) {
      bytes = model->SerializeAsString();
    } else {
      onnx::ModelProto copy = *model;
      if (source > kMaxOpset) UpgradeFromOpset17(&copy, source);
      size_t total = 0;
      for (auto& t : *copy.mutable_graph()->mutable_initializer()) {
        if (!IsExternal(t)) continue;
        std::string raw =
            IsByReference(t)
                ? InitializerData(t, nullptr, options)->bytes()
                : ReadExternalData(t, options.external_data_dir.empty() ? nullptr : &options.external_data_dir);
        total += raw.size();
        if (total > kMaxInlineBytes) Fail("the model's weights are too large to run it from one protobuf");
        t.clear_external_data();
        t.set_data_location(onnx::TensorProto::DEFAULT);
        t.set_raw_data(std::move(raw));
      }
      bytes = copy.SerializeAsString();
    }
    types = options.type_oracle(bytes, untyped);
  } catch (const Error& e) {
    rep->warnings.push_back(std::string("could not type the outputs of control-flow or custom nodes by running the "
                                        "model once (") +
                            e.what() + ")");
    return;
  }
  int typed = 0;
  for (const auto& [name, type] : types) {
    auto it = info.find(name);
    onnx::ValueInfoProto* vi = it == info.end() ? gp->add_value_info() : gp->mutable_value_info(it->second);
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(type.first);
    tt->clear_shape();
    auto* shape = tt->mutable_shape();
    for (int64_t d : type.second) shape->add_dim()->set_dim_value(d);
    ++typed;
  }
  if (typed > 0)
    rep->warnings.push_back("typed " + std::to_string(typed) +
                            " outputs of control-flow or custom nodes by running the model once (ONNX's shape "
                            "inference leaves them without a static shape)");
}

// ONNX's shape inference (and version converter) run in a child process:
// they are third-party code that crashes on some malformed models (SIGFPE on
// a zero stride, SIGSEGV on mismatched ranks). A crash there costs the types
// ONNX would have inferred, never the optimiser; rlflow's own shape rules
// then check every modelled node. Returns false if the child failed, with
// the reason in `*why`; throws for a conversion the converter rejects.
bool ContainedOnnxPasses(onnx::ModelProto* model, int convert_to, std::string* why, bool* converted_out) {
  *converted_out = false;
  int fds[2];
  if (pipe(fds) != 0) {
    *why = "cannot create a pipe";
    return false;
  }
  fflush(nullptr);
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    *why = "cannot fork";
    return false;
  }
  if (pid == 0) {
    // The child dies of its crash like a plain process: handlers inherited
    // from the parent (glog's failure handler, a sanitizer's or fuzzer's)
    // must not report the contained crash as the parent's.
    for (int sig : {SIGFPE, SIGSEGV, SIGBUS, SIGILL, SIGABRT}) signal(sig, SIG_DFL);
    // Ctrl-C reaches the whole process group: the parent handles it (its
    // handler, inherited, would run here too, and a second one would remove
    // the parent's temporary files). The child dies with the parent.
    signal(SIGINT, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(3);  // the parent is already gone
    close(fds[0]);
    std::string out;
    try {
      auto infer = [&] {
        onnx::shape_inference::InferShapes(*model, onnx::OpSchemaRegistry::Instance(),
                                           onnx::ShapeInferenceOptions(false, 0, true));
      };
      std::string si_error;
      try {
        infer();
      } catch (const std::exception& e) {
        si_error = FirstLine(e.what());
      }
      if (convert_to > 0) {
        try {
          // The 12 -> 13 Softmax adapter asserts where the input's rank is
          // not stated (after an opaque node, or where inference stopped).
          ExpandSoftmaxOfUnknownRank(model->mutable_graph());
          std::vector<onnx::NodeProto> hidden;
          HideNodesFromConverter(model->mutable_graph(), DefaultDomainOpset(*model), &hidden);
          *model = onnx::version_conversion::ConvertVersion(*model, convert_to);
          RestoreHiddenNodes(model->mutable_graph(), hidden);
        } catch (const std::exception& e) {
          out = "C" + FirstLine(e.what());
        }
        if (out.empty()) {
          try {
            infer();
          } catch (const std::exception& e) {
            si_error = FirstLine(e.what());
          }
          out = "M" + model->SerializeAsString();
        }
      } else {
        // Only the inferred types travel back.
        onnx::GraphProto types;
        *types.mutable_value_info() = model->graph().value_info();
        out = "V" + types.SerializeAsString();
      }
      if (!si_error.empty() && out[0] != 'C') out = "W" + std::to_string(si_error.size()) + ":" + si_error + out;
    } catch (...) {
      out = "Eunexpected exception";
    }
    const char* p = out.data();
    size_t left = out.size();
    while (left > 0) {
      ssize_t w = write(fds[1], p, left);
      if (w <= 0) _exit(3);
      p += w;
      left -= static_cast<size_t>(w);
    }
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  std::string data;
  char buf[1 << 16];
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  bool timed_out = false;
  for (;;) {
    int ms = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count());
    if (ms <= 0) {
      timed_out = true;
      break;
    }
    struct pollfd pfd = {fds[0], POLLIN, 0};
    int r = poll(&pfd, 1, ms);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      timed_out = r == 0;
      break;
    }
    ssize_t got = read(fds[0], buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    data.append(buf, static_cast<size_t>(got));
  }
  close(fds[0]);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    *why = "it did not finish in 300 s";
    return false;
  }
  if (WIFSIGNALED(status)) {
    *why = std::string("it crashed (") + strsignal(WTERMSIG(status)) + ")";
    return false;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || data.empty()) {
    *why = "it failed";
    return false;
  }
  if (data[0] == 'W') {
    size_t colon = data.find(':');
    size_t len = std::stoul(data.substr(1, colon - 1));
    *why = data.substr(colon + 1, len);
    data = data.substr(colon + 1 + len);
  }
  if (data[0] == 'C') Fail("converting opset to ", convert_to, " failed: ", data.substr(1));
  if (data[0] == 'E') {
    *why = data.substr(1);
    return false;
  }
  if (data[0] == 'M') {
    onnx::ModelProto converted;
    if (!converted.ParseFromArray(data.data() + 1, static_cast<int>(data.size() - 1))) {
      *why = "its result could not be read";
      return false;
    }
    *model = std::move(converted);
    *converted_out = true;
  } else {
    onnx::GraphProto types;
    if (!types.ParseFromArray(data.data() + 1, static_cast<int>(data.size() - 1))) {
      *why = "its result could not be read";
      return false;
    }
    *model->mutable_graph()->mutable_value_info() = std::move(*types.mutable_value_info());
  }
  return why->empty();
}

// ONNX's shape inference as ContainedOnnxPasses runs it without a
// conversion, in this process (ImportOptions::onnx_passes_in_process).
bool OnnxShapeInferenceInProcess(onnx::ModelProto* model, std::string* why) {
  try {
    onnx::shape_inference::InferShapes(*model, onnx::OpSchemaRegistry::Instance(),
                                       onnx::ShapeInferenceOptions(false, 0, true));
  } catch (const std::exception& e) {
    *why = FirstLine(e.what());
    return false;
  }
  return true;
}
}  // namespace

std::string onnx_detail::TensorBytes(const onnx::TensorProto& t) { return FromTensorProto(t).bytes(); }

bool onnx_detail::SameTensorBytes(const onnx::TensorProto& a, const onnx::TensorProto& b,
                                  const std::string* external_dir) {
  if (!IsExternal(a) && !IsExternal(b)) return TensorBytes(a) == TensorBytes(b);
  // In pieces of 16 MiB, never whole (a weight of gigabytes).
  constexpr size_t kPiece = size_t{16} << 20;
  struct Source {
    ExternalSpan span;
    std::string bytes;  // inline data
    bool external = false;
    std::string what;
    int64_t size() const { return external ? span.length : static_cast<int64_t>(bytes.size()); }
    void Read(int64_t from, size_t n, char* out) const {
      if (external)
        span.Read(from, n, out, what);
      else
        std::memcpy(out, bytes.data() + from, n);
    }
  } x, y;
  for (auto [t, src] : {std::make_pair(&a, &x), std::make_pair(&b, &y)}) {
    src->what = "tensor '" + t->name() + "'";
    src->external = IsExternal(*t);
    if (src->external)
      OpenExternalData(*t, external_dir, src->what, &src->span);
    else
      src->bytes = TensorBytes(*t);
  }
  if (x.size() != y.size()) return false;
  std::string p(static_cast<size_t>(std::min<int64_t>(x.size(), kPiece)), '\0'), q = p;
  for (int64_t at = 0; at < x.size(); at += static_cast<int64_t>(kPiece)) {
    const size_t n = static_cast<size_t>(std::min<int64_t>(x.size() - at, kPiece));
    x.Read(at, n, p.data());
    y.Read(at, n, q.data());
    if (std::memcmp(p.data(), q.data(), n) != 0) return false;
  }
  return true;
}

bool onnx_detail::InferValueInfo(onnx::ModelProto* model, std::string* why) {
  bool converted = false;
  return ContainedOnnxPasses(model, 0, why, &converted);
}

namespace {

// Protobuf's input stream over a file read block by block.
class BlockInputStream : public google::protobuf::io::ZeroCopyInputStream {
 public:
  explicit BlockInputStream(FileBlockReader* reader) : reader_(reader) {}
  bool Next(const void** data, int* size) override {
    if (backed_up_ == 0) {
      block_ = reader_->Next();
      if (block_.empty()) return false;
      backed_up_ = block_.size();
    }
    *data = block_.data() + block_.size() - backed_up_;
    *size = static_cast<int>(backed_up_);
    count_ += static_cast<int64_t>(backed_up_);
    backed_up_ = 0;
    return true;
  }
  void BackUp(int count) override {
    backed_up_ = static_cast<size_t>(count);
    count_ -= count;
  }
  bool Skip(int count) override {
    const void* data;
    int size;
    while (count > 0) {
      if (!Next(&data, &size)) return false;
      if (size > count) {
        BackUp(size - count);
        return true;
      }
      count -= size;
    }
    return true;
  }
  int64_t ByteCount() const override { return count_; }

 private:
  FileBlockReader* reader_;
  std::string_view block_;
  size_t backed_up_ = 0;  // bytes at the end of block_ returned again by Next
  int64_t count_ = 0;
};

// Parses a model from `stream` as ParseFromZeroCopyStream does, but field by
// field (the graph's fields one at a time, each initializer on its own), so
// that each top-level initializer whose data is a known weight
// (ImportOptions::known_weights, the bytes equal) becomes a stand-in
// exported by reference as soon as it is read: the file's copy of the
// weights is never held beside the known one. Without known weights it is
// the same parse; the one path every file import takes.
bool ParseSharingKnownWeights(google::protobuf::io::ZeroCopyInputStream* stream, const ImportOptions& options,
                              onnx::ModelProto* model) {
  using WFL = google::protobuf::internal::WireFormatLite;
  google::protobuf::io::CodedInputStream in(stream);
  in.SetTotalBytesLimit(INT_MAX);
  // One field of any other kind, merged as a parse would.
  auto merge_field = [&](uint32_t tag, google::protobuf::MessageLite* into) {
    std::string bytes;
    {
      google::protobuf::io::StringOutputStream out_stream(&bytes);
      google::protobuf::io::CodedOutputStream out(&out_stream);
      if (!WFL::SkipField(&in, tag, &out)) return false;
    }
    return into->MergeFromString(bytes);
  };
  auto length_delimited = [](uint32_t tag, int field) {
    return WFL::GetTagFieldNumber(tag) == field && WFL::GetTagWireType(tag) == WFL::WIRETYPE_LENGTH_DELIMITED;
  };
  while (const uint32_t tag = in.ReadTag()) {
    if (!length_delimited(tag, onnx::ModelProto::kGraphFieldNumber)) {
      if (!merge_field(tag, model)) return false;
      continue;
    }
    uint32_t length = 0;
    if (!in.ReadVarint32(&length)) return false;
    const auto graph_limit = in.PushLimit(static_cast<int>(length));
    onnx::GraphProto* graph = model->mutable_graph();
    while (const uint32_t graph_tag = in.ReadTag()) {
      if (!length_delimited(graph_tag, onnx::GraphProto::kInitializerFieldNumber)) {
        if (!merge_field(graph_tag, graph)) return false;
        continue;
      }
      if (!in.ReadVarint32(&length)) return false;
      const auto tensor_limit = in.PushLimit(static_cast<int>(length));
      onnx::TensorProto* t = graph->add_initializer();
      if (!t->MergeFromCodedStream(&in) || !in.ConsumedEntireMessage()) return false;
      in.PopLimit(tensor_limit);
      if (t->has_raw_data() && KnownWeight(*t, options) != nullptr) {
        std::string().swap(*t->mutable_raw_data());  // clear_raw_data alone keeps its buffer
        t->clear_raw_data();
        MarkByReference(t);
      }
    }
    if (!in.ConsumedEntireMessage()) return false;
    in.PopLimit(graph_limit);
  }
  return in.ConsumedEntireMessage();
}

}  // namespace

Graph ImportOnnxFile(const std::string& path, const ImportOptions& options, ImportReport* report,
                     FileFingerprint* fingerprint) {
  ImportOptions with_dir = options;
  if (with_dir.external_data_dir.empty()) with_dir.external_data_dir = DirName(path);
  const std::string what = "'" + path + "'";
  onnx::ModelProto model;
  {
    FileBlockReader reader(path, "model");
    if (reader.size_at_open() > static_cast<uint64_t>(INT32_MAX))
      Fail("model ", what,
           " is larger than 2 GB, protobuf's limit (a model this large keeps its weights in external data files)");
    BlockInputStream in(&reader);
    const bool parsed = ParseSharingKnownWeights(&in, options, &model);
    while (!reader.Next().empty()) {
    }
    if (reader.fingerprint().size == 0) Fail("model ", what, " is empty");
    if (!parsed) Fail("model ", what, " is not a valid ONNX protobuf (truncated or corrupt file?)");
    if (fingerprint) *fingerprint = reader.fingerprint();
  }
  return ImportOnnxModel(std::move(model), what, with_dir, report);
}

Graph ImportOnnxBytes(const std::string& bytes, const std::string& what, const ImportOptions& options,
                      ImportReport* report) {
  if (bytes.empty()) Fail("model ", what, " is empty");
  if (bytes.size() > static_cast<size_t>(INT32_MAX))
    Fail("model ", what,
         " is larger than 2 GB, protobuf's limit (a model this large keeps its weights in external data files)");
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes)) Fail("model ", what, " is not a valid ONNX protobuf (truncated or corrupt file?)");
  return ImportOnnxModel(std::move(model), what, options, report);
}

namespace {
// The inputs bound to free_dim_value, as text for the error and as bound.
struct FreeBound {
  std::string text;
  std::vector<FreeDimsDoNotFit::Input> inputs;
};
Graph ImportOnnxModelBound(onnx::ModelProto model, const std::string& what, const ImportOptions& options,
                           ImportReport* report, FreeBound* free_bound);
}  // namespace

// A node that fails at the shapes the importer bound the model's symbolic
// input dimensions to (--free_dim, 1: a whole [N, C, H, W] input of 1s
// gives a Conv 1 channel) is an error that says which inputs were bound so
// and how to give their shapes; one that fails at shapes given
// (`input_shapes`) names those inputs and shapes.
Graph ImportOnnxModel(onnx::ModelProto model, const std::string& what, const ImportOptions& options,
                      ImportReport* report) {
  FreeBound free_bound;
  try {
    return ImportOnnxModelBound(std::move(model), what, options, report, &free_bound);
  } catch (const Error& e) {
    const std::string message = e.what();
    if (typeid(e) != typeid(Error) || message.find("node '") == std::string::npos ||
        message.find("--input_shape") != std::string::npos)
      throw;
    // The inputs whose shapes were given: a node that fails at them says
    // so, naming them (the model does not run at those shapes).
    std::string given;
    for (const auto& [name, shape] : options.input_shapes)
      given += (given.empty() ? "" : ", ") + ("'" + name + "' ") + ShapeToString(shape);
    if (free_bound.text.empty()) {
      if (given.empty()) throw;
      throw Error(message + " (at the input shapes given: " + given + "; the model does not run at them)");
    }
    if (!given.empty()) given = "; given: " + given;
    std::string example;
    for (const auto& in : free_bound.inputs) {
      example += (example.empty() ? "" : ";") + in.name + ":";
      for (size_t k = 0; k < in.dims.size(); ++k)
        example += (k ? "," : "") + (!in.free[k]           ? std::to_string(in.dims[k])
                                     : in.names[k].empty() ? "D" + std::to_string(k)
                                                           : in.names[k]);
    }
    throw FreeDimsDoNotFit(message + " (at the shapes the symbolic input dimensions were bound to: " + free_bound.text +
                               given + "; give the shapes the model runs at with --input_shape=" + example + ")",
                           message, std::move(free_bound.inputs));
  }
}

std::map<std::string, std::vector<int64_t>> FittedInputShapes(const FreeDimsDoNotFit& e, int64_t inner) {
  // A dimension name at the first place of any input is a batch wherever it
  // stands.
  std::set<std::string> first;
  for (const auto& in : e.inputs)
    if (!in.dims.empty() && in.free[0] && !in.names[0].empty()) first.insert(in.names[0]);
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& in : e.inputs) {
    std::vector<int64_t> shape = in.dims;
    for (size_t k = 1; k < shape.size(); ++k)
      if (in.free[k] && !first.count(in.names[k])) shape[k] = inner;
    shapes[in.name] = shape;
  }
  return shapes;
}

Graph ImportOnnxFileFitting(const std::string& path, const ImportOptions& options, ImportReport* report,
                            FileFingerprint* fingerprint, std::map<std::string, std::vector<int64_t>>* fitted) {
  fitted->clear();
  try {
    return ImportOnnxFile(path, options, report, fingerprint);
  } catch (const FreeDimsDoNotFit& e) {
    std::string tried, ladder;
    for (int64_t inner : kFittedDims) ladder += (ladder.empty() ? "" : ", ") + std::to_string(inner);
    for (int64_t inner : kFittedDims) {
      std::map<std::string, std::vector<int64_t>> shapes = FittedInputShapes(e, inner);
      bool moved = false;
      for (const auto& in : e.inputs) moved |= shapes.at(in.name) != in.dims;
      if (!moved) break;  // nothing after a first dimension is free
      tried += (tried.empty() ? "" : ", ") + std::to_string(inner);
      ImportOptions at = options;
      for (const auto& [name, shape] : shapes) at.input_shapes[name] = shape;
      ImportReport rep;
      Graph g;
      try {
        g = ImportOnnxFile(path, at, &rep, fingerprint);
      } catch (const Error& again) {
        if (typeid(again) != typeid(Error) && typeid(again) != typeid(FreeDimsDoNotFit)) throw;
        continue;
      }
      std::string bound;
      for (const auto& [name, shape] : shapes) bound += (bound.empty() ? "" : ";") + name + ":" + ShapeToString(shape);
      rep.warnings.insert(
          rep.warnings.begin(),
          "the model does not fit at the shapes its symbolic input dimensions were bound to (" + e.node_error +
              "); optimised at " + bound + " instead (the dimensions after the first at " + std::to_string(inner) +
              ", the first of " + ladder + " that fits): give the shapes it runs at with --input_shape");
      if (report) *report = std::move(rep);
      *fitted = std::move(shapes);
      return g;
    }
    if (tried.empty()) throw;
    throw FreeDimsDoNotFit(std::string(e.what()) + "; nor with the dimensions after the first at " + tried,
                           e.node_error, e.inputs);
  }
}

namespace {
Graph ImportOnnxModelBound(onnx::ModelProto model, const std::string& what, const ImportOptions& options,
                           ImportReport* report, FreeBound* free_bound) {
  ImportReport local;
  ImportReport& rep = report ? *report : local;
  if (model.ir_version() <= 0 || !model.has_graph())
    Fail("model ", what, " is not an ONNX model (no ir_version or no graph)");
  if (model.graph().node_size() == 0 && model.graph().output_size() == 0) Fail("model ", what, " has an empty graph");
  if (model.graph().output_size() == 0) Fail("model ", what, " has no graph outputs");
  NormaliseDefaultDomainName(&model);  // "ai.onnx" is "", as in ONNX Runtime

  // ---- opsets ----
  int64_t opset = -1;
  for (const auto& imp : model.opset_import())
    if (IsDefaultDomain(imp.domain())) opset = imp.version();
  if (opset < 0) {
    // Models of other domains only (training operators, custom ops): every
    // node stays opaque; ONNX's passes run at the newest opset rlflow knows.
    for (const auto& n : model.graph().node())
      if (IsDefaultDomain(n.domain()))
        Fail("model ", what, " does not import the default ONNX opset but node '", n.name(), "' (", n.op_type(),
             ") is of the default domain");
    opset = kMaxOpset;
  }
  if (opset < kMinOpset || opset > kNewestImportOpset)
    Fail("model ", what, " uses unsupported opset ", opset, " (supported: ", kMinOpset, " to ", kNewestImportOpset,
         ")");
  rep.opset_before_conversion = static_cast<int>(opset);

  // Structure first (references, topological order), then ONNX's shape
  // inference fills in value_info where types are missing (the version
  // converter needs it too, e.g. for Softmax 12 -> 13).
  if (const int dense = DensifySparseTensors(model.mutable_graph()); dense > 0)
    rep.warnings.push_back(std::to_string(dense) + " sparse tensor" + (dense > 1 ? "s" : "") +
                           " (sparse_initializer, Constant's sparse_value) made dense, as ONNX Runtime does at load "
                           "(an optimised model holds " +
                           (dense > 1 ? "them" : "it") + " dense)");
  if (CheckAndSortNodes(model.mutable_graph(), what)) {
    rep.reordered_nodes = true;
    rep.warnings.push_back(
        "the model's nodes are not in topological order, which the ONNX spec requires: sorted (the written model is "
        "the sorted one, also when nothing else changes)");
  }
  if (std::vector<std::string> renamed = RenameDuplicateNodeNames(model.mutable_graph()); !renamed.empty()) {
    rep.renamed_nodes = true;
    rep.warnings.push_back(std::to_string(renamed.size()) + " node" + (renamed.size() > 1 ? "s have" : " has") +
                           " the name of another node of its graph ('" + renamed[0] +
                           "'), which ONNX Runtime refuses: renamed (the written model is the renamed one, also when "
                           "nothing else changes)");
  }
  // Calls of model-local functions: inlined, as ONNX Runtime does at load.
  if (InlineLocalFunctions(&model, &rep.warnings) > 0) CheckAndSortNodes(model.mutable_graph(), what);
  // External data: nested tensors inline now; the top-level initializers'
  // references are kept through ONNX's passes (its version converter drops
  // them) and read when the graph is built.
  const std::string* external_dir = options.external_data_dir.empty() ? nullptr : &options.external_data_dir;
  std::set<std::string> external_files;
  CollectExternalLocations(model.graph(), &external_files);
  const bool external_data = InlineNestedExternal(model.mutable_graph(), external_dir, /*top=*/true);
  std::map<std::string, onnx::TensorProto> external_inits;
  for (const auto& t : model.graph().initializer())
    if (IsExternal(t)) external_inits[t.name()] = t;
  // Opsets 18 to 26: rlflow's conversion to 17 (ONNX 1.12 stops there), and
  // back to the model's opset when it is written.
  if (opset > kMaxOpset) {
    const size_t first_note = rep.warnings.size();
    DowngradeToOpset17(&model, &rep.warnings);
    rep.warnings.insert(rep.warnings.begin() + static_cast<std::ptrdiff_t>(first_note),
                        "converted opset " + std::to_string(opset) +
                            " to 17 for the optimisation (rlflow's conversion; written back at " +
                            std::to_string(opset) + ")");
    opset = kMaxOpset;
  }
  CheckDeclaredTypes(model.graph());
  CheckNodesAgainstSchemas(model);
  // The declared interface, before symbolic dimensions are bound for ONNX's
  // shape inference (so that opaque nodes get static output types).
  std::map<std::string, std::string> declared_interface;
  bool any_symbolic = false;
  std::set<std::string> input_params;
  // Where each symbolic input dimension is bound: --input_shape's value for a
  // named input, the same value for every other dimension of that name
  // (dim_param "batch" in two inputs), else free_dim_value.
  const InputBinding binding = BindInputShapes(model.graph(), model.ir_version(), options);
  for (const auto& vi : model.graph().input()) declared_interface[vi.name()] = vi.type().SerializeAsString();
  for (const auto& vi : model.graph().output()) declared_interface[vi.name()] = vi.type().SerializeAsString();
  {
    std::set<std::string> has_default;
    if (model.ir_version() >= 4)
      for (const auto& t : model.graph().initializer()) has_default.insert(t.name());
    for (auto& vi : *model.mutable_graph()->mutable_input()) {
      if (has_default.count(vi.name()) || !vi.type().has_tensor_type()) continue;
      if (!vi.type().tensor_type().has_shape()) {
        auto given = binding.given.find(vi.name());
        if (given == binding.given.end()) continue;
        auto* shape = vi.mutable_type()->mutable_tensor_type()->mutable_shape();
        for (int64_t d : given->second) shape->add_dim()->set_dim_value(d);
        continue;
      }
      auto* dims = vi.mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim();
      const std::string declared = DeclaredShapeText(vi.type());
      bool free = false;
      FreeDimsDoNotFit::Input bound{vi.name(), {}, {}, {}};
      for (int k = 0; k < dims->size(); ++k) {
        auto& dim = *dims->Mutable(k);
        bound.names.push_back(dim.has_dim_value() ? "" : dim.dim_param());
        bound.free.push_back(!dim.has_dim_value() && binding.Free(vi.name(), dim.dim_param()));
        if (bound.free.back()) rep.free_axes[vi.name()].push_back(k);
        if (!dim.has_dim_value()) {
          if (dim.has_dim_param()) input_params.insert(dim.dim_param());
          dim.set_dim_value(binding.Value(vi.name(), k, dim.dim_param()));
          free |= bound.free.back();
          any_symbolic = true;
        }
        bound.dims.push_back(dim.dim_value());
      }
      if (free) {
        free_bound->text += (free_bound->text.empty() ? "'" : ", '") + vi.name() + "' " + declared + " as " +
                            DeclaredShapeText(vi.type()) + " (--free_dim)";
        free_bound->inputs.push_back(std::move(bound));
      }
    }
    // Declared intermediate types (the only ones an opaque custom op's
    // outputs have) may use the inputs' symbolic dimension names: bound the
    // same way. Other unknown dimensions there are left to ONNX.
    if (any_symbolic) {
      const std::set<std::string>& params = input_params;
      for (auto& vi : *model.mutable_graph()->mutable_value_info()) {
        declared_interface.emplace(vi.name(), vi.type().SerializeAsString());
        if (!vi.type().has_tensor_type() || !vi.type().tensor_type().has_shape()) continue;
        for (auto& dim : *vi.mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim())
          if (dim.has_dim_param() && params.count(dim.dim_param()))
            dim.set_dim_value(binding.Value("", -1, dim.dim_param()));
      }
    }
  }
  // Opsets 1 to 6: ONNX's version converter to 7 (its adapters for the
  // legacy broadcast and consumed_inputs attributes, BatchNormalization's
  // and Dropout's old forms), then as opset 7.
  if (opset < 7) {
    std::string why;
    bool converted = false;
    ContainedOnnxPasses(&model, 7, &why, &converted);
    if (!converted)
      Fail("model ", what, " could not be converted from opset ", opset, " to 7: ONNX's version converter ", why);
    rep.warnings.push_back("converted opset " + std::to_string(opset) + " to 7 (ONNX's version converter)");
    opset = 7;
    CheckAndSortNodes(model.mutable_graph(), what);
  }
  // ONNX's experimental operators (opsets below 10, as ONNX Runtime runs
  // them; ONNX's converter to 7 passed them by): the standard operators
  // ONNX's documentation gives for them.
  if (opset < 10 && ReplaceExperimentalOperators(&model, &rep.warnings) > 0)
    CheckAndSortNodes(model.mutable_graph(), what);
  // Opsets 7 to 10: rlflow's own upgrade to 11 (ONNX's converter fails on
  // common exports there), then ONNX's converter to 13 as for 11 and 12.
  if (opset < 11) {
    UpgradeToOpset11(&model, &rep.warnings);
    opset = 11;
  }
  {
    std::string why;
    int convert_to = opset < kCanonicalMinOpset ? kCanonicalMinOpset : 0;
    bool converted = false;
    const bool ok = options.onnx_passes_in_process && convert_to == 0
                        ? OnnxShapeInferenceInProcess(&model, &why)
                        : ContainedOnnxPasses(&model, convert_to, &why, &converted);
    if (!ok) rep.warnings.push_back("ONNX shape inference failed (" + why + "); using rlflow's shape rules only");
    // Never read an opset-11/12 node as its opset-13 namesake.
    if (convert_to > 0 && !converted)
      Fail("model ", what, " could not be converted from opset ", opset, " to ", convert_to,
           ": ONNX's version converter ", why);
    if (convert_to > 0) {
      rep.warnings.push_back("converted opset " + std::to_string(opset) + " to " + std::to_string(convert_to));
      opset = convert_to;
      CheckAndSortNodes(model.mutable_graph(), what);
    }
    for (auto& t : *model.mutable_graph()->mutable_initializer()) {
      auto it = external_inits.find(t.name());
      if (it != external_inits.end() && !IsExternal(t)) t = it->second;
    }
  }

  if (options.type_oracle) TypeUnmodelledOutputs(&model, options, &rep);
  CheckInputTypes(model);
  const onnx::GraphProto& gp = model.graph();
  Graph g;
  ModelInfo& info = g.info();
  info.ir_version = model.ir_version();
  info.opsets.clear();
  for (const auto& imp : model.opset_import())
    info.opsets[IsDefaultDomain(imp.domain()) ? "" : imp.domain()] = imp.version();
  info.opsets[""] = opset;
  info.source_opset = rep.opset_before_conversion;
  info.external_data = external_data;
  info.external_files.assign(external_files.begin(), external_files.end());
  info.producer_name = model.producer_name();
  info.producer_version = model.producer_version();
  info.graph_name = gp.name().empty() ? "graph" : gp.name();
  info.doc = model.doc_string();
  info.model_version = model.model_version();
  info.model_domain = model.domain();
  info.graph_doc = gp.doc_string();
  for (const auto* vis : {&gp.input(), &gp.output()})
    for (const auto& vi : *vis)
      if (!vi.doc_string().empty()) info.interface_docs[vi.name()] = vi.doc_string();
  for (const auto& kv : model.metadata_props()) info.metadata.push_back({kv.key(), kv.value()});
  for (const auto& f : model.functions()) info.functions.push_back(f.SerializeAsString());

  // Declared types: inputs, outputs and value_info (ONNX-inferred included).
  std::map<std::string, TensorType> declared;
  // Sequence, map and optional values: kept as non-tensor values that only
  // opaque nodes produce and read (their declared types are exported as
  // they came).
  std::set<std::string> non_tensor;
  auto declare = [&](const onnx::ValueInfoProto& vi) {
    bool is_tensor = true;
    TensorType t = FromTypeProto(vi.type(), vi.name(), &is_tensor);
    if (!is_tensor && vi.type().value_case() != onnx::TypeProto::VALUE_NOT_SET) {
      non_tensor.insert(vi.name());
      declared_interface.emplace(vi.name(), vi.type().SerializeAsString());
    }
    declared[vi.name()] = t;
  };
  for (const auto& vi : gp.value_info()) declare(vi);
  for (const auto& vi : gp.output()) {
    declare(vi);
    info.interface_types[vi.name()] = declared_interface[vi.name()];
  }

  // Initializers, then graph inputs. From IR 4 on, a graph input that also
  // has an initializer is an input with a default value (ONNX Runtime lets
  // callers override it): it stays an input. Older models list every
  // initializer as an input; there they are weights.
  std::map<std::string, const onnx::TensorProto*> init_protos;
  for (const auto& t : gp.initializer()) {
    if (t.name().empty()) Fail("model ", what, " has an initializer without a name");
    init_protos[t.name()] = &t;
  }
  std::set<std::string> input_names;
  for (const auto& vi : gp.input()) input_names.insert(vi.name());
  const bool inputs_override = model.ir_version() >= 4;
  if (inputs_override) {
    // One warning, naming the first few in the inputs' order (a model
    // exported so lists every weight: one line each had been hundreds).
    int overridable = 0;
    std::string names;
    for (const auto& vi : gp.input()) {
      if (!init_protos.count(vi.name())) continue;
      if (++overridable <= 3) names += (names.empty() ? "'" : ", '") + vi.name() + "'";
    }
    if (overridable > 3) names += ", ...";
    if (overridable > 0)
      rep.warnings.push_back(
          std::to_string(overridable) + " initializers are also graph inputs (" + names +
          "; IR >= 4: callers may override them): kept as inputs with their default values, not treated as "
          "constants, so no rewrite folds them; export without them as inputs (torch.onnx: "
          "keep_initializers_as_inputs=False) to let them fold");
  }
  // The weights' bytes move from the protobuf into the graph (held once).
  for (onnx::TensorProto& t : *model.mutable_graph()->mutable_initializer())
    if (!(inputs_override && input_names.count(t.name())))
      g.AddInitializer(t.name(), InitializerData(t, external_dir, options, &t));
  if (gp.sparse_initializer_size() > 0) Fail("model ", what, " has sparse initializers, which are not supported");
  // Symbolic dimensions are bound to free_dim_value; a second binding
  // (probe) finds what depends on them.
  std::vector<std::pair<ValueId, int>> symbolic_dims;
  std::vector<int64_t> probe_values;  // per symbolic_dims entry
  // Per symbolic_dims entry: its group, the dimensions that move together
  // (its name; input#axis if it has none).
  std::vector<std::string> dim_group;
  for (const auto& vi : gp.input()) {
    auto init = init_protos.find(vi.name());
    if (init != init_protos.end() && !inputs_override) continue;
    bool is_tensor = true;
    onnx::TypeProto declared_type;
    declared_type.ParseFromString(declared_interface[vi.name()]);
    TensorType t = FromTypeProto(declared_type, vi.name(), &is_tensor);
    if (!is_tensor && declared_type.value_case() != onnx::TypeProto::VALUE_NOT_SET) {
      // A sequence/map/optional input: only opaque nodes read it.
      ValueId id = g.AddInput(vi.name(), t);
      g.mutable_value(id).non_tensor = true;
      non_tensor.insert(vi.name());
      info.interface_types[vi.name()] = declared_interface[vi.name()];
      continue;
    }
    if (!is_tensor || t.dtype == DType::kUndefined)
      Fail("graph input '", vi.name(), "' is not a tensor of a supported element type");
    TensorDataPtr default_value;
    if (init != init_protos.end()) {
      default_value = std::make_shared<const TensorData>(FromTensorProto(*init->second, external_dir));
      if (default_value->dtype() != t.dtype)
        Fail("graph input '", vi.name(), "' is ", DTypeName(t.dtype), " but its default value is ",
             DTypeName(default_value->dtype()));
      if (!t.rank_known) t = default_value->type();
    }
    // An input that declares no shape takes any: the shape given is a
    // binding of dimensions that are all symbolic (the written model keeps
    // the input as declared, so nothing may be folded at that shape).
    bool any_shape = false;
    if (!t.rank_known) {
      auto given = binding.given.find(vi.name());
      if (given == binding.given.end())
        Fail("graph input '", vi.name(), "' has no shape (give it with --input_shape=", vi.name(), ":D1,D2,...)");
      t.shape.assign(given->second.size(), -1);
      t.rank_known = true;
      any_shape = true;
    }
    std::vector<int> dims;
    std::vector<std::string> dim_names;  // per dims entry: its name (dim_param), if any
    std::string bound, bound_names;
    for (size_t k = 0; k < t.shape.size(); ++k) {
      if (t.shape[k] < 0) {
        if (default_value) {
          t.shape[k] = default_value->shape()[k];
          continue;
        }
        const std::string param =
            any_shape ? "" : declared_type.tensor_type().shape().dim(static_cast<int>(k)).dim_param();
        t.shape[k] = binding.Value(vi.name(), static_cast<int>(k), param);
        dims.push_back(static_cast<int>(k));
        dim_names.push_back(param);
        probe_values.push_back(binding.Probe(vi.name(), static_cast<int>(k), param));
        bound += (bound.empty() ? "" : ", ") + std::to_string(t.shape[k]);
        bound_names += (bound_names.empty() ? "" : ", ") + (param.empty() ? "axis " + std::to_string(k) : param);
      }
    }
    if (any_shape)
      rep.warnings.push_back("graph input '" + vi.name() + "' declares no shape: bound to [" + bound +
                             "] (--input_shape) for the optimisation, its dimensions symbolic (it keeps no shape "
                             "in the written model)");
    else if (!dims.empty())
      rep.warnings.push_back("graph input '" + vi.name() + "': symbolic dimension(s) bound to " + bound + " (" +
                             bound_names + (binding.given.count(vi.name()) ? "; --input_shape" : "") + ")" +
                             " for the optimisation (kept symbolic in the written model)");
    CheckTensorFits(t, "graph input '" + vi.name() + "'");
    ValueId id = g.AddInput(vi.name(), t);
    g.mutable_value(id).default_value = default_value;
    for (size_t k = 0; k < dims.size(); ++k) {
      symbolic_dims.push_back({id, dims[k]});
      dim_group.push_back(dim_names[k].empty() ? vi.name() + "#" + std::to_string(dims[k]) : dim_names[k]);
    }
    info.interface_types[vi.name()] = declared_interface[vi.name()];
  }
  info.symbolic_dims = !symbolic_dims.empty();
  // Declared value_info types (before binding) travel with the graph for the
  // opaque nodes' outputs, see ExportOnnxModel.
  for (const auto& [name, type] : declared_interface) info.interface_types.emplace(name, type);

  // Quantized units: which tensors a DequantizeLinear produces and which a
  // QuantizeLinear reads (in any domain: ORT's com.microsoft ones as well).
  std::set<std::string> dequantized, quantized;
  if (options.keep_quantized_units)
    for (const auto& np : gp.node()) {
      if (np.op_type() == "DequantizeLinear") dequantized.insert(np.output().begin(), np.output().end());
      if (np.op_type() == "QuantizeLinear" && np.input_size() > 0) quantized.insert(np.input(0));
    }

  // Nodes: create all outputs first so that references resolve in any order.
  const OpRegistry& reg = OpRegistry::Global();
  std::vector<NodeId> ids;
  std::set<std::string> node_names;
  for (int k = 0; k < gp.node_size(); ++k) {
    const onnx::NodeProto& np = gp.node(k);
    std::string name = np.name();
    if (name.empty() || node_names.count(name)) name = g.UniqueName(np.op_type() + "_" + std::to_string(k));
    node_names.insert(name);
    std::vector<std::string> outs(np.output().begin(), np.output().end());
    // Omitted optional outputs ("") get private names.
    for (size_t o = 0; o < outs.size(); ++o)
      if (outs[o].empty()) outs[o] = g.UniqueName(name + ":unused" + std::to_string(o));
    for (const auto& o : outs)
      if (g.FindValue(o) != kNoValue) Fail("tensor '", o, "' is defined more than once (node '", name, "')");
    AttributeMap attrs;
    for (const auto& a : np.attribute()) attrs[a.name()] = FromAttributeProto(a);
    NodeId id = g.AddNode(np.op_type(), {}, static_cast<int>(outs.size()), std::move(attrs), name, outs);
    Node& node = g.mutable_node(id);
    node.domain = IsDefaultDomain(np.domain()) ? "" : np.domain();
    node.doc = np.doc_string();
    node.source_proto = std::make_shared<const std::string>(np.SerializeAsString());
    ids.push_back(id);
  }
  for (int k = 0; k < gp.node_size(); ++k) {
    const onnx::NodeProto& np = gp.node(k);
    Node& node = g.mutable_node(ids[k]);
    for (const auto& in : np.input()) {
      if (in.empty()) {
        node.inputs.push_back(kNoValue);
        continue;
      }
      ValueId v = g.FindValue(in);
      if (v == kNoValue)
        Fail("node ", node.Describe(), " reads tensor '", in,
             "', which is not a graph input, an initializer or a node output");
      node.inputs.push_back(v);
    }
    const OpDef* def = node.domain.empty() ? reg.Find("", node.op) : reg.Find(node.domain, node.op);
    std::string reason = ModelledReason(np, def, opset, node.attrs, node);
    std::vector<std::string> implicit = ImplicitInputs(np);
    if (!implicit.empty() && reason.empty()) reason = "it has subgraphs";
    for (const auto& name : np.output())
      if (non_tensor.count(name)) g.mutable_value(g.FindValue(name)).non_tensor = true;
    if (reason.empty()) {
      for (const auto* names : {&np.input(), &np.output()})
        for (const auto& name : *names)
          if (non_tensor.count(name)) reason = "'" + name + "' is a sequence, map or optional value";
    }
    if (reason.empty() && (!dequantized.empty() || !quantized.empty())) {
      const auto in_unit = [&](const auto& names, const std::set<std::string>& of) {
        return std::any_of(names.begin(), names.end(), [&](const std::string& t) { return of.count(t) > 0; });
      };
      if (in_unit(np.input(), dequantized) || in_unit(np.output(), quantized)) {
        node.opaque_proto = node.source_proto;
        ++rep.quantized_unit_nodes;
      }
    }
    if (!reason.empty()) {
      node.opaque_proto = node.source_proto;
      if (def != nullptr) rep.warnings.push_back("node " + node.Describe() + " kept opaque: " + reason);
      for (const auto& name : implicit) {
        ValueId v = g.FindValue(name);
        if (v == kNoValue)
          Fail("node ", node.Describe(), " reads tensor '", name, "' in a subgraph, which is not defined");
        node.inputs.push_back(v);
        node.implicit_inputs.push_back(name);
      }
    }
  }

  if (rep.quantized_unit_nodes > 0)
    rep.warnings.push_back(std::to_string(rep.quantized_unit_nodes) +
                           " nodes in quantized units (reading a DequantizeLinear or feeding a QuantizeLinear) "
                           "kept as they are: runtimes run each unit as one integer kernel");
  std::vector<ValueId> outputs;
  for (const auto& vi : gp.output()) {
    ValueId v = g.FindValue(vi.name());
    if (v == kNoValue) Fail("graph output '", vi.name(), "' is not produced by any node, input or initializer");
    outputs.push_back(v);
  }
  g.SetOutputs(outputs);

  g.Validate();  // cycles
  // Declared types on node outputs (opaque nodes rely on them; modelled
  // nodes are checked against them).
  for (NodeId id = 0; id < g.num_nodes(); ++id)
    for (ValueId out : g.node(id).outputs) {
      auto it = declared.find(g.value(out).name);
      if (it != declared.end()) g.mutable_value(out).type = it->second;
    }
  // A node reading a value no one could type (an opaque node's output with
  // no static type declared, inferred by ONNX or given by one ONNX Runtime
  // run: a custom operator ONNX Runtime cannot run here, such as a tokenizer
  // of onnxruntime-extensions) is kept opaque too, and so on downstream:
  // rlflow optimises the rest of the model instead of refusing it.
  for (NodeId id : g.TopologicalOrder()) {
    Node& n = g.mutable_node(id);
    if (n.opaque()) continue;
    for (ValueId in : n.inputs) {
      if (in == kNoValue) continue;
      const Value& v = g.value(in);
      if (v.producer == kNoNode || !g.node(v.producer).opaque() || v.non_tensor ||
          (v.type.dtype != DType::kUndefined && v.type.IsStatic()))
        continue;
      n.opaque_proto = n.source_proto;
      rep.warnings.push_back("node " + n.Describe() + " kept opaque: its input '" + v.name + "' (an output of " +
                             g.node(v.producer).Describe() + ") has no static type");
      ++rep.untyped_opaque_nodes;
      break;
    }
  }
  FoldOptions fold;
  std::set<std::string> symbolic_values, static_values;
  if (info.symbolic_dims) {
    // What differs between two bindings of the symbolic dimensions depends on
    // them: those values are computed at run time, not folded.
    // `g` with its symbolic dimensions bound to `value(k)` (per
    // symbolic_dims entry); declared (ONNX-inferred) node output types hold
    // the first binding, so they are left to inference.
    auto bound = [&](const std::function<int64_t(size_t)>& value) {
      Graph p = g;
      for (size_t k = 0; k < symbolic_dims.size(); ++k)
        p.mutable_value(symbolic_dims[k].first).type.shape[symbolic_dims[k].second] = value(k);
      for (NodeId id = 0; id < p.num_nodes(); ++id)
        for (ValueId out : p.node(id).outputs)
          for (int64_t& d : p.mutable_value(out).type.shape) d = kUnknownDim;
      return p;
    };
    auto first = [&](size_t k) { return g.value(symbolic_dims[k].first).type.shape[symbolic_dims[k].second]; };
    Graph a = g, b;
    try {
      // Dead folded values are kept, so that every intermediate step of a
      // folded computation is compared, not only its result.
      FoldOptions probe;
      probe.remove_dead = false;
      std::vector<std::string> probe_stale;  // reported by the import's own pass below
      probe.stale_shapes = &probe_stale;
      InferShapesAndFold(a, probe);
      // The second binding: the given dimensions moved (OtherBindingOf);
      // where the model does not fit that, doubled (a stride-32 detector
      // given 224 does not fit 112); else smaller (a model given its
      // largest size: a position table of 77 rows, a text encoder given 77
      // tokens). None fitting: the first one's error.
      // None fitting, the dimensions the model fixes (GroupsTheModelFixes)
      // stay at their first values and the second bindings are tried
      // again; fitting so, they are bound there for good (DropFixedAxes).
      std::exception_ptr first_error;
      bool fits = false;
      std::set<std::string> fixed;
      for (int attempt = 0; attempt < 2 && !fits; ++attempt) {
        if (attempt == 1 && (fixed = GroupsTheModelFixes(bound, first, probe_values, dim_group)).empty()) break;
        for (size_t kind = 0; kind < 3; ++kind) {
          b = bound([&](size_t k) {
            return fixed.count(dim_group[k]) ? first(k) : SecondValuesOf(first(k), probe_values[k])[kind];
          });
          try {
            InferShapesAndFold(b, probe);
            fits = true;
            break;
          } catch (const Error&) {
            if (!first_error) first_error = std::current_exception();
          }
        }
      }
      if (!fits) std::rethrow_exception(first_error);
      if (!fixed.empty()) DropFixedAxes(g, fixed, first, &symbolic_dims, &probe_values, &dim_group, &rep);
      auto same = [](const Graph& other, const Value& va) {
        ValueId w = other.FindValue(va.name);
        return w != kNoValue && other.value(w).initializer && *other.value(w).initializer == *va.initializer;
      };
      for (ValueId v = 0; v < a.num_values(); ++v) {
        const Value& va = a.value(v);
        if (!va.initializer || va.is_graph_input) continue;
        if (!same(b, va)) symbolic_values.insert(va.name);
      }
      // A static dimension of a tensor with symbolic ones (torch's
      // `n, s, w = h.shape` writes Gather(Shape(h), 2) for h's width): the
      // same under all three bindings. Folded, the shape arithmetic built
      // on it (a head size, the attention scale 1 / sqrt(w / heads)) folds
      // too, and the runtime can fuse what reads it (ORT fuses a MatMul
      // and a constant scale, not a computed one).
      bool third = options.fold_static_dims;
      // A third binding, far from both.
      Graph c = bound([&](size_t k) { return 2 * std::max(probe_values[k], first(k)) + 61; });
      try {
        if (third) InferShapesAndFold(c, probe);
      } catch (const Error&) {
        third = false;  // the third binding does not infer: nothing is taken as static
      }
      for (NodeId id = 0; third && id < g.num_nodes(); ++id) {
        const Node& n = g.node(id);
        if (n.op != "Gather" || n.inputs.size() != 2 || n.outputs.size() != 1) continue;
        const Value& data = g.value(n.inputs[0]);
        if (data.producer == kNoNode || g.node(data.producer).op != "Shape") continue;
        if (const ValueId index = a.FindValue(g.value(n.inputs[1]).name);
            index == kNoValue || !a.value(index).initializer || symbolic_values.count(a.value(index).name))
          continue;
        const Attribute* axis = n.attrs.count("axis") ? &n.attrs.at("axis") : nullptr;
        if (axis != nullptr && axis->i != 0) continue;
        const Value& va = a.value(a.FindValue(g.value(n.outputs[0]).name));
        if (va.initializer && same(b, va) && same(c, va)) static_values.insert(va.name);
      }
    } catch (const Error& e) {
      rep.warnings.push_back(std::string("the model does not infer with its symbolic dimensions bound to a second "
                                         "value (") +
                             e.what() + "): shapes computed from them are folded at the first binding");
      rep.folded_at_binding = true;
      symbolic_values.clear();
      static_values.clear();
    }
    fold.symbolic = &symbolic_values;
    fold.static_values = &static_values;
    rep.static_dims = static_cast<int>(static_values.size());
  }
  fold.notes = &rep.warnings;
  if (options.also_as_given && !static_values.empty()) {
    // The graph as the file computes it: the same folds but the static
    // dimensions' (a copy: its tensors are the ones g holds).
    Graph given = g;
    FoldOptions unfolded = fold;
    std::vector<std::string> notes;
    unfolded.static_values = nullptr;
    unfolded.notes = &notes;
    unfolded.stale_shapes = &notes;
    InferShapesAndFold(given, unfolded);
    rep.as_given = std::move(given);
  }
  // Declared shapes (value_info, graph outputs) that contradict what the
  // nodes compute: stale declarations (a model edited after export, an
  // exporter's mistake). ONNX Runtime merges them leniently and runs the
  // model; so does rlflow, with the computed shape, saying so. A declared
  // element type that contradicts stays an error, as in ONNX Runtime.
  std::vector<std::string> stale;
  fold.stale_shapes = &stale;
  rep.folded_nodes = InferShapesAndFold(g, fold);
  if (!stale.empty()) {
    std::string list;
    for (size_t k = 0; k < stale.size() && k < 3; ++k) list += (k ? "; " : "") + stale[k];
    if (stale.size() > 3) list += "; and " + std::to_string(stale.size() - 3) + " more";
    rep.warnings.push_back(
        std::to_string(stale.size()) +
        (stale.size() > 1 ? " declared shapes of the model contradict" : " declared shape of the model contradicts") +
        " what its nodes compute (" + list +
        "): the computed shapes are used, as ONNX Runtime does (graph outputs keep their "
        "declarations in the written model)");
  }
  // Outputs whose shape depends on a graph input's values (Reshape to a
  // shape that is an input, Expand, Slice with input starts, ...) have
  // unknown dimensions after inference; where the model declares a static
  // shape that agrees, that shape is used (the executor checks it at run
  // time; RandomInputs fills such inputs to produce it). Not with symbolic
  // input dimensions: exporters declare intermediate shapes at the traced
  // example's size, which need not be the bound one.
  for (NodeId id = 0; id < g.num_nodes() && !info.symbolic_dims; ++id) {
    if (g.node(id).opaque()) continue;
    for (ValueId out : g.node(id).outputs) {
      Value& v = g.mutable_value(out);
      if (!v.type.rank_known || v.type.IsStatic()) continue;
      auto it = declared.find(v.name);
      if (it == declared.end() || !it->second.IsStatic() || it->second.dtype != v.type.dtype ||
          it->second.rank() != v.type.rank())
        continue;
      bool agrees = true;
      for (int64_t k = 0; k < v.type.rank(); ++k)
        agrees = agrees && (v.type.shape[k] < 0 || v.type.shape[k] == it->second.shape[k]);
      if (agrees) v.type.shape = it->second.shape;
    }
  }
  // Graph outputs typed by the model must agree with what was inferred.
  for (const auto& vi : gp.output()) {
    const Value& v = g.value(g.FindValue(vi.name()));
    if (v.type.dtype == DType::kUndefined && !v.non_tensor)
      rep.warnings.push_back("type of graph output '" + vi.name() + "' is unknown");
  }
  return g;
}
}  // namespace

namespace {
// ExportOnnxModel; initializers of at least `by_reference_min` bytes are
// written as by-reference stand-ins (ReimportGraph, weights_by_reference).
void ExportModel(const Graph& g, onnx::ModelProto* model, size_t by_reference_min) {
  const ModelInfo& info = g.info();
  model->Clear();
  model->set_ir_version(std::min<int64_t>(std::max<int64_t>(info.ir_version, 7), 8));
  model->set_producer_name(info.producer_name.empty() ? "rlflow" : info.producer_name);
  model->set_producer_version(info.producer_name.empty() ? "0.1" : info.producer_version);
  if (!info.doc.empty()) model->set_doc_string(info.doc);
  if (info.model_version != 0) model->set_model_version(info.model_version);
  if (!info.model_domain.empty()) model->set_domain(info.model_domain);
  // Opset imports: the model's, and version 1 of every other domain a
  // node is in (a rewrite gave the graph a com.microsoft operator).
  std::map<std::string, int64_t> opsets(info.opsets.begin(), info.opsets.end());
  for (NodeId id = 0; id < g.num_nodes(); ++id) {
    const std::string& d = g.node(id).domain;
    if (!d.empty() && d != "ai.onnx") opsets.emplace(d, 1);
  }
  for (const auto& [domain, version] : opsets) {
    auto* imp = model->add_opset_import();
    imp->set_domain(domain);
    imp->set_version(version);
  }
  for (const auto& [k, v] : info.metadata) {
    auto* p = model->add_metadata_props();
    p->set_key(k);
    p->set_value(v);
  }
  for (const auto& f : info.functions) model->add_functions()->ParseFromString(f);

  // Graph inputs and outputs keep their declared types (symbolic dimension
  // names included) when the element type is still the same.
  auto interface_info = [&](const Value& v, onnx::ValueInfoProto* vi) {
    if (auto doc = info.interface_docs.find(v.name); doc != info.interface_docs.end()) vi->set_doc_string(doc->second);
    auto it = info.interface_types.find(v.name);
    onnx::TypeProto declared;
    if (it != info.interface_types.end() && declared.ParseFromString(it->second) &&
        (v.non_tensor ||
         (declared.has_tensor_type() && declared.tensor_type().elem_type() == static_cast<int32_t>(v.type.dtype)))) {
      vi->set_name(v.name);
      *vi->mutable_type() = declared;
      return;
    }
    ToValueInfo(v.name, v.type, vi);
  };

  onnx::GraphProto* gp = model->mutable_graph();
  gp->set_name(info.graph_name);
  if (!info.graph_doc.empty()) gp->set_doc_string(info.graph_doc);
  for (ValueId in : g.inputs()) {
    interface_info(g.value(in), gp->add_input());
    if (g.value(in).default_value) ToTensorProto(*g.value(in).default_value, g.value(in).name, gp->add_initializer());
  }
  std::vector<NodeId> order = g.TopologicalOrder();
  // Only values that are used (or are outputs) are exported as initializers.
  std::vector<char> used(g.num_values(), 0);
  for (NodeId id : order)
    for (ValueId in : g.node(id).inputs)
      if (in != kNoValue) used[in] = 1;
  for (ValueId out : g.outputs()) used[out] = 1;
  for (ValueId v : g.initializers()) {
    if (!used[v]) continue;
    const TensorData& data = *g.value(v).initializer;
    if (data.size_bytes() >= by_reference_min) {
      ToReferenceProto(data, g.value(v).name, gp->add_initializer());
    } else {
      ToTensorProto(data, g.value(v).name, gp->add_initializer());
    }
  }
  std::set<ValueId> outputs(g.outputs().begin(), g.outputs().end());
  // ONNX Runtime rejects two nodes of one name: rename repeats ("x", "x_1", ...).
  std::set<std::string> node_names;
  for (NodeId id : order) node_names.insert(g.node(id).name);
  std::set<std::string> written_names;
  auto unique_node_name = [&](const std::string& base) {
    std::string node_name = base;
    if (!node_name.empty() && !written_names.insert(node_name).second) {
      for (int k = 1;; ++k) {
        std::string candidate = base + "_" + std::to_string(k);
        if (!node_names.count(candidate) && written_names.insert(candidate).second) return candidate;
      }
    }
    return node_name;
  };
  for (NodeId id : order) {
    const Node& n = g.node(id);
    // Subgraphs read outer tensors by name: a tensor renamed by a rewrite is
    // made available under the name they use.
    for (size_t k = 0; k < n.implicit_inputs.size(); ++k) {
      const Value& v = g.value(n.inputs[n.num_explicit_inputs() + k]);
      const std::string& wanted = n.implicit_inputs[k];
      if (v.name == wanted) continue;
      if (g.FindValue(wanted) != kNoValue)
        Fail("cannot export node ", n.Describe(), ": its subgraph reads '", wanted, "', now a different tensor");
      onnx::NodeProto* alias = gp->add_node();
      alias->set_op_type("Identity");
      alias->set_name(unique_node_name(n.name + "_outer_" + wanted));
      alias->add_input(v.name);
      alias->add_output(wanted);
    }
    onnx::NodeProto* np = gp->add_node();
    std::string node_name = unique_node_name(n.name);
    if (n.opaque()) {
      np->ParseFromString(*n.opaque_proto);
      np->clear_input();
      np->clear_output();
    } else {
      np->set_op_type(n.op);
      if (!n.domain.empty()) np->set_domain(n.domain);
      for (const auto& [name, attr] : n.attrs) ToAttributeProto(name, attr, np->add_attribute());
      if (!n.doc.empty()) np->set_doc_string(n.doc);
    }
    np->set_name(node_name);
    size_t last = n.num_explicit_inputs();
    // Trailing omitted inputs are dropped, except on opaque nodes (unchanged).
    while (!n.opaque() && last > 0 && n.inputs[last - 1] == kNoValue) --last;
    for (size_t k = 0; k < last; ++k) np->add_input(n.inputs[k] == kNoValue ? "" : g.value(n.inputs[k]).name);
    for (ValueId out : n.outputs) np->add_output(g.value(out).name);
    for (ValueId out : n.outputs) {
      const Value& v = g.value(out);
      // onnx::checker requires a shape in every value_info: skip unknown
      // ranks. With symbolic dimensions the shapes here are those of one
      // binding: none are written.
      if (info.symbolic_dims || v.non_tensor) {
        // Except opaque nodes' outputs, as the model declared them: nothing
        // else can infer a custom op's types.
        auto it = info.interface_types.find(v.name);
        onnx::TypeProto declared;
        if (n.opaque() && !outputs.count(out) && it != info.interface_types.end() &&
            declared.ParseFromString(it->second)) {
          auto* vi = gp->add_value_info();
          vi->set_name(v.name);
          *vi->mutable_type() = declared;
        }
        continue;
      }
      if (!outputs.count(out) && v.type.dtype != DType::kUndefined && v.type.rank_known)
        ToValueInfo(v.name, v.type, gp->add_value_info());
    }
  }
  for (ValueId out : g.outputs()) interface_info(g.value(out), gp->add_output());
  try {
    CheckExported(*model);
  } catch (const std::exception& e) {
    Fail("the exported model fails onnx::checker: ", FirstLine(e.what()));
  }
}
}  // namespace

void ExportOnnxModel(const Graph& g, onnx::ModelProto* model) {
  ExportModel(g, model, std::numeric_limits<size_t>::max());
}

std::string ExportOnnxBytes(const Graph& graph) {
  onnx::ModelProto model;
  ExportOnnxModel(graph, &model);
  std::string bytes;
  if (!model.SerializeToString(&bytes))
    Fail("cannot serialize the exported model (protobuf's limit is 2 GB: write its weights as external data)");
  return bytes;
}

namespace {

// Rewrites an exported opset-13 model into opset 11 or 12 form. Between them
// only a few operators changed signature or meaning: Split, Squeeze,
// Unsqueeze and ReduceSum take their axes/sizes as an input from 13 (an
// attribute before), Softmax, LogSoftmax and Hardmax changed the meaning of
// `axis` (before 13: over the input coerced to 2-D at `axis`, the same only
// when it is the last axis), and Dropout-11 takes its ratio as an attribute.
// Every other change from 11 to 13 added element types. Returns "" or why it
// cannot (a computed axes input, Softmax over an inner axis, ...); the caller
// checks the result against the target opset's schemas.
std::string DowngradeFrom13(const Graph& graph, onnx::ModelProto* model, int target) {
  // Constants in scope: initializers and Constant nodes' values, of the
  // graph and the graphs around a subgraph (If/Loop/Scan bodies, whose
  // nodes ONNX's converter upgraded as well).
  std::map<std::string, const onnx::TensorProto*> inits;
  auto const_ints = [&](const std::string& name, std::vector<int64_t>* out) {
    auto it = inits.find(name);
    if (it == inits.end()) return false;
    TensorData d = FromTensorProto(*it->second);
    if (!IsInteger(d.dtype())) return false;
    *out = d.ToInt64();
    return true;
  };
  auto rank_of = [&](const std::string& name) -> int64_t {
    ValueId v = graph.FindValue(name);
    if (v == kNoValue || !graph.value(v).type.rank_known) return -1;
    return graph.value(v).type.rank();
  };
  std::function<std::string(onnx::GraphProto*)> downgrade = [&](onnx::GraphProto* gp) -> std::string {
    for (const auto& t : gp->initializer()) inits[t.name()] = &t;
    for (const auto& np : gp->node())
      if (np.op_type() == "Constant" && np.output_size() == 1 && (np.domain().empty() || np.domain() == "ai.onnx"))
        for (const auto& a : np.attribute())
          if (a.name() == "value" && a.has_t()) inits[np.output(0)] = &a.t();
    for (auto& np : *gp->mutable_node()) {
      for (auto& a : *np.mutable_attribute()) {
        if (a.has_g()) {
          std::string why = downgrade(a.mutable_g());
          if (!why.empty()) return why;
        }
        for (auto& sub : *a.mutable_graphs()) {
          std::string why = downgrade(&sub);
          if (!why.empty()) return why;
        }
      }
      if (!np.domain().empty() && np.domain() != "ai.onnx") continue;
      const std::string& op = np.op_type();
      auto set_ints = [&](const std::string& name, const std::vector<int64_t>& v) {
        auto* a = np.add_attribute();
        a->set_name(name);
        a->set_type(onnx::AttributeProto::INTS);
        for (int64_t x : v) a->add_ints(x);
      };
      auto drop_attr = [&](const std::string& name) {
        auto* attrs = np.mutable_attribute();
        for (int k = attrs->size() - 1; k >= 0; --k)
          if (attrs->Get(k).name() == name) attrs->DeleteSubrange(k, 1);
      };
      auto find_attr = [&](const std::string& name) -> const onnx::AttributeProto* {
        for (const auto& a : np.attribute())
          if (a.name() == name) return &a;
        return nullptr;
      };
      if (op == "Split" || op == "Squeeze" || op == "Unsqueeze" || op == "ReduceSum") {
        if (op == "ReduceSum") {
          const auto* noop = find_attr("noop_with_empty_axes");
          if (noop && noop->i() != 0 && np.input_size() < 2) return "ReduceSum with noop_with_empty_axes";
          drop_attr("noop_with_empty_axes");
        }
        if (np.input_size() >= 2 && !np.input(1).empty()) {
          std::vector<int64_t> v;
          if (!const_ints(np.input(1), &v)) return op + " '" + np.name() + "' reads its axes at run time";
          if (op == "ReduceSum" && v.empty()) {
            // all axes: the attribute's absence says the same
          } else {
            set_ints(op == "Split" ? "split" : "axes", v);
          }
        }
        while (np.input_size() > 1) np.mutable_input()->RemoveLast();
      } else if (op == "Softmax" || op == "LogSoftmax" || op == "Hardmax") {
        int64_t rank = rank_of(np.input(0));
        const auto* ax = find_attr("axis");
        int64_t axis = ax ? ax->i() : -1;
        if (rank < 0) return op + " '" + np.name() + "': input rank unknown";
        if (axis < 0) axis += rank;
        if (axis != rank - 1) return op + " '" + np.name() + "' over an inner axis";
        drop_attr("axis");
        auto* a = np.add_attribute();
        a->set_name("axis");
        a->set_type(onnx::AttributeProto::INT);
        a->set_i(axis);
      } else if (op == "Dropout" && target < 12) {
        float ratio = 0.5f;
        if (np.input_size() >= 2 && !np.input(1).empty()) {
          auto it = inits.find(np.input(1));
          if (it == inits.end()) return "Dropout '" + np.name() + "' computes its ratio";
          std::vector<double> r = FromTensorProto(*it->second).ToDouble();
          if (r.size() != 1) return "Dropout '" + np.name() + "' has a ratio that is not a scalar";
          ratio = static_cast<float>(r[0]);
        }
        if (np.input_size() >= 3 && !np.input(2).empty()) {
          std::vector<int64_t> t;
          if (!const_ints(np.input(2), &t) || (t.size() == 1 && t[0] != 0))
            return "Dropout '" + np.name() + "' in training mode";
        }
        while (np.input_size() > 1) np.mutable_input()->RemoveLast();
        drop_attr("seed");
        auto* a = np.add_attribute();
        a->set_name("ratio");
        a->set_type(onnx::AttributeProto::FLOAT);
        a->set_f(ratio);
      }
    }
    return std::string();
  };
  std::string why = downgrade(model->mutable_graph());
  if (!why.empty()) return why;
  for (auto& imp : *model->mutable_opset_import())
    if (IsDefaultDomain(imp.domain())) imp.set_version(target);
  // Initializers that only fed the moved inputs.
  std::set<std::string> used;
  std::function<void(const onnx::GraphProto&)> reads = [&](const onnx::GraphProto& gp) {
    for (const auto& np : gp.node()) {
      for (const auto& in : np.input()) used.insert(in);
      for (const auto& a : np.attribute()) {
        if (a.has_g()) reads(a.g());
        for (const auto& sub : a.graphs()) reads(sub);
      }
    }
    for (const auto& o : gp.output()) used.insert(o.name());
  };
  reads(model->graph());
  for (const auto& i : model->graph().input()) used.insert(i.name());
  auto* initializers = model->mutable_graph()->mutable_initializer();
  for (int k = initializers->size() - 1; k >= 0; --k)
    if (!used.count(initializers->Get(k).name())) initializers->DeleteSubrange(k, 1);
  return "";
}

}  // namespace

namespace {

std::string SerializeModel(const onnx::ModelProto& model) {
  std::string bytes;
  if (!model.SerializeToString(&bytes))
    Fail("cannot serialize the exported model (protobuf's limit is 2 GB: write its weights as external data)");
  return bytes;
}

// The exported model at the source opset where it can be converted back
// (see ExportOnnxBytesAtSourceOpset).
void ExportAtSourceOpset(const Graph& graph, onnx::ModelProto* model, std::string* note, int* written_opset,
                         size_t by_reference_min = std::numeric_limits<size_t>::max(), bool fuse_functions = true) {
  const int64_t source = graph.info().source_opset;
  const int64_t current = graph.opset();
  if (written_opset) *written_opset = static_cast<int>(current);
  ExportModel(graph, model, by_reference_min);
  // Opsets 18+: checked at 17 (by ExportModel), then converted back.
  if (source > kMaxOpset && current == kMaxOpset) {
    UpgradeFromOpset17(model, static_cast<int>(source), fuse_functions);
    if (written_opset) *written_opset = static_cast<int>(source);
    return;
  }
  if (source <= 0 || source >= current) return;
  // Models from opsets 1 to 10 go back to 11, the lowest rlflow writes.
  const int64_t target = std::max<int64_t>(source, kMinWrittenOpset);
  std::string why;
  if (target >= current) {
    why = "the graph is at opset " + std::to_string(current);
  } else if (current == kCanonicalMinOpset) {
    why = DowngradeFrom13(graph, model, static_cast<int>(target));
    if (why.empty()) {
      try {
        CheckExported(*model);
      } catch (const std::exception& e) {
        why = FirstLine(e.what());
      }
    }
  } else {
    why = "the graph is at opset " + std::to_string(current);
  }
  if (why.empty()) {
    if (written_opset) *written_opset = static_cast<int>(target);
    if (note && target != source)
      *note = "written at opset " + std::to_string(target) + ": the model came at opset " + std::to_string(source) +
              "; rlflow writes opsets " + std::to_string(kMinWrittenOpset) + " and newer";
    return;
  }
  if (note)
    *note = "written at opset " + std::to_string(current) + ": converting back to the original opset " +
            std::to_string(target) + " failed (" + why + ")";
  ExportModel(graph, model, by_reference_min);
}

void ExportFor(const Graph& graph, const WriteOptions& options, onnx::ModelProto* model, std::string* note,
               int* written_opset, size_t by_reference_min = std::numeric_limits<size_t>::max()) {
  // A graph from opsets 18+ has no runnable form at its own opset (17: its
  // nodes without an opset-17 form are in kNewerOpsetDomain).
  if (options.at_graph_opset && graph.info().source_opset <= kMaxOpset) {
    ExportModel(graph, model, by_reference_min);
    if (written_opset) *written_opset = static_cast<int>(graph.opset());
  } else {
    ExportAtSourceOpset(graph, model, note, written_opset, by_reference_min, options.fuse_functions);
  }
}

bool WritesExternal(const Graph& graph, const WriteOptions& options, bool keep_source_form) {
  switch (options.external) {
    case ExternalData::kInline: return false;
    case ExternalData::kExternal: return true;
    case ExternalData::kAuto: break;
  }
  return (keep_source_form && graph.info().external_data) || InitializerBytes(graph) > kMaxInlineBytes;
}

// The offset in `bytes` (a serialized message, its fields in the order of
// their numbers, as protobuf writes them) of its first field numbered above
// `field`; its size if there is none.
size_t OffsetAfterField(const std::string& bytes, int field) {
  using WFL = google::protobuf::internal::WireFormatLite;
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  while (true) {
    const size_t at = static_cast<size_t>(in.CurrentPosition());
    const uint32_t tag = in.ReadTag();
    if (tag == 0) return bytes.size();
    if (WFL::GetTagFieldNumber(tag) > field) return at;
    RLFLOW_CHECK(WFL::SkipField(&in, tag), "OffsetAfterField: a malformed serialized message");
  }
}

// Writes `model`, whose large initializers are exported by reference, with
// those initializers' bytes taken from `weights` (the graph's own tensors):
// the bytes SerializeToString would give for the model with them inline,
// streamed, so that the weights are never copied. Atomically.
void WriteInlineStreamed(onnx::ModelProto* model, const std::string& path,
                         const std::map<std::string, TensorDataPtr>& weights) {
  using WFL = google::protobuf::internal::WireFormatLite;
  using google::protobuf::io::CodedOutputStream;
  constexpr int kModelGraph = onnx::ModelProto::kGraphFieldNumber;
  constexpr int kGraphInitializer = onnx::GraphProto::kInitializerFieldNumber;
  constexpr int kTensorRawData = onnx::TensorProto::kRawDataFieldNumber;
  // Each initializer serialized without its data, cut where raw_data goes.
  struct Part {
    std::string bytes;
    size_t cut = 0;
    const TensorData* data = nullptr;
    size_t size = 0;  // serialized with its data
  };
  auto length_delimited = [](size_t n) { return 1 + CodedOutputStream::VarintSize64(n) + n; };
  std::vector<Part> parts;
  google::protobuf::RepeatedPtrField<onnx::TensorProto> inits;
  inits.Swap(model->mutable_graph()->mutable_initializer());
  size_t graph_size = 0;
  for (onnx::TensorProto& t : inits) {
    Part p;
    if (IsByReference(t)) {
      auto it = weights.find(t.name());
      RLFLOW_CHECK(it != weights.end(), "WriteInlineStreamed: weight '", t.name(),
                   "' exported by reference is unknown");
      p.data = it->second.get();
      t.clear_external_data();
      t.clear_data_location();
    }
    p.bytes = t.SerializeAsString();
    p.cut = p.data ? OffsetAfterField(p.bytes, kTensorRawData) : p.bytes.size();
    p.size = p.bytes.size() + (p.data ? length_delimited(p.data->size_bytes()) : 0);
    graph_size += length_delimited(p.size);
    parts.push_back(std::move(p));
  }
  inits.Clear();
  const std::string graph = model->graph().SerializeAsString();
  graph_size += graph.size();
  model->clear_graph();
  const std::string rest = model->SerializeAsString();
  if (rest.size() + length_delimited(graph_size) > static_cast<size_t>(INT32_MAX))
    Fail("cannot serialize the exported model (protobuf's limit is 2 GB: write its weights as external data)");
  const size_t graph_cut = OffsetAfterField(graph, kGraphInitializer), model_cut = OffsetAfterField(rest, kModelGraph);
  WriteFileAtomicallyWith(path, [&](int fd) {
    std::string buffer;  // everything but the weights, written in pieces of about 1 MiB
    auto flush = [&] {
      WriteAll(fd, buffer.data(), buffer.size(), path);
      buffer.clear();
    };
    auto put = [&](const char* data, size_t n) {
      buffer.append(data, n);
      if (buffer.size() >= (size_t{1} << 20)) flush();
    };
    auto header = [&](int field, size_t n) {  // a length-delimited field's tag and length
      uint8_t b[16];
      uint8_t* end = CodedOutputStream::WriteVarint32ToArray(WFL::MakeTag(field, WFL::WIRETYPE_LENGTH_DELIMITED), b);
      end = CodedOutputStream::WriteVarint64ToArray(n, end);
      put(reinterpret_cast<const char*>(b), static_cast<size_t>(end - b));
    };
    put(rest.data(), model_cut);
    header(kModelGraph, graph_size);
    put(graph.data(), graph_cut);
    for (const Part& p : parts) {
      header(kGraphInitializer, p.size);
      put(p.bytes.data(), p.cut);
      if (p.data) {
        header(kTensorRawData, p.data->size_bytes());
        flush();
        WriteAll(fd, static_cast<const char*>(p.data->data()), p.data->size_bytes(), path);
      }
      put(p.bytes.data() + p.cut, p.bytes.size() - p.cut);
    }
    put(graph.data() + graph_cut, graph.size() - graph_cut);
    put(rest.data() + model_cut, rest.size() - model_cut);
    flush();
  });
}

// Moves the model's large initializers into "<path>.data" beside it (offsets
// aligned to 4 KiB) and writes both. Both are written under temporary names
// first, and the model is checked by path with onnx::checker (which resolves
// the data file) while it names the temporary data file: a failure up to
// then leaves any previous output and its data file as they were. Then the
// model is written again naming "<path>.data", and the data file and the
// model are renamed into place, in that order (if the model's rename fails,
// the new data file is removed rather than left beside a model it does not
// belong to).
// Weights exported by reference (ExportModel) are written from `weights`,
// the graph's own tensors: the model is never serialized with them.
// The initializers of `g` and of the subgraphs its nodes hold (an opaque
// If's branches), outer graph first.
void CollectInitializers(onnx::GraphProto* g, std::vector<onnx::TensorProto*>* out) {
  for (auto& t : *g->mutable_initializer()) out->push_back(&t);
  for (auto& n : *g->mutable_node())
    for (auto& a : *n.mutable_attribute()) {
      if (a.has_g()) CollectInitializers(a.mutable_g(), out);
      for (auto& sub : *a.mutable_graphs()) CollectInitializers(&sub, out);
    }
}

void WriteWithExternalData(onnx::ModelProto* model, const std::string& given, size_t min_bytes,
                           const std::map<std::string, TensorDataPtr>& weights) {
  if (IsSpecialFile(given))
    Fail("cannot write '", given, "': it is not a regular file, and a model with external data is two files (",
         BaseName(given), " and ", BaseName(given), ".data)");
  const std::string path = WriteTarget(given);
  const std::string location = BaseName(path) + ".data";
  const std::string data_path = DirName(path) + "/" + location;
  const std::string tag = ".tmp." + std::to_string(::getpid());
  const std::string data_tmp = data_path + tag, model_tmp = path + tag;
  PendingTemporaryFile pending_data(data_tmp), pending_model(model_tmp);
  bool data_renamed = false;
  int fd = -1;
  try {
    fd = ::open(data_tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) Fail("cannot write '", data_path, "': ", std::strerror(errno));
    constexpr size_t kAlign = 4096;
    const std::string zeros(kAlign, '\0');
    size_t offset = 0;
    // Subgraphs' large initializers too (an If branch optimised by rlflow
    // holds weights of its own), as ONNX's convert_model_to_external_data.
    std::vector<onnx::TensorProto*> initializers;
    CollectInitializers(model->mutable_graph(), &initializers);
    const int top_level = model->graph().initializer_size();
    for (size_t i = 0; i < initializers.size(); ++i) {
      onnx::TensorProto& t = *initializers[i];
      const TensorData* by_reference = nullptr;
      if (static_cast<int>(i) < top_level && IsByReference(t)) {
        auto it = weights.find(t.name());
        RLFLOW_CHECK(it != weights.end(), "WriteWithExternalData: weight '", t.name(),
                     "' exported by reference is unknown");
        by_reference = it->second.get();
        t.clear_external_data();
      } else if (!t.has_raw_data() || t.raw_data().size() < min_bytes) {
        continue;
      }
      size_t pad = (kAlign - offset % kAlign) % kAlign;
      WriteAll(fd, zeros.data(), pad, data_path);
      offset += pad;
      const size_t length = by_reference ? by_reference->size_bytes() : t.raw_data().size();
      WriteAll(fd, by_reference ? static_cast<const char*>(by_reference->data()) : t.raw_data().data(), length,
               data_path);
      t.clear_raw_data();
      t.set_data_location(onnx::TensorProto::EXTERNAL);
      for (const auto& [k, v] : std::vector<std::pair<std::string, std::string>>{
               {"location", location}, {"offset", std::to_string(offset)}, {"length", std::to_string(length)}}) {
        auto* e = t.add_external_data();
        e->set_key(k);
        e->set_value(v);
      }
      offset += length;
    }
    if (::fsync(fd) != 0) Fail("cannot write '", data_path, "': ", std::strerror(errno));
    int closed = ::close(fd);
    fd = -1;
    if (closed != 0) Fail("cannot write '", data_path, "': ", std::strerror(errno));
    // The tensors written above name `location`; for the check they name
    // the temporary data file.
    auto relocate = [&](const std::string& from, const std::string& to) {
      for (onnx::TensorProto* t : initializers)
        for (auto& e : *t->mutable_external_data())
          if (e.key() == "location" && e.value() == from) e.set_value(to);
    };
    relocate(location, BaseName(data_tmp));
    const bool ort_operators = MoveOrtOnnxDomainOperatorsForChecker(model) > 0;
    const std::vector<onnx::TypeProto_Tensor*> shaped = ShapeTheInterfaceForTheChecker(model);
    WriteFileAtomically(model_tmp, SerializeModel(*model));
    try {
      onnx::checker::check_model(model_tmp);
    } catch (const std::exception& e) {
      Fail("the written model fails onnx::checker: ", FirstLine(e.what()));
    }
    for (onnx::TypeProto_Tensor* t : shaped) t->clear_shape();
    if (ort_operators) RestoreOrtOnnxDomainOperators(model);
    relocate(BaseName(data_tmp), location);
    WriteFileAtomically(model_tmp, SerializeModel(*model));
    if (::rename(data_tmp.c_str(), data_path.c_str()) != 0)
      Fail("cannot write '", data_path, "': ", std::strerror(errno));
    data_renamed = true;
    if (::rename(model_tmp.c_str(), path.c_str()) != 0) Fail("cannot write '", path, "': ", std::strerror(errno));
  } catch (...) {
    if (fd >= 0) ::close(fd);
    ::unlink(data_tmp.c_str());
    ::unlink(model_tmp.c_str());
    if (data_renamed) ::unlink(data_path.c_str());
    throw;
  }
}

}  // namespace

bool WritesExternalData(const Graph& graph, const WriteOptions& options) {
  return WritesExternal(graph, options, /*keep_source_form=*/true);
}

size_t InitializerBytes(const Graph& graph) {
  size_t total = 0;
  for (ValueId v : graph.initializers()) total += graph.value(v).initializer->size_bytes();
  for (ValueId v : graph.inputs())
    if (graph.value(v).default_value) total += graph.value(v).default_value->size_bytes();
  return total;
}

std::string ExportOnnxBytesAtSourceOpset(const Graph& graph, std::string* note, int* written_opset) {
  onnx::ModelProto model;
  ExportAtSourceOpset(graph, &model, note, written_opset);
  return SerializeModel(model);
}

void WriteOnnxFile(const Graph& graph, const std::string& path, std::string* note, const WriteOptions& options,
                   int* written_opset) {
  CheckWritablePath(path, "model");
  onnx::ModelProto model;
  if (WritesExternal(graph, options, /*keep_source_form=*/true)) {
    // The large weights go from the graph's tensors to the data file, not
    // through the protobuf (held once in memory, not twice).
    ExportFor(graph, options, &model, note, written_opset, options.external_min_bytes);
    WriteWithExternalData(&model, path, options.external_min_bytes, *WeightsByName(graph, options.external_min_bytes));
  } else {
    // The large weights are exported by reference and streamed from the
    // graph's tensors into the file: never copied into the protobuf, nor
    // the protobuf into one string.
    constexpr size_t kStreamedMinBytes = 4096;
    ExportFor(graph, options, &model, note, written_opset, kStreamedMinBytes);
    WriteInlineStreamed(&model, path, *WeightsByName(graph, kStreamedMinBytes));
  }
}

std::shared_ptr<const std::map<std::string, TensorDataPtr>> WeightsByName(const Graph& graph, size_t min_bytes) {
  auto weights = std::make_shared<std::map<std::string, TensorDataPtr>>();
  for (ValueId v : graph.initializers())
    if (graph.value(v).initializer->size_bytes() >= min_bytes)
      (*weights)[graph.value(v).name] = graph.value(v).initializer;
  return weights;
}

Graph ReimportGraph(const Graph& graph, const std::string& what, const ImportOptions& options,
                    const WriteOptions& write, int* written_opset, std::string* note, ImportReport* report) {
  if (write.weights_by_reference) {
    // The large weights stay the graph's own tensors: what is serialized
    // and imported again is the rest (always small enough for one protobuf).
    onnx::ModelProto model;
    ExportFor(graph, write, &model, note, written_opset, write.external_min_bytes);
    ImportOptions shared = options;
    shared.known_weights = WeightsByName(graph, write.external_min_bytes);
    Graph g = ImportOnnxBytes(SerializeModel(model), what, shared, report);
    g.info().external_data = graph.info().external_data;
    return g;
  }
  if (!WritesExternal(graph, write, /*keep_source_form=*/false)) {
    onnx::ModelProto model;
    ExportFor(graph, write, &model, note, written_opset);
    // What a write would serialize, imported as it is (protobuf's round trip
    // through bytes is exact): the weights are copied once, not three times.
    return ImportOnnxModel(std::move(model), what, options, report);
  }
  const std::string dir = MakeTempDir("rlflow-reimport-");
  try {
    WriteOnnxFile(graph, dir + "/model.onnx", note, write, written_opset);
    ImportOptions in_dir = options;
    in_dir.external_data_dir = dir;
    Graph g = ImportOnnxBytes(ReadFile(dir + "/model.onnx", "model"), what, in_dir, report);
    RemoveTree(dir);
    return g;
  } catch (...) {
    RemoveTree(dir);
    throw;
  }
}

TensorData ParseTensorProto(const std::string& bytes, const std::string& what, std::string* name) {
  onnx::TensorProto t;
  if (!t.ParseFromString(bytes)) Fail(what, " is not a valid ONNX TensorProto");
  if (name) *name = t.name();
  return FromTensorProto(t);
}

namespace {
TensorData ParseNpy(const std::string& bytes, const std::string& path) {
  auto bad = [&](const std::string& why) { Fail("'", path, "' is not a .npy file rlflow reads: ", why); };
  if (bytes.size() < 10) bad("too short");
  const int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len = 0, start = 0;
  if (major == 1) {
    header_len =
        static_cast<unsigned char>(bytes[8]) | (static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8);
    start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) bad("too short");
    for (int k = 3; k >= 0; --k) header_len = (header_len << 8) | static_cast<unsigned char>(bytes[8 + k]);
    start = 12;
  } else {
    bad("format version " + std::to_string(major));
  }
  if (bytes.size() < start + header_len) bad("truncated header");
  const std::string header = bytes.substr(start, header_len);
  auto field = [&](const std::string& key) {
    size_t at = header.find("'" + key + "'");
    if (at == std::string::npos) bad("no '" + key + "' in the header");
    size_t colon = header.find(':', at);
    if (colon == std::string::npos) bad("malformed header");
    size_t p = header.find_first_not_of(' ', colon + 1);
    if (p == std::string::npos) bad("malformed header");
    return p;
  };
  size_t d = field("descr");
  if (header[d] != '\'') bad("malformed descr");
  const std::string descr = header.substr(d + 1, header.find('\'', d + 1) - d - 1);
  static const std::map<std::string, DType> types = {
      {"|b1", DType::kBool},    {"|i1", DType::kInt8},   {"<i2", DType::kInt16},  {"<i4", DType::kInt32},
      {"<i8", DType::kInt64},   {"|u1", DType::kUInt8},  {"<u2", DType::kUInt16}, {"<f2", DType::kFloat16},
      {"<f4", DType::kFloat32}, {"<f8", DType::kFloat64}};
  auto type = types.find(descr);
  if (type == types.end()) bad("element type '" + descr + "' (little-endian numbers and bools only)");
  if (header.compare(field("fortran_order"), 5, "False") != 0)
    bad("Fortran order (save it with numpy.ascontiguousarray)");
  size_t sp = field("shape");
  if (header[sp] != '(') bad("malformed shape");
  size_t close = header.find(')', sp);
  if (close == std::string::npos) bad("malformed shape");
  Shape shape;
  std::string dims = header.substr(sp + 1, close - sp - 1);
  size_t p = 0;
  while (p < dims.size()) {
    size_t q = dims.find(',', p);
    if (q == std::string::npos) q = dims.size();
    std::string dim = dims.substr(p, q - p);
    dim.erase(0, dim.find_first_not_of(' '));
    if (!dim.empty() && dim.back() == 'L') dim.pop_back();
    while (!dim.empty() && dim.back() == ' ') dim.pop_back();
    if (!dim.empty()) {
      size_t used = 0;
      long long v = -1;
      try {
        v = std::stoll(dim, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != dim.size() || v < 0) bad("malformed shape '" + dims + "'");
      shape.push_back(v);
    }
    p = q + 1;
  }
  TensorType t;
  t.dtype = type->second;
  t.shape = shape;
  CheckTensorFits(t, "'" + path + "'");
  const size_t need = static_cast<size_t>(t.NumElements()) * DTypeSize(t.dtype);
  const size_t data = start + header_len;
  if (bytes.size() - data != need)
    Fail("'", path, "' has ", bytes.size() - data, " bytes of data, its header (", descr, " ", ShapeToString(shape),
         ") needs ", need);
  return TensorData(t.dtype, shape, bytes.substr(data));
}
}  // namespace

TensorData ReadTensorFile(const std::string& path) {
  std::string bytes = ReadFile(path, "tensor file");
  if (bytes.compare(0, 6, "\x93NUMPY") == 0) return ParseNpy(bytes, path);
  return ParseTensorProto(bytes, "'" + path + "' (neither a .npy file nor an ONNX TensorProto)");
}

std::map<std::string, std::string> ParseInputData(const std::string& spec) {
  std::map<std::string, std::string> out;
  size_t start = 0;
  while (start < spec.size()) {
    size_t end = spec.find(';', start);
    if (end == std::string::npos) end = spec.size();
    std::string item = spec.substr(start, end - start);
    start = end + 1;
    if (item.empty()) continue;
    size_t colon = item.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == item.size())
      Fail("--input_data item '", item, "' is not NAME:FILE (e.g. input_ids:ids.npy)");
    std::string name = item.substr(0, colon);
    if (!out.emplace(name, item.substr(colon + 1)).second) Fail("--input_data gives input '", name, "' twice");
  }
  return out;
}

namespace {
// ONNX's notation for non-tensor types: "seq(tensor(float))",
// "optional(seq(tensor(int64)))", "map(int64,tensor(float))".
std::string NonTensorTypeText(const onnx::TypeProto& t) {
  switch (t.value_case()) {
    case onnx::TypeProto::kTensorType: return "tensor(" + DTypeName(DTypeFromCode(t.tensor_type().elem_type())) + ")";
    case onnx::TypeProto::kSequenceType: return "seq(" + NonTensorTypeText(t.sequence_type().elem_type()) + ")";
    case onnx::TypeProto::kOptionalType: return "optional(" + NonTensorTypeText(t.optional_type().elem_type()) + ")";
    case onnx::TypeProto::kMapType:
      return "map(" + DTypeName(DTypeFromCode(t.map_type().key_type())) + "," +
             NonTensorTypeText(t.map_type().value_type()) + ")";
    default: return "?";
  }
}
}  // namespace

std::string DeclaredTypeText(const Graph& graph, const std::string& name) {
  auto it = graph.info().interface_types.find(name);
  onnx::TypeProto type;
  if (it != graph.info().interface_types.end() && type.ParseFromString(it->second)) {
    if (type.has_tensor_type()) return DeclaredShapeText(type);
    if (type.value_case() != onnx::TypeProto::VALUE_NOT_SET) return NonTensorTypeText(type);
  }
  ValueId v = graph.FindValue(name);
  return v == kNoValue ? "?" : ShapeToString(graph.value(v).type.shape);
}

ImportOptions SecondBinding(const Graph& imported, const ImportOptions& first, SecondBindingKind kind) {
  ImportOptions other = first;
  other.free_dim_value = first.free_dim_value == 2 ? 3 : 2;
  std::map<std::string, onnx::TypeProto> types;
  auto declared = [&](const std::string& name, int axis, std::string* dim_name) {
    auto [t, fresh] = types.emplace(name, onnx::TypeProto());
    auto it = imported.info().interface_types.find(name);
    if (fresh && it != imported.info().interface_types.end()) t->second.ParseFromString(it->second);
    const onnx::TypeProto& type = t->second;
    if (auto fixed = imported.info().fixed_axes.find(name); fixed != imported.info().fixed_axes.end())
      if (std::count(fixed->second.begin(), fixed->second.end(), axis) > 0) return false;
    if (!type.has_tensor_type() || !type.tensor_type().has_shape() ||
        type.tensor_type().shape().dim_size() != static_cast<int>(first.input_shapes.at(name).size()))
      return true;
    const auto& d = type.tensor_type().shape().dim(axis);
    *dim_name = d.dim_param();
    return !d.has_dim_value();
  };
  if (kind == SecondBindingKind::kMoved) {
    other.input_shapes = MoveGivenDims(first.input_shapes, declared);
    return other;
  }
  for (auto& [name, shape] : other.input_shapes)
    for (size_t k = 0; k < shape.size(); ++k) {
      std::string dim_name;
      if (!declared(name, static_cast<int>(k), &dim_name)) continue;
      shape[k] = kind == SecondBindingKind::kSmaller ? SmallerBindingOf(shape[k]) : shape[k] > 0 ? 2 * shape[k] : 2;
    }
  return other;
}

ImportOptions GivenSecondBinding(const Graph& imported, const ImportOptions& first,
                                 const std::map<std::string, std::vector<int64_t>>& given) {
  ImportOptions other = first;
  // The declared dimension names of an input's shape of `rank` ("" where a
  // dimension has none; empty where the input declares no such shape).
  auto names = [&](const std::string& input, size_t rank) {
    std::vector<std::string> out;
    auto it = imported.info().interface_types.find(input);
    if (it == imported.info().interface_types.end()) return out;
    onnx::TypeProto type;
    type.ParseFromString(it->second);
    if (!type.has_tensor_type() || !type.tensor_type().has_shape() ||
        type.tensor_type().shape().dim_size() != static_cast<int>(rank))
      return out;
    for (const auto& d : type.tensor_type().shape().dim()) out.push_back(d.has_dim_value() ? "" : d.dim_param());
    return out;
  };
  std::map<std::string, int64_t> by_name;
  for (const auto& [input, shape] : given) {
    const std::vector<std::string> dims = names(input, shape.size());
    for (size_t k = 0; k < dims.size(); ++k)
      if (!dims[k].empty()) by_name.emplace(dims[k], shape[k]);
    other.input_shapes[input] = shape;
  }
  for (auto& [input, shape] : other.input_shapes) {
    if (given.count(input)) continue;
    const std::vector<std::string> dims = names(input, shape.size());
    for (size_t k = 0; k < dims.size(); ++k)
      if (auto it = by_name.find(dims[k]); !dims[k].empty() && it != by_name.end()) shape[k] = it->second;
  }
  return other;
}

std::vector<std::string> InputsWithSymbolicDims(const Graph& imported) {
  std::vector<std::string> out;
  for (ValueId in : imported.inputs()) {
    const std::string& name = imported.value(in).name;
    auto it = imported.info().interface_types.find(name);
    if (it == imported.info().interface_types.end()) continue;
    onnx::TypeProto type;
    type.ParseFromString(it->second);
    if (!type.has_tensor_type()) continue;
    const auto fixed = imported.info().fixed_axes.find(name);
    auto is_fixed = [&](int axis) {
      return fixed != imported.info().fixed_axes.end() &&
             std::count(fixed->second.begin(), fixed->second.end(), axis) > 0;
    };
    bool symbolic = false;
    if (!type.tensor_type().has_shape()) {
      for (int k = 0; k < static_cast<int>(imported.value(in).type.shape.size()) && !symbolic; ++k)
        symbolic = !is_fixed(k);
    } else {
      for (int k = 0; k < type.tensor_type().shape().dim_size() && !symbolic; ++k)
        symbolic = !type.tensor_type().shape().dim(k).has_dim_value() && !is_fixed(k);
    }
    if (symbolic) out.push_back(name);
  }
  return out;
}

int64_t SmallerBindingOf(int64_t value) {
  if (value >= 4) return value / 2;
  return value == 3 ? 2 : value == 2 ? 3 : 2;
}

int64_t OtherBindingOf(int64_t value) {
  if (value == 0) return 2;  // doubled it would stay 0: nothing would look dynamic
  return value >= 4 && value % 2 == 0 ? value / 2 : value * 2;
}

std::map<std::string, std::vector<int64_t>> ParseInputShapes(const std::string& spec, const std::string& flag) {
  std::map<std::string, std::vector<int64_t>> out;
  if (spec.empty()) return out;
  size_t start = 0;
  while (start <= spec.size()) {
    size_t end = spec.find(';', start);
    if (end == std::string::npos) end = spec.size();
    std::string item = spec.substr(start, end - start);
    start = end + 1;
    if (item.empty()) {
      if (end == spec.size()) break;
      Fail(flag, " has an empty item in '", spec, "' (expected NAME:D1,D2,...[;NAME2:...])");
    }
    // The last ':' separates the name: tf2onnx names tensors "input:0".
    size_t colon = item.rfind(':');
    if (colon == std::string::npos || colon == 0)
      Fail(flag, " item '", item, "' is not NAME:D1,D2,... (e.g. images:1,3,640,640)");
    std::string name = item.substr(0, colon), dims = item.substr(colon + 1);
    std::vector<int64_t> shape;
    size_t p = 0;
    while (p < dims.size()) {
      size_t q = dims.find(',', p);
      if (q == std::string::npos) q = dims.size();
      std::string d = dims.substr(p, q - p);
      p = q + 1;
      size_t used = 0;
      long long v = 0;
      try {
        v = std::stoll(d, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (d.empty() || used != d.size())
        Fail(flag, " for input '", name, "': '", d, "' is not a dimension (expected integers >= 0)");
      if (v < 0)
        Fail(flag, " for input '", name, "': dimension ", shape.size(), " is ", v, "; dimensions must be >= 0");
      shape.push_back(v);
      if (q == dims.size()) break;
      if (p == dims.size()) Fail(flag, " for input '", name, "' ends with ','");
    }
    if (!out.emplace(name, shape).second) Fail(flag, " gives input '", name, "' twice");
  }
  return out;
}

}  // namespace rlflow
