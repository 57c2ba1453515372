// The optimiser binary on bad input: each case must give a one-line error
// naming the problem, a non-zero exit code and no output file. Plus the happy
// path and the zoo fallback.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <signal.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <thread>

#include "core/file_util.h"
#include "core/onnx_io.h"
#include "core/onnx_proto_testing.h"
#include "core/rules/rule.h"
#include "core/subprocess.h"
#include "rules/testing.h"
#include "zoo/zoo.h"

namespace rlflow {
namespace {

// The optimiser's JSON report, parsed (a parse error fails the test).
nlohmann::json ReadReport(const std::string& path) { return nlohmann::json::parse(ReadFile(path)); }

struct RunResult {
  int exit_code = -1;
  std::string out, err;
};

std::string TempDir() {
  const char* t = std::getenv("TEST_TMPDIR");
  return t ? t : "/tmp";
}

RunResult RunOptimiser(const std::string& args) {
  std::string bin = std::string(std::getenv("TEST_SRCDIR")) + "/rlflow/optimiser/optimiser";
  ProgramIo io;
  io.out = TempDir() + "/stdout.txt";
  io.err = TempDir() + "/stderr.txt";
  std::vector<std::string> argv = testing::SplitArgs(args);
  argv.insert(argv.begin(), bin);
  RunResult r;
  r.exit_code = testing::WaitProcess(testing::StartProcess(argv, io));
  r.out = ReadFile(io.out);
  r.err = ReadFile(io.err);
  return r;
}

// Lines of stderr that are not glog INFO lines.
std::vector<std::string> ErrorLines(const std::string& err) {
  std::vector<std::string> lines;
  size_t pos = 0;
  while (pos < err.size()) {
    size_t end = err.find('\n', pos);
    std::string line = err.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    if (!line.empty() && line[0] != 'I' && line[0] != 'W') lines.push_back(line);
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  return lines;
}

void ExpectCleanFailure(const std::string& args, const std::string& output, const std::string& needle) {
  ::unlink(output.c_str());
  RunResult r = RunOptimiser(args + " --output=" + output);
  EXPECT_NE(r.exit_code, 0) << args;
  EXPECT_LT(r.exit_code, 128) << "crashed: " << r.err;
  std::vector<std::string> lines = ErrorLines(r.err);
  ASSERT_EQ(lines.size(), 1u) << "expected exactly one error line, stderr was:\n" << r.err;
  EXPECT_EQ(lines[0].rfind("error: ", 0), 0u) << lines[0];
  EXPECT_NE(lines[0].find(needle), std::string::npos) << "'" << needle << "' not in: " << lines[0];
  EXPECT_FALSE(FileExists(output)) << "output written despite the error";
  EXPECT_FALSE(FileExists(output + ".data")) << "external data written despite the error";
  // No temp files left behind either.
  EXPECT_EQ(TemporaryFilesOf(output), std::vector<std::string>{}) << "temp file left";
}

// ---- small hand-made ONNX models ----
onnx::ModelProto BaseModel(int opset = 13) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* imp = m.add_opset_import();
  imp->set_domain("");
  imp->set_version(opset);
  m.mutable_graph()->set_name("test");
  return m;
}

void AddValueInfo(onnx::ValueInfoProto* vi, const std::string& name, std::vector<int64_t> shape) {
  vi->set_name(name);
  auto* t = vi->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : shape) t->mutable_shape()->add_dim()->set_dim_value(d);
}

// Makes dimension `axis` of a declared type symbolic, named `param`.
void SetDimParam(onnx::ValueInfoProto* vi, int axis, const std::string& param) {
  vi->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(axis)->set_dim_param(param);
}

onnx::NodeProto* AddNode(onnx::ModelProto& m, const std::string& op, std::vector<std::string> in,
                         std::vector<std::string> out, const std::string& name) {
  auto* n = m.mutable_graph()->add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (auto& s : in) n->add_input(s);
  for (auto& s : out) n->add_output(s);
  return n;
}

using testing::IntAttr;
using testing::IntsAttr;

std::string Save(const onnx::ModelProto& m, const std::string& name) {
  std::string path = TempDir() + "/" + name;
  std::ofstream(path, std::ios::binary) << m.SerializeAsString();
  return path;
}

class OptimiserCli : public ::testing::Test {
 protected:
  std::string out_ = TempDir() + "/out.onnx";
};

TEST_F(OptimiserCli, MissingFile) {
  ExpectCleanFailure("--model=" + TempDir() + "/no_such_model.onnx", out_, "no_such_model.onnx");
}

TEST_F(OptimiserCli, EmptyFile) {
  std::string path = TempDir() + "/empty.onnx";
  std::ofstream(path).close();
  ExpectCleanFailure("--model=" + path, out_, "is empty");
}

TEST_F(OptimiserCli, RandomBytes) {
  std::mt19937 rng(42);
  std::string bytes(4096, '\0');
  for (char& c : bytes) c = static_cast<char>(rng());
  std::string path = TempDir() + "/random.onnx";
  std::ofstream(path, std::ios::binary) << bytes;
  ExpectCleanFailure("--model=" + path, out_, "random.onnx");
}

TEST_F(OptimiserCli, TruncatedProtobuf) {
  std::string bytes = ExportOnnxBytes(zoo::Build("squeezenet1_1", 1));
  std::string path = TempDir() + "/truncated.onnx";
  std::ofstream(path, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  ExpectCleanFailure("--model=" + path, out_, "not a valid ONNX protobuf");
}

TEST_F(OptimiserCli, UndefinedTensor) {
  onnx::ModelProto m = BaseModel();
  AddValueInfo(m.mutable_graph()->add_input(), "x", {1, 4});
  AddNode(m, "Add", {"x", "ghost"}, {"y"}, "add0");
  AddValueInfo(m.mutable_graph()->add_output(), "y", {1, 4});
  ExpectCleanFailure("--model=" + Save(m, "undefined.onnx"), out_, "reads tensor 'ghost'");
}

TEST_F(OptimiserCli, Cycle) {
  onnx::ModelProto m = BaseModel();
  AddValueInfo(m.mutable_graph()->add_input(), "x", {1, 4});
  AddNode(m, "Add", {"x", "b"}, {"a"}, "first");
  AddNode(m, "Relu", {"a"}, {"b"}, "second");
  AddValueInfo(m.mutable_graph()->add_output(), "a", {1, 4});
  ExpectCleanFailure("--model=" + Save(m, "cycle.onnx"), out_, "cycle");
}

TEST_F(OptimiserCli, MismatchedShapes) {
  onnx::ModelProto m = BaseModel();
  AddValueInfo(m.mutable_graph()->add_input(), "x", {1, 3});
  AddValueInfo(m.mutable_graph()->add_input(), "z", {1, 4});
  AddNode(m, "Add", {"x", "z"}, {"y"}, "add0");
  AddValueInfo(m.mutable_graph()->add_output(), "y", {1, 4});
  ExpectCleanFailure("--model=" + Save(m, "mismatch.onnx"), out_, "cannot broadcast shapes [1,3] and [1,4]");
}

TEST_F(OptimiserCli, MissingInitializer) {
  onnx::ModelProto m = BaseModel();
  AddValueInfo(m.mutable_graph()->add_input(), "x", {1, 3, 8, 8});
  AddNode(m, "Conv", {"x", "conv.weight"}, {"y"}, "conv0");
  AddValueInfo(m.mutable_graph()->add_output(), "y", {1, 4, 6, 6});
  ExpectCleanFailure("--model=" + Save(m, "noinit.onnx"), out_, "reads tensor 'conv.weight'");
}

TEST_F(OptimiserCli, UnsupportedOpset) {
  for (int opset : {0, 27}) {
    onnx::ModelProto m = BaseModel(opset);
    AddValueInfo(m.mutable_graph()->add_input(), "x", {1, 4});
    AddNode(m, "Relu", {"x"}, {"y"}, "relu0");
    AddValueInfo(m.mutable_graph()->add_output(), "y", {1, 4});
    ExpectCleanFailure("--model=" + Save(m, "opset" + std::to_string(opset) + ".onnx"), out_,
                       "unsupported opset " + std::to_string(opset) + " (supported: 1 to 26)");
  }
}

// Opsets 1 to 6 go through ONNX's version converter to 7 (Add's legacy
// broadcast attribute here), then rlflow's upgrade to 11; unchanged, the
// model is written back as it came.
TEST_F(OptimiserCli, OpsetBelow7IsConverted) {
  onnx::ModelProto m = BaseModel(6);
  AddValueInfo(m.mutable_graph()->add_input(), "x", {2, 4});
  AddValueInfo(m.mutable_graph()->add_input(), "b", {4});
  auto* add = AddNode(m, "Add", {"x", "b"}, {"s"}, "add0");
  auto* bc = add->add_attribute();
  bc->set_name("broadcast");
  bc->set_type(onnx::AttributeProto::INT);
  bc->set_i(1);
  AddNode(m, "Relu", {"s"}, {"y"}, "relu0");
  AddValueInfo(m.mutable_graph()->add_output(), "y", {2, 4});
  std::string in = Save(m, "opset6.onnx"), out = TempDir() + "/opset6_out.onnx";
  RunResult r = RunOptimiser("--model=" + in + " --output=" + out + " --search=none");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE((r.out + r.err).find("converted opset 6 to 7"), std::string::npos) << r.out << r.err;
  EXPECT_EQ(ReadFile(out), ReadFile(in));
}

// Weights in an external data file: read from the model's directory, written
// beside the output; a missing or truncated data file is a one-line error.
TEST_F(OptimiserCli, ExternalData) {
  std::string dir = TempDir() + "/external";
  ::mkdir(dir.c_str(), 0755);
  onnx::ModelProto m = BaseModel();
  AddValueInfo(m.mutable_graph()->add_input(), "x", {2, 4});
  auto* w = m.mutable_graph()->add_initializer();
  w->set_name("W");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(4);
  w->add_dims(300);
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* location = w->add_external_data();
  location->set_key("location");
  location->set_value("w.bin");
  AddNode(m, "MatMul", {"x", "W"}, {"m"}, "mm");
  AddNode(m, "Relu", {"m"}, {"y"}, "relu");
  AddValueInfo(m.mutable_graph()->add_output(), "y", {2, 300});
  std::string model = dir + "/model.onnx";
  std::ofstream(model, std::ios::binary) << m.SerializeAsString();
  std::string weights(4 * 300 * 4, '\0');
  for (size_t k = 0; k < weights.size() / 4; ++k) {
    float v = 0.001f * static_cast<float>(k) - 0.5f;
    std::memcpy(&weights[4 * k], &v, 4);
  }
  ::unlink((dir + "/w.bin").c_str());
  ExpectCleanFailure("--model=" + model + " --search=none", out_, "w.bin");
  std::ofstream(dir + "/w.bin", std::ios::binary) << weights.substr(0, 1000);
  ExpectCleanFailure("--model=" + model + " --search=none", out_, "truncated file");
  std::ofstream(dir + "/w.bin", std::ios::binary) << weights;
  ::unlink(out_.c_str());
  RunResult r = RunOptimiser("--model=" + model + " --search=none --output=" + out_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(FileExists(out_ + ".data")) << r.err;
  EXPECT_NE(r.err.find("external data"), std::string::npos) << r.err;
  Graph written = ImportOnnxFile(out_);
  EXPECT_TRUE(written.info().external_data);
  EXPECT_EQ(written.value(written.FindValue("W")).initializer->bytes(), weights);
  ::unlink((out_ + ".data").c_str());
}

// Integer inputs that are shapes, axes or counts (ONNX's node tests, whose
// expected outputs ONNX wrote): without --input_data they are filled so that
// the node produces the shape the model declares (random values made these
// valid models fail), and the report says how; with it, the given values
// are used, and the check runs on them.
TEST_F(OptimiserCli, InputDataAndShapeInputsFilledConsistently) {
  const std::string root = "/usr/share/libonnx-testdata/data/node/";
  const std::string report = TempDir() + "/fill_report.json";
  const std::vector<std::pair<std::string, std::string>> cases = {{"test_reshape_extended_dims", "Reshape"},
                                                                  {"test_slice", "Slice"},
                                                                  {"test_unsqueeze_axis_0", "Unsqueeze"},
                                                                  {"test_top_k", "TopK"},
                                                                  {"test_expand_dim_changed", "Expand"},
                                                                  {"test_range_int32_type_negative_delta", "Range"},
                                                                  {"test_tile", "Tile"}};
  for (const auto& [name, op] : cases) {
    SCOPED_TRACE(name);
    ::unlink(report.c_str());
    RunResult r =
        RunOptimiser("--model=" + root + name + "/model.onnx --search=none --output=" + out_ + " --report=" + report);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    nlohmann::json j = ReadReport(report);
    bool named = false;
    for (const auto& in : j["inputs"])
      named = named || in["filled"].get<std::string>().find(op + " '") != std::string::npos;
    EXPECT_TRUE(named) << j["inputs"];
  }
  // The test's own data for both inputs: used, and the report says so.
  const std::string dir = root + "test_reshape_extended_dims/test_data_set_0/";
  ::unlink(report.c_str());
  RunResult r =
      RunOptimiser("--model=" + root + "test_reshape_extended_dims/model.onnx --search=none --output=" + out_ +
                   " --report=" + report + " --input_data='data:" + dir + "input_0.pb;shape:" + dir + "input_1.pb'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = ReadReport(report);
  for (const auto& in : j["inputs"]) EXPECT_EQ(in["filled"], "given (--input_data)") << in;
  // Bad data: a file of another shape, a name that is not an input, a
  // missing file: one-line errors, nothing written.
  const std::string model = "--model=" + root + "test_reshape_extended_dims/model.onnx --search=none";
  ExpectCleanFailure(model + " --input_data=shape:" + dir + "input_0.pb", out_, "input 'shape'");
  ExpectCleanFailure(model + " --input_data=nope:" + dir + "input_0.pb", out_, "'nope', which is not a graph input");
  ExpectCleanFailure(model + " --input_data=shape:" + TempDir() + "/missing.npy", out_, "missing.npy");
  ExpectCleanFailure(model + " --input_data=shape", out_, "is not NAME:FILE");
  // A .npy file (as numpy.save writes it): int64 [4] = (2, 3, 2, 2), the
  // shape the model declares for its output.
  std::string npy = std::string("\x93NUMPY\x01\x00", 8);
  std::string header = "{'descr': '<i8', 'fortran_order': False, 'shape': (4,), }";
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  npy += static_cast<char>(header.size());
  npy += '\0';
  npy += header;
  for (int64_t v : {2, 3, 2, 2}) npy.append(reinterpret_cast<const char*>(&v), 8);
  std::ofstream(TempDir() + "/shape.npy", std::ios::binary) << npy;
  ::unlink(report.c_str());
  r = RunOptimiser(model + " --output=" + out_ + " --report=" + report + " --input_data=shape:" + TempDir() +
                   "/shape.npy");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  j = ReadReport(report);
  EXPECT_EQ(j["inputs"][1]["name"], "shape");
  EXPECT_EQ(j["inputs"][1]["filled"], "given (--input_data)");
}

// A dimension name given in one input binds it in every input: the summary
// and the report say that an input not named in --input_shape was bound
// there (it said "--free_dim"), and one whose names are not given is still
// --free_dim's.
TEST_F(OptimiserCli, InputShapesBindDimensionNamesInOtherInputs) {
  onnx::ModelProto m = BaseModel();
  for (const char* name : {"a", "b", "c"}) {
    auto* vi = m.mutable_graph()->add_input();
    AddValueInfo(vi, name, {1, 4});
    SetDimParam(vi, 0, std::string(name) == "c" ? "M" : "N");
  }
  AddNode(m, "Add", {"a", "b"}, {"s"}, "add0");
  AddNode(m, "Add", {"s", "c"}, {"y"}, "add1");
  AddValueInfo(m.mutable_graph()->add_output(), "y", {1, 4});
  SetDimParam(m.mutable_graph()->mutable_output(0), 0, "N");
  std::string model = Save(m, "shared_dim_names.onnx");
  std::string report = TempDir() + "/shared_dim_names.json";
  RunResult r = RunOptimiser("--model=" + model + " --output=" + out_ + " --report=" + report +
                             " --search=none --timing_cache=none --input_shape='a:3,4'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("input:      a [N,4] run at [3,4] (--input_shape)\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("input:      b [N,4] run at [3,4] (--input_shape: its dimensions' names are bound there)\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("input:      c [M,4] run at [1,4] (--free_dim)\n"), std::string::npos) << r.out;
  nlohmann::json j = ReadReport(report);
  ASSERT_EQ(j["inputs"].size(), 3u);
  EXPECT_EQ(j["inputs"][1]["bound_by"], "input_shape_dim_names");
  EXPECT_EQ(j["inputs"][2]["bound_by"], "free_dim");
}

// A model given its largest size (a position table of 77 rows sliced to
// the length, as CLIP's text encoder, given 77 tokens): the optimised model
// is checked at a smaller length, 38, where 154 (77 doubled) does not run,
// and written (it was put back for the original: "not right at other
// values of the symbolic dimensions").
TEST_F(OptimiserCli, AModelGivenItsLargestSizeIsCheckedAtASmallerOne) {
  onnx::ModelProto m = BaseModel();
  AddValueInfo(m.mutable_graph()->add_input(), "x", {1, 1, 64});
  SetDimParam(m.mutable_graph()->mutable_input(0), 1, "L");
  auto add_float = [&](const std::string& name, std::vector<int64_t> dims) {
    auto* t = m.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    int64_t n = 1;
    for (int64_t d : dims) t->add_dims(d), n *= d;
    for (int64_t k = 0; k < n; ++k) t->add_float_data(0.01f * static_cast<float>((k * 7) % 13) - 0.06f);
  };
  auto add_int64 = [&](const std::string& name, int64_t v) {
    auto* t = m.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(1);
    t->add_int64_data(v);
  };
  add_float("table", {77, 64});
  add_float("w1", {64, 64});
  add_float("w2", {64, 64});
  add_int64("zero", 0);
  add_int64("one", 1);
  add_int64("two", 2);
  AddNode(m, "Shape", {"x"}, {"s"}, "shape");
  AddNode(m, "Slice", {"s", "one", "two"}, {"len"}, "len");
  AddNode(m, "Slice", {"table", "zero", "len", "zero"}, {"pos"}, "pos");
  AddNode(m, "Add", {"x", "pos"}, {"a"}, "add");
  AddNode(m, "MatMul", {"a", "w1"}, {"m1"}, "mm1");
  AddNode(m, "MatMul", {"m1", "w2"}, {"m2"}, "mm2");
  AddNode(m, "Relu", {"m2"}, {"y"}, "relu");
  AddValueInfo(m.mutable_graph()->add_output(), "y", {1, 1, 64});
  SetDimParam(m.mutable_graph()->mutable_output(0), 1, "L");
  std::string model = Save(m, "position_table.onnx");
  ::unlink(out_.c_str());
  RunResult r = RunOptimiser("--model=" + model + " --output=" + out_ +
                             " --timing_cache=none --force_optimised --input_shape='x:1,77,64'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("also checked with symbolic dimensions bound to free dimensions=2, x:[1,38,64]"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("(the ORIGINAL model"), std::string::npos) << r.out;
  onnx::ModelProto written;
  ASSERT_TRUE(written.ParseFromString(ReadFile(out_)));
  int matmuls = 0;
  for (const auto& n : written.graph().node()) matmuls += n.op_type() == "MatMul";
  EXPECT_EQ(matmuls, 1) << "the two projections are one (w1 w2 folded)";
}

// --input_shape binds the symbolic dimensions the search, the check and the
// verdict run at; the report records them, the written model keeps them
// symbolic; bad values are one-line errors naming the input.
TEST_F(OptimiserCli, InputShapes) {
  onnx::ModelProto m = BaseModel();
  AddValueInfo(m.mutable_graph()->add_input(), "x", {1, 3, 1, 1});
  auto* dims = m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
  dims->mutable_dim(0)->set_dim_param("N");
  dims->mutable_dim(2)->set_dim_param("H");
  dims->mutable_dim(3)->set_dim_param("W");
  auto* w = m.mutable_graph()->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : {4, 3, 3, 3}) w->add_dims(d);
  for (int k = 0; k < 108; ++k) w->add_float_data(0.01f * static_cast<float>(k % 7));
  IntsAttr(AddNode(m, "Conv", {"x", "w"}, {"c"}, "conv0"), "pads", {1, 1, 1, 1});
  AddNode(m, "Relu", {"c"}, {"y"}, "relu0");
  AddValueInfo(m.mutable_graph()->add_output(), "y", {1, 4, 1, 1});
  auto* out_dims = m.mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
  out_dims->mutable_dim(0)->set_dim_param("N");
  out_dims->mutable_dim(2)->set_dim_param("H");
  out_dims->mutable_dim(3)->set_dim_param("W");
  std::string model = Save(m, "dynamic_hw.onnx");
  std::string report = TempDir() + "/shapes_report.json";
  ::unlink(out_.c_str());
  RunResult r = RunOptimiser("--model=" + model + " --output=" + out_ + " --report=" + report +
                             " --search=none --timing_cache=none --input_shape='x:2,3,40,24'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("input:      x [N,3,H,W] run at [2,3,40,24] (--input_shape)"), std::string::npos) << r.out;
  const std::string degenerate =
      "optimised with --free_dim=1 for symbolic dimensions: input 'x' [N,3,H,W] at [1,3,1,1]";
  EXPECT_EQ(r.err.find(degenerate), std::string::npos) << r.err;
  {
    // Without it, a warning says that a 1 x 1 image is what is optimised.
    RunResult free = RunOptimiser("--model=" + model + " --output=" + out_ + " --search=none --timing_cache=none");
    ASSERT_EQ(free.exit_code, 0) << free.err;
    EXPECT_NE(free.err.find(degenerate), std::string::npos) << free.err;
    EXPECT_NE(free.err.find("give that with --input_shape=x:D1,D2,...[;...]"), std::string::npos) << free.err;
  }
  nlohmann::json j = ReadReport(report);
  ASSERT_EQ(j["inputs"].size(), 1u);
  EXPECT_EQ(j["inputs"][0]["used"], nlohmann::json({2, 3, 40, 24}));
  EXPECT_EQ(j["inputs"][0]["declared"], "[N,3,H,W]");
  EXPECT_EQ(j["inputs"][0]["bound_by"], "input_shape");
  // The FLOPs are those of the given shape (2 x 40 x 24 pixels of 4 x 27
  // multiply-adds: over 2 x 10^5), not of the 1 x 1 image --free_dim gives.
  EXPECT_GT(j["before"]["flops"].get<double>(), 2e5) << j["before"];
  onnx::ModelProto written;
  ASSERT_TRUE(written.ParseFromString(ReadFile(out_)));
  EXPECT_EQ(written.graph().input(0).type().tensor_type().shape().dim(2).dim_param(), "H");
  // A batch of 0 is a shape the model runs at, but nothing is computed:
  // said, not refused.
  r = RunOptimiser("--model=" + model + " --output=" + out_ +
                   " --search=none --timing_cache=none --input_shape='x:0,3,8,8'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("every graph output is empty at the shapes the model is optimised at"), std::string::npos)
      << r.err;

  ExpectCleanFailure("--model=" + model + " --input_shape=y:1,4,5,5", out_, "'y', which is not a graph input");
  ExpectCleanFailure("--model=" + model + " --input_shape=x:1,3,5", out_, "input 'x' gives 3 dimensions");
  ExpectCleanFailure("--model=" + model + " --input_shape=x:1,2,5,5", out_, "dimension 1 is fixed at 3");
  ExpectCleanFailure("--model=" + model + " --input_shape=x", out_, "--input_shape item 'x' is not NAME:D1,D2");
  ExpectCleanFailure("--model=" + model + " --input_shape=x:1,3,-7,5", out_,
                     "dimension 2 is -7; dimensions must be >= 0");
  // --second_input_shape: the same checks, its own name in the message,
  // before any long work; and no second binding that binds nothing else.
  const std::string at8 = "--model=" + model + " --input_shape=x:1,3,8,8";
  ExpectCleanFailure(at8 + " --second_input_shape=y:1,4,5,5", out_,
                     "--second_input_shape names 'y', which is not a graph input");
  ExpectCleanFailure(at8 + " --second_input_shape=x:2,3,5", out_,
                     "--second_input_shape for input 'x' gives 3 dimensions");
  ExpectCleanFailure(at8 + " --second_input_shape=x:2,2,5,5", out_,
                     "--second_input_shape for input 'x': dimension 1 is fixed at 3");
  ExpectCleanFailure(at8 + " --second_input_shape=x", out_, "--second_input_shape item 'x' is not NAME:D1,D2");
  ExpectCleanFailure(at8 + " --second_input_shape=x:1,3,8,8", out_,
                     "--second_input_shape binds every input as the model is optimised at");
}

// A detector of any resolution ([N, 3, H, W]: features pooled, upsampled
// and concatenated with the input) does not fit the 1 x 1 image --free_dim
// gives: without --input_shape it is optimised at 224 x 224 (the batch at
// 1), said in the summary, the log and the report, and the written model
// keeps its symbolic dimensions.
TEST_F(OptimiserCli, ADetectorThatDoesNotFitTheFreeBindingIsFitted) {
  onnx::ModelProto m = BaseModel();
  AddValueInfo(m.mutable_graph()->add_input(), "x", {1, 3, 1, 1});
  AddValueInfo(m.mutable_graph()->add_output(), "y", {1, 6, 1, 1});
  for (auto* vi : {m.mutable_graph()->mutable_input(0), m.mutable_graph()->mutable_output(0)}) {
    auto* dims = vi->mutable_type()->mutable_tensor_type()->mutable_shape();
    dims->mutable_dim(0)->set_dim_param("N");
    dims->mutable_dim(2)->set_dim_param("H");
    dims->mutable_dim(3)->set_dim_param("W");
  }
  auto* pool = AddNode(m, "MaxPool", {"x"}, {"p"}, "pool");
  IntsAttr(pool, "kernel_shape", {2, 2});
  IntsAttr(pool, "strides", {2, 2});
  IntsAttr(pool, "pads", {0, 0, 1, 1});
  auto* w = m.mutable_graph()->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : {3, 3, 2, 2}) w->add_dims(d);
  for (int k = 0; k < 36; ++k) w->add_float_data(0.05f * static_cast<float>(k % 5));
  IntsAttr(AddNode(m, "ConvTranspose", {"p", "w"}, {"u"}, "up"), "strides", {2, 2});
  IntAttr(AddNode(m, "Concat", {"u", "x"}, {"c"}, "cat"), "axis", 1);
  AddNode(m, "Relu", {"c"}, {"y"}, "relu");
  std::string model = Save(m, "detector.onnx");
  std::string report = TempDir() + "/fitted_report.json";
  ::unlink(out_.c_str());
  RunResult r = RunOptimiser("--model=" + model + " --output=" + out_ + " --report=" + report +
                             " --search=none --timing_cache=none");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("input:      x [N,3,H,W] run at [1,3,224,224] (fitted"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("does not fit at the shapes its symbolic input dimensions were bound to (node 'cat' (Concat)"),
            std::string::npos)
      << r.err;
  nlohmann::json j = ReadReport(report);
  ASSERT_EQ(j["inputs"].size(), 1u);
  EXPECT_EQ(j["inputs"][0]["used"], nlohmann::json({1, 3, 224, 224}));
  EXPECT_EQ(j["inputs"][0]["bound_by"], "fitted");
  onnx::ModelProto written;
  ASSERT_TRUE(written.ParseFromString(ReadFile(out_)));
  EXPECT_EQ(written.graph().input(0).type().tensor_type().shape().dim(2).dim_param(), "H");
  // Given shapes are never overridden: at an odd size it does not fit, and
  // that is the error, naming the input.
  ExpectCleanFailure("--model=" + model + " --input_shape=x:1,3,7,7", out_, "node 'cat' (Concat)");
  ExpectCleanFailure("--model=" + model + " --input_shape=x:1,3,7,7", out_,
                     "(at the input shapes given: 'x' [1,3,7,7]; the model does not run at them)");
}

// Nodes out of topological order (the ONNX spec forbids it) are sorted, and
// the written model is the sorted one even when nothing else changes: never
// the invalid original. So with node names used twice in a graph, which
// ONNX Runtime refuses: renamed.
TEST_F(OptimiserCli, NodesOutOfOrderOrNamedTwiceAreWrittenRepaired) {
  onnx::ModelProto m = BaseModel();
  AddValueInfo(m.mutable_graph()->add_input(), "x", {1, 4});
  AddNode(m, "Relu", {"a"}, {"y"}, "second");
  AddNode(m, "Neg", {"x"}, {"a"}, "first");
  AddValueInfo(m.mutable_graph()->add_output(), "y", {1, 4});
  std::string model = Save(m, "unsorted.onnx");
  ::unlink(out_.c_str());
  RunResult r = RunOptimiser("--model=" + model + " --output=" + out_ + " --search=none --timing_cache=none");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("not in topological order"), std::string::npos) << r.err;
  onnx::ModelProto written;
  ASSERT_TRUE(written.ParseFromString(ReadFile(out_)));
  ASSERT_EQ(written.graph().node_size(), 2);
  EXPECT_EQ(written.graph().node(0).op_type(), "Neg");
  EXPECT_EQ(written.graph().node(1).op_type(), "Relu");

  onnx::ModelProto named = BaseModel();
  AddValueInfo(named.mutable_graph()->add_input(), "x", {1, 4});
  AddNode(named, "Neg", {"x"}, {"a"}, "same");
  AddNode(named, "Relu", {"a"}, {"b"}, "same");
  AddNode(named, "Neg", {"b"}, {"y"}, "same_2");
  AddValueInfo(named.mutable_graph()->add_output(), "y", {1, 4});
  model = Save(named, "named_twice.onnx");
  ::unlink(out_.c_str());
  r = RunOptimiser("--model=" + model + " --output=" + out_ + " --search=none --timing_cache=none");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("1 node has the name of another node of its graph ('same'), which ONNX Runtime refuses"),
            std::string::npos)
      << r.err;
  ASSERT_TRUE(written.ParseFromString(ReadFile(out_)));
  ASSERT_EQ(written.graph().node_size(), 3);
  EXPECT_EQ(written.graph().node(0).name(), "same");
  EXPECT_EQ(written.graph().node(1).name(), "same_3");  // same_2 is taken
  EXPECT_EQ(written.graph().node(2).name(), "same_2");
}

TEST_F(OptimiserCli, OutputInMissingDirectory) {
  std::string model = TempDir() + "/ok.onnx";
  WriteOnnxFile(zoo::Build("squeezenet1_1", 1), model);
  ExpectCleanFailure("--model=" + model, TempDir() + "/missing_dir/out.onnx", "does not exist");
}

TEST_F(OptimiserCli, UnknownOpIsOptimisedAround) {
  // Modelled or not, nothing is dropped: the op is kept opaque and exported
  // unchanged; the numeric check compares the graph around it.
  onnx::ModelProto m = BaseModel();
  auto* imp = m.add_opset_import();
  imp->set_domain("com.example");
  imp->set_version(1);
  AddValueInfo(m.mutable_graph()->add_input(), "x", {1, 4});
  AddNode(m, "Relu", {"x"}, {"r"}, "relu0");
  auto* n = AddNode(m, "FancyOp", {"r"}, {"f"}, "fancy0");
  n->set_domain("com.example");
  AddValueInfo(m.mutable_graph()->add_value_info(), "f", {1, 4});
  AddNode(m, "Relu", {"f"}, {"y"}, "relu1");
  AddValueInfo(m.mutable_graph()->add_output(), "y", {1, 4});
  std::string model = Save(m, "unknown_op.onnx");
  ::unlink(out_.c_str());
  RunResult r = RunOptimiser("--model=" + model + " --output=" + out_ + " --search=greedy --timing_cache=none");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("around 1 opaque nodes"), std::string::npos) << r.out;
  Graph written = ImportOnnxFile(out_);
  int fancy = 0;
  for (NodeId id = 0; id < written.num_nodes(); ++id)
    fancy += written.node(id).opaque() && written.node(id).op == "FancyOp" && written.node(id).domain == "com.example";
  EXPECT_EQ(fancy, 1);

  // Without a known type for its output (ONNX Runtime cannot run it here
  // either) the Relu reading it cannot be run: it stays opaque too, the log
  // says why, and the model is written as it came (it was refused).
  onnx::ModelProto untyped = BaseModel();
  *untyped.add_opset_import() = *imp;
  AddValueInfo(untyped.mutable_graph()->add_input(), "x", {1, 4});
  AddNode(untyped, "FancyOp", {"x"}, {"f"}, "fancy0")->set_domain("com.example");
  AddNode(untyped, "Relu", {"f"}, {"y"}, "relu1");
  AddValueInfo(untyped.mutable_graph()->add_output(), "y", {1, 4});
  const std::string untyped_path = Save(untyped, "untyped_op.onnx");
  ::unlink(out_.c_str());
  r = RunOptimiser("--model=" + untyped_path + " --output=" + out_ + " --timing_cache=none");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("node 'relu1' (Relu) kept opaque: its input 'f' (an output of 'fancy0' "
                       "(com.example.FancyOp)) has no static type"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.out.find("2 nodes (2 opaque)"), std::string::npos) << r.out;
  EXPECT_EQ(ReadFile(out_), ReadFile(untyped_path));
}

// A model whose every node is opaque (here: a quantized unit between its
// QuantizeLinear and DequantizeLinear nodes) is written as it came, and the
// summary and report say that nothing was timed instead of dividing by zero.
TEST_F(OptimiserCli, EveryNodeOpaqueIsWrittenAsItCame) {
  onnx::ModelProto m = BaseModel(13);
  AddValueInfo(m.mutable_graph()->add_input(), "x", {1, 4});
  auto* scale = m.mutable_graph()->add_initializer();
  scale->set_name("scale");
  scale->set_data_type(onnx::TensorProto::FLOAT);
  scale->add_float_data(0.1f);
  AddNode(m, "QuantizeLinear", {"x", "scale"}, {"xq"}, "q0");
  AddNode(m, "DequantizeLinear", {"xq", "scale"}, {"xd"}, "dq0");
  AddNode(m, "Relu", {"xd"}, {"r"}, "relu0");
  AddNode(m, "QuantizeLinear", {"r", "scale"}, {"rq"}, "q1");
  AddNode(m, "DequantizeLinear", {"rq", "scale"}, {"y"}, "dq1");
  AddValueInfo(m.mutable_graph()->add_output(), "y", {1, 4});
  const std::string model = Save(m, "all_opaque.onnx");
  const std::string report = TempDir() + "/all_opaque.json";
  ::unlink(out_.c_str());
  RunResult r = RunOptimiser("--model=" + model + " --output=" + out_ + " --report=" + report + " --timing_cache=none");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("1 nodes in quantized units"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("measured:   nothing (every node is opaque"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("estimate:   none (every node is opaque"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("nan"), std::string::npos) << r.out;
  EXPECT_EQ(ReadFile(out_), ReadFile(model));
  nlohmann::json json = nlohmann::json::parse(ReadFile(report));
  EXPECT_EQ(json["estimated_speedup"].get<double>(), 1.0) << json;
  EXPECT_EQ(json["before"]["estimate_error"].get<double>(), 0.0) << json;
  EXPECT_EQ(json.dump().find("null"), std::string::npos) << "NaN in the report: " << json;
}

// Sequence values: the nodes that make and read them stay opaque, the rest
// is optimised and checked around them, and a sequence graph output keeps
// its declared type.
TEST_F(OptimiserCli, SequenceValuesAreOptimisedAround) {
  onnx::ModelProto m = BaseModel(13);
  AddValueInfo(m.mutable_graph()->add_input(), "x", {2, 6});
  AddNode(m, "Relu", {"x"}, {"r"}, "relu0");
  auto* split = AddNode(m, "SplitToSequence", {"r"}, {"parts"}, "split0");
  auto* axis = split->add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto::INT);
  axis->set_i(1);
  auto* concat = AddNode(m, "ConcatFromSequence", {"parts"}, {"c"}, "concat0");
  *concat->add_attribute() = *axis;
  concat->mutable_attribute(0)->set_i(0);
  AddNode(m, "Neg", {"c"}, {"n"}, "neg0");
  AddNode(m, "Neg", {"n"}, {"y"}, "neg1");
  AddValueInfo(m.mutable_graph()->add_output(), "y", {12, 1});
  auto* parts = m.mutable_graph()->add_output();
  parts->set_name("parts");
  parts->mutable_type()->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(
      onnx::TensorProto::FLOAT);
  std::string model = Save(m, "sequences.onnx");
  ::unlink(out_.c_str());
  RunResult r = RunOptimiser("--model=" + model + " --output=" + out_ + " --search=greedy --timing_cache=none");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("around 2 opaque nodes"), std::string::npos) << r.out;
  onnx::ModelProto written;
  ASSERT_TRUE(written.ParseFromString(ReadFile(out_)));
  ASSERT_EQ(written.graph().output_size(), 2);
  EXPECT_EQ(written.graph().output(1).name(), "parts");
  EXPECT_EQ(written.graph().output(1).type().SerializeAsString(), parts->type().SerializeAsString());
  std::set<std::string> ops;
  for (const auto& n : written.graph().node()) ops.insert(n.op_type());
  EXPECT_TRUE(ops.count("SplitToSequence") && ops.count("ConcatFromSequence"));
}

// A written rule that produces an operator newer than the model's opset
// (HardSwish, 14) is not used by default; with --target_opset=14 it is, and
// the model is written at opset 14. A --target_opset outside the model's
// opset and 17 is a one-line error.
TEST_F(OptimiserCli, TargetOpsetGatesNewerOperators) {
  onnx::ModelProto m = BaseModel(13);
  AddValueInfo(m.mutable_graph()->add_input(), "x", {1, 8, 16, 16});
  auto scalar = [&](const std::string& name, float v) {
    auto* t = m.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_float_data(v);
  };
  scalar("three", 3.0f);
  scalar("zero", 0.0f);
  scalar("six", 6.0f);
  AddNode(m, "Relu", {"x"}, {"r"}, "relu0");
  AddNode(m, "Add", {"r", "three"}, {"a"}, "add0");
  AddNode(m, "Clip", {"a", "zero", "six"}, {"c"}, "clip0");
  AddNode(m, "Mul", {"r", "c"}, {"p"}, "mul0");
  AddNode(m, "Div", {"p", "six"}, {"y"}, "div0");
  AddValueInfo(m.mutable_graph()->add_output(), "y", {1, 8, 16, 16});
  const std::string model = Save(m, "hardswish_formula.onnx");
  auto ops_and_opset = [&](const std::string& path, int64_t* opset) {
    onnx::ModelProto w;
    EXPECT_TRUE(w.ParseFromString(ReadFile(path)));
    for (const auto& imp : w.opset_import())
      if (imp.domain().empty()) *opset = imp.version();
    std::set<std::string> ops;
    for (const auto& n : w.graph().node()) ops.insert(n.op_type());
    return ops;
  };
  const std::string flags = " --search=greedy --timing_cache=none --force_optimised --output=" + out_;
  RunResult r = RunOptimiser("--model=" + model + flags);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("rules need an opset above 13"), std::string::npos) << r.err;
  int64_t opset = 0;
  EXPECT_FALSE(ops_and_opset(out_, &opset).count("HardSwish"));
  EXPECT_EQ(opset, 13);
  r = RunOptimiser("--model=" + model + flags + " --target_opset=14");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::set<std::string> ops = ops_and_opset(out_, &opset);
  EXPECT_TRUE(ops.count("HardSwish")) << r.out;
  EXPECT_FALSE(ops.count("Clip"));
  EXPECT_EQ(opset, 14);
  EXPECT_NE(r.out.find("written at opset 14"), std::string::npos) << r.out;
  ExpectCleanFailure("--model=" + model + " --target_opset=12", out_, "--target_opset=12 is outside 13");
  ExpectCleanFailure("--model=" + model + " --target_opset=18", out_, "--target_opset=18 is outside 13");
}

// A model from opsets 7 to 10 is written at 11 once it changes, so the
// rules of opset 11 (those with Conv, MaxPool, Gemm: 2384 of 3668) are its
// rules too: they had been left out as "newer than the model's opset 9".
// A --target_opset below 11 is a one-line error.
TEST_F(OptimiserCli, ModelsBelowOpset11UseTheRulesOfOpset11) {
  onnx::ModelProto m = BaseModel(9);
  AddValueInfo(m.mutable_graph()->add_input(), "x", {1, 3, 8, 8});
  auto* w = m.mutable_graph()->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : {4, 3, 3, 3}) w->add_dims(d);
  for (int k = 0; k < 4 * 3 * 3 * 3; ++k) w->add_float_data(0.01f * static_cast<float>(k % 7));
  AddNode(m, "Conv", {"x", "w"}, {"c"}, "conv0");
  AddNode(m, "Relu", {"c"}, {"y"}, "relu0");
  AddValueInfo(m.mutable_graph()->add_output(), "y", {1, 4, 6, 6});
  const std::string model = Save(m, "conv_opset9.onnx");
  const std::string report = out_ + ".json";
  RunResult r = RunOptimiser("--model=" + model + " --output=" + out_ + " --report=" + report +
                             " --search=greedy --timing_cache=none");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("rules need an opset above 11 (the written model's)"), std::string::npos) << r.err;
  const nlohmann::json j = ReadReport(report);
  const int newer = j["rules"]["not_used"]["newer_opset"].get<int>();
  EXPECT_GT(newer, 0);
  EXPECT_LT(newer, 1000) << "the rules with Conv (opset 11) are left out";
  ExpectCleanFailure("--model=" + model + " --target_opset=9", out_,
                     "--target_opset=9 is outside 11 (the lowest opset rlflow writes)");
}

// ONNX Runtime's contrib operators reach only models for ONNX Runtime: by
// default (--device=cpu: --target=onnx) the rules that produce them are left
// out and the written model has no com.microsoft node or opset import;
// --target=ort keeps them; an unknown --target is a one-line error.
TEST_F(OptimiserCli, ContribOperatorsOnlyForTargetOrt) {
  onnx::ModelProto m = BaseModel(17);
  AddValueInfo(m.mutable_graph()->add_input(), "a", {1, 8, 16});
  AddValueInfo(m.mutable_graph()->add_input(), "b", {1, 8, 16});
  for (const char* name : {"gamma", "beta"}) {
    auto* t = m.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_dims(16);
    for (int k = 0; k < 16; ++k) t->add_float_data(name[0] == 'g' ? 1.0f + 0.01f * k : 0.02f * k);
  }
  AddNode(m, "Add", {"a", "b"}, {"s"}, "add0");
  AddNode(m, "LayerNormalization", {"s", "gamma", "beta"}, {"y"}, "ln0");
  auto* eps = m.mutable_graph()->mutable_node(1)->add_attribute();
  eps->set_name("epsilon");
  eps->set_type(onnx::AttributeProto::FLOAT);
  eps->set_f(1e-5f);
  AddValueInfo(m.mutable_graph()->add_output(), "y", {1, 8, 16});
  const std::string model = Save(m, "add_layernorm.onnx");
  const std::string flags = " --search=greedy --timing_cache=none --force_optimised --output=" + out_;
  RunResult r = RunOptimiser("--model=" + model + flags);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("rules produce operators that --target=onnx does not run: not used"), std::string::npos)
      << r.err;
  onnx::ModelProto w;
  ASSERT_TRUE(w.ParseFromString(ReadFile(out_)));
  for (const auto& n : w.graph().node()) EXPECT_EQ(n.domain(), "") << n.op_type();
  for (const auto& imp : w.opset_import()) EXPECT_TRUE(imp.domain().empty()) << imp.domain();
  r = RunOptimiser("--model=" + model + flags + " --target=ort");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("does not run: not used"), std::string::npos) << r.err;
  ExpectCleanFailure("--model=" + model + " --target=tensorrt", out_, "--target: unknown target 'tensorrt'");
}

TEST_F(OptimiserCli, PathsAndFlagValues) {
  std::string model = TempDir() + "/ok3.onnx";
  WriteOnnxFile(zoo::Build("squeezenet1_1", 1), model);
  // A mistyped path is an error, not the zoo model of the same name.
  ExpectCleanFailure("--model=/typo/dir/squeezenet1_1.onnx", out_, "/typo/dir/squeezenet1_1.onnx");
  ExpectCleanFailure("--model=" + model + " --report=" + out_, out_, "--report and --output are the same file");
  ExpectCleanFailure("--model=" + model + " --dot=" + out_, out_, "--dot and --output are the same file");
  // Bad values and unknown flags: one error line each, not gflags' own text.
  ExpectCleanFailure("--model=" + model + " --budget=lots", out_, "invalid value 'lots' for --budget");
  ExpectCleanFailure("--model=" + model + " --alpha=", out_, "for --alpha");
  ExpectCleanFailure("--model=" + model + " --force_optimised=maybe", out_, "--force_optimised");
  ExpectCleanFailure("--model=" + model + " --no_such_flag=1", out_, "unknown flag --no_such_flag");
  ExpectCleanFailure("--model=" + model + " --seed=1.5", out_, "invalid value '1.5' for --seed");
}

TEST_F(OptimiserCli, BadFlags) {
  std::string model = TempDir() + "/ok2.onnx";
  WriteOnnxFile(zoo::Build("squeezenet1_1", 1), model);
  ExpectCleanFailure("--model=" + model + " --search=magic", out_, "unknown --search 'magic'");
  ExpectCleanFailure("--model=" + model + " --free_dim=0", out_, "--free_dim");
  ExpectCleanFailure("--model=" + model + " --second_input_shape=x:2,3,224,224", out_,
                     "--second_input_shape: the model's inputs have no symbolic dimensions");
  ExpectCleanFailure("", out_, "--model is required");
  ExpectCleanFailure("--model=" + model + " --budget=-1", out_, "--budget must be >= 0");
  ExpectCleanFailure("--model=" + model + " --alpha=0.9", out_, "--alpha must be >= 1");
  // A search's own settings: one it does not have is refused, naming the ones it has.
  ExpectCleanFailure("--model=" + model + " --episodes=3", out_,
                     "--search=taso has no setting 'episodes' (its settings: alpha)");
  ExpectCleanFailure("--model=" + model + " --search=greedy --search_param=alpha=2", out_,
                     "--search=greedy has no setting 'alpha' (it has none)");
  ExpectCleanFailure("--model=" + model + " --search=ppo --search_param='horizon=x'", out_,
                     "--horizon: 'x' is not an integer");
  ExpectCleanFailure("--model=" + model + " --search_param=alpha", out_, "is not NAME=VALUE");
  ExpectCleanFailure("--model=" + model + " --alpha=2 --search_param=alpha=3", out_, "are both given");
  ExpectCleanFailure("--model=" + model + " --time_limit=-2", out_, "--time_limit must be >= 0");
  ExpectCleanFailure("--model=" + model + " --measure_runs=-1", out_, "--measure_runs");
  ExpectCleanFailure("--model=" + model + " --device=tpu", out_, "unknown device 'tpu'");
  ExpectCleanFailure("--model=" + model + " --guard=trt", out_, "--guard must be auto, ort or none, got 'trt'");
  ExpectCleanFailure("--model=" + model + " --device=ort --guard=ort", out_, "--guard=ort with --device=ort");
  ExpectCleanFailure("--model=" + model + " --second_binding_verdict=always", out_,
                     "--second_binding_verdict must be auto, require, report or off, got 'always'");
  ExpectCleanFailure("--model=" + model + " --second_binding_search=sometimes", out_,
                     "--second_binding_search must be auto, on or off, got 'sometimes'");
  ExpectCleanFailure("--model=" + model + " --second_binding_slack=1.5", out_,
                     "--second_binding_slack must be in [0, 1), got 1.5");
  // Without a GPU (no driver device node), --device=cuda is a one-line
  // error naming why (where the toolkit is missing, an unknown device).
  if (!FileExists("/dev/nvidiactl")) ExpectCleanFailure("--model=" + model + " --device=cuda", out_, "--device=cuda");
  ExpectCleanFailure("--model=" + model + " --ort_level=basic", out_, "--ort_level does not apply to --device=cpu");
  ExpectCleanFailure("--model=" + model + " --device=ort --ort_level=max", out_,
                     "unknown graph optimisation level 'max'");
  ExpectCleanFailure("--model=" + model + " --report=" + TempDir() + "/no_dir/r.json", out_, "does not exist");
  std::string bad_cache = TempDir() + "/bad_cache.txt";
  std::ofstream(bad_cache) << "rlflow-timing-cache 1\nnot a number\tkey\n";
  ExpectCleanFailure("--model=" + model + " --timing_cache=" + bad_cache, out_, "line 2 is malformed");
  std::ofstream(bad_cache) << "something else\n";
  ExpectCleanFailure("--model=" + model + " --timing_cache=" + bad_cache, out_, "not an rlflow timing cache");
}

TEST_F(OptimiserCli, BadRuleDatabases) {
  std::string model = TempDir() + "/ok3.onnx";
  WriteOnnxFile(zoo::Build("squeezenet1_1", 1), model);
  ExpectCleanFailure("--model=" + model + " --rules=" + TempDir() + "/no_rules.pb", out_, "no_rules.pb");
  std::string good = ReadFile(std::string(std::getenv("TEST_SRCDIR")) + "/rlflow/rules/default.rules.pb");
  std::string truncated = TempDir() + "/truncated_rules.pb";
  std::ofstream(truncated, std::ios::binary) << good.substr(0, good.size() / 3);
  ExpectCleanFailure("--model=" + model + " --rules=" + truncated, out_, "corrupt or truncated");
  // A valid protobuf of another kind: an ONNX model is not a rule database.
  ExpectCleanFailure("--model=" + model + " --rules=" + model, out_, "rule database");
}

TEST_F(OptimiserCli, HappyPathAndZooFallback) {
  std::string model = TempDir() + "/good.onnx";
  WriteOnnxFile(zoo::Build("squeezenet1_1", 3), model);
  ::unlink(out_.c_str());
  RunResult r = RunOptimiser("--model=" + model + " --output=" + out_ + " --search=none --timing_cache=none");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(FileExists(out_));
  EXPECT_NE(r.out.find("Conv: 26"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no rewrite improved it"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rules:      "), std::string::npos) << r.out;
  Graph written = ImportOnnxFile(out_);
  EXPECT_EQ(written.StructuralHash(), ImportOnnxFile(model).StructuralHash());

  // A zoo name with no such file falls back to the built-in model, and says so.
  std::string zoo_out = TempDir() + "/zoo_out.onnx";
  r = RunOptimiser("--model=resnet18.onnx --search=none --timing_cache=none --output=" + zoo_out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("using the built-in zoo model 'resnet18'"), std::string::npos) << r.err;
  EXPECT_EQ(ImportOnnxFile(zoo_out).StructuralHash(), zoo::Build("resnet18", 1).StructuralHash());
}

// A search, its report and the timing cache: the second run times no operator.
TEST_F(OptimiserCli, HappyPathSearchReportAndTimingCache) {
  std::string model = TempDir() + "/small.onnx";
  WriteOnnxFile(zoo::Build("squeezenet1_1", 5), model);
  std::string report = TempDir() + "/report.json", cache = TempDir() + "/cache.txt";
  ::unlink(cache.c_str());
  std::string args = "--model=" + model + " --output=" + out_ + " --search=greedy --report=" + report +
                     " --timing_cache=" + cache + " --measure_runs=3";
  RunResult r = RunOptimiser(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(FileExists(out_));
  nlohmann::json json = ReadReport(report);
  EXPECT_EQ(json["search"]["strategy"], "greedy");
  EXPECT_GE(json["search"]["graphs_explored"].get<int>(), 1);
  for (const char* side : {"before", "after"}) {
    EXPECT_GT(json[side]["estimated_ms"].get<double>(), 0) << side;
    EXPECT_GT(json[side]["measured_ms"].get<double>(), 0) << side;
  }
  EXPECT_GT(json["speedup"].get<double>(), 0);
  EXPECT_TRUE(json["rules"]["applied"].is_object());
  EXPECT_GT(json["peak_memory_mb"].get<double>(), 0);
  EXPECT_LE(json["check"]["max_relative_error"].get<double>(), 1e-4);
  EXPECT_EQ(ReadFile(cache).rfind("rlflow-timing-cache 1\n", 0), 0u);
  EXPECT_EQ(r.out.find(" 0 ops timed"), std::string::npos) << r.out;  // first run measures
  EXPECT_NE(r.err.find("greedy"), std::string::npos);                 // progress / log lines
  auto sequence = [](const std::string& path) {
    return ReadReport(path)["rules"]["sequence"].get<std::vector<std::string>>();
  };
  std::vector<std::string> first = sequence(report);
  EXPECT_EQ(first.size(), json["rules"]["sequence"].size());
  r = RunOptimiser(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("(cpu, 0 ops timed"), std::string::npos) << r.out;  // all from the cache
  // Every timing the search used is cached (first measurement wins): runs
  // with the cache make the same rewrites as the run that filled it.
  std::vector<std::string> second = sequence(report);
  EXPECT_EQ(second, first);
  r = RunOptimiser(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(sequence(report), second);
  // The verdict: paired runs with an interval (3 pairs are too few for one).
  json = ReadReport(report);
  EXPECT_TRUE(json["verdict"]["outcome"].is_string()) << json;
  EXPECT_TRUE(json["verdict"]["wall"]["median"].is_number()) << json;
  EXPECT_TRUE(json["verdict"]["cpu_clock"].is_string()) << json;
  EXPECT_TRUE(json["cost_model"]["overhead_ms_per_node"].is_number()) << json;
  EXPECT_GE(json["cost_model"]["fixed_ms_per_run"].get<double>(), 0.0) << json;
  ASSERT_FALSE(json["cost_model"]["per_op"].empty()) << json;
  EXPECT_TRUE(json["cost_model"]["per_op"].begin().value()["context_factor"].is_number()) << json;
  // A changed graph is measured in 3 pairs, too few for an interval. (Whether
  // greedy changes this graph depends on the timings: on a loaded machine
  // every gain can be within noise and the graph stays unchanged.)
  if (!json["unchanged"].get<bool>()) {
    EXPECT_NE(r.err.find("too few pairs for a 95% interval"), std::string::npos) << r.err;
  }
}

// --device=ort: the cost model and the verdict measured in ONNX Runtime.
TEST_F(OptimiserCli, OnnxRuntimeDevice) {
  std::string model = TempDir() + "/ort.onnx";
  WriteOnnxFile(zoo::Build("squeezenet1_1", 7), model);
  std::string report = TempDir() + "/ort_report.json", cache = TempDir() + "/ort_cache.txt";
  ::unlink(cache.c_str());
  RunResult r =
      RunOptimiser("--model=" + model + " --output=" + out_ + " --search=greedy --device=ort --report=" + report +
                   " --timing_cache=" + cache + " --measure_runs=8");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(FileExists(out_));
  EXPECT_NE(r.out.find("(ort, "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("measured:   "), std::string::npos) << r.out;
  nlohmann::json json = ReadReport(report);
  EXPECT_EQ(json["device"], "ort") << json;
  // A changed graph is judged from paired runs in the Node.js process's CPU time.
  if (r.out.find("interleaved pairs") != std::string::npos) {
    EXPECT_NE(r.out.find("process CPU"), std::string::npos) << r.out;
    EXPECT_EQ(json["verdict"]["cpu_clock"], "process") << json;
  }
  // Timings are cached under ORT's conditions (version, threads, level).
  EXPECT_NE(ReadFile(cache).find("\tort"), std::string::npos);
}

// Runs the optimiser with `flags`, its output in `io`, and interrupts it
// once (SIGINT) `delay` after its log first holds `ready` (or after 40 s);
// returns its exit status.
int RunInterrupted(const std::vector<std::string>& flags, const ProgramIo& io, const std::string& ready,
                   std::chrono::milliseconds delay) {
  std::vector<std::string> argv = {std::string(std::getenv("TEST_SRCDIR")) + "/rlflow/optimiser/optimiser"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  const pid_t pid = testing::StartProcess(argv, io);
  for (int i = 0; i < 800; ++i) {
    if (FileExists(io.err) && ReadFile(io.err).find(ready) != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::this_thread::sleep_for(delay);
  ::kill(pid, SIGINT);
  return testing::WaitProcess(pid);
}

// Ctrl-C during the search keeps the best graph so far: it is checked,
// measured and written, and the report says the search was interrupted.
TEST_F(OptimiserCli, InterruptedSearchStillWrites) {
  std::string model = TempDir() + "/interrupt.onnx";
  WriteOnnxFile(zoo::Build("inception_v3", 2), model);
  std::string report = TempDir() + "/interrupt.json";
  ::unlink(out_.c_str());
  ProgramIo io;
  io.out = TempDir() + "/int.out";
  io.err = TempDir() + "/int.err";
  // Interrupt 2 s into the search.
  const int status = RunInterrupted({"--model=" + model, "--output=" + out_, "--report=" + report,
                                     "--timing_cache=none", "--measure_runs=3", "--budget=1000000"},
                                    io, "searching", std::chrono::seconds(2));
  std::string err = ReadFile(io.err);
  ASSERT_EQ(status, 0) << err;
  EXPECT_NE(err.find("search interrupted"), std::string::npos) << err;
  EXPECT_TRUE(FileExists(out_));
  EXPECT_EQ(ReadReport(report)["search"]["stop_reason"], "interrupted");
  EXPECT_EQ(ImportOnnxFile(out_).outputs().size(), 1u);
}

// Ctrl-C before the search has changed anything: the user is told at once,
// the original is written as it came, and neither compared with itself nor
// measured (a batch-16 ResNet-50 had kept the user waiting 25 s for that).
TEST_F(OptimiserCli, InterruptedBeforeAnyRewriteWritesTheOriginalAtOnce) {
  std::string model = TempDir() + "/interrupt_early.onnx";
  WriteOnnxFile(zoo::Build("inception_v3", 2), model);
  std::string report = TempDir() + "/interrupt_early.json";
  ::unlink(out_.c_str());
  ProgramIo io;
  io.out = TempDir() + "/int_early.out";
  io.err = TempDir() + "/int_early.err";
  // Interrupt once the model is loaded (the handler is installed before).
  const int status =
      RunInterrupted({"--model=" + model, "--output=" + out_, "--report=" + report, "--timing_cache=none"}, io,
                     "loaded " + model, std::chrono::milliseconds(0));
  std::string err = ReadFile(io.err), out = ReadFile(io.out);
  ASSERT_EQ(status, 0) << err;
  EXPECT_NE(err.find("interrupted: stopping after the step in progress"), std::string::npos) << err;
  EXPECT_EQ(err.find("measuring"), std::string::npos) << err;
  EXPECT_NE(out.find("measured:   not measured (interrupted with the graph unchanged)"), std::string::npos) << out;
  nlohmann::json json = ReadReport(report);
  EXPECT_EQ(json["search"]["stop_reason"], "interrupted") << json;
  EXPECT_EQ(json["unchanged"], true) << json;
  EXPECT_EQ(json["check"]["compared"], false) << json;
  EXPECT_EQ(json["verdict"]["measured"], false) << json;
  EXPECT_EQ(ReadFile(out_), ReadFile(model));
}

// A wrong rule (a corrupted database entry that still validates) makes the
// optimised graph differ: the optimiser must refuse, name the rule, write nothing.
TEST_F(OptimiserCli, WrongRuleIsCaughtByTheNumericCheck) {
  const rules::RuleDatabase& db = testing::DefaultRules();
  rules::RuleDatabase bad;
  bad.set_magic(db.magic());
  bad.set_format_version(db.format_version());
  for (const auto& rule : db.rules()) {
    if (rule.id() != "fb7ae47167c7") continue;  // Conv(X, W*S) => S*Conv(X, W), attribute-generic
    rules::Rule wrong = rule;
    for (auto& n : *wrong.mutable_target()->mutable_nodes())
      if (n.op() == "Mul") n.set_op("Add");  // now claims S+Conv(X, W) == Conv(X, W*S)
    *bad.add_rules() = wrong;
  }
  ASSERT_EQ(bad.rules_size(), 1);
  std::string bad_path = TempDir() + "/wrong.rules.pb";
  SaveMessageAtomically(bad, bad_path);
  // x -> Conv 1x1 -> + per-channel constant: the wrong rule "folds" the Add.
  // The weight has more than 64 elements, so the conv before and after the
  // rewrite has one cost key (weights count by type only) and its timing
  // noise cancels: the Add's time is a gain beyond noise on a loaded machine
  // too, and the search applies the rule.
  const int64_t out_c = 8, in_c = 16;
  onnx::ModelProto m = BaseModel(13);
  AddValueInfo(m.mutable_graph()->add_input(), "x", {1, in_c, 32, 32});
  auto* w = m.mutable_graph()->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : {out_c, in_c, int64_t{1}, int64_t{1}}) w->add_dims(d);
  for (int k = 0; k < out_c * in_c; ++k) w->add_float_data(0.05f * (k % 7) - 0.1f);
  auto* t = m.mutable_graph()->add_initializer();
  t->set_name("t");
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : {out_c, int64_t{1}, int64_t{1}}) t->add_dims(d);
  for (int k = 0; k < out_c; ++k) t->add_float_data(k % 2 ? 3.0f : -2.0f);
  AddNode(m, "Conv", {"x", "w"}, {"c"}, "conv");
  AddNode(m, "Add", {"c", "t"}, {"y"}, "add");
  AddValueInfo(m.mutable_graph()->add_output(), "y", {1, out_c, 32, 32});
  ExpectCleanFailure(
      "--model=" + Save(m, "wrong_rule.onnx") + " --search=greedy --timing_cache=none --rules=" + bad_path, out_,
      "rules applied: fb7ae47167c7 (reversed)");
}

}  // namespace
}  // namespace rlflow
