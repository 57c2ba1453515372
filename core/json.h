#pragma once
// A minimal JSON writer for reports (objects, arrays, strings, numbers,
// booleans), with correct string escaping. No I/O.
#include <cstdint>
#include <string>
#include <vector>

namespace rlflow {

class JsonWriter {
 public:
  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  JsonWriter& Key(const std::string& key);
  JsonWriter& String(const std::string& value);
  JsonWriter& Number(double value);  // non-finite numbers are written as null
  JsonWriter& Int(int64_t value);
  JsonWriter& Bool(bool value);
  JsonWriter& Null();
  // The document (with a trailing newline); throws if containers are open.
  std::string Finish() const;

  static std::string Escape(const std::string& s);  // quoted

 private:
  void BeforeValue();
  std::string out_;
  std::vector<bool> first_;  // per open container: no element yet
  bool after_key_ = false;
};

// Reads back a number written by JsonWriter: the value after the first
// "key": at or after `from`; NaN if absent. For tests and benchmarks that
// read rlflow's own reports (not a general JSON parser).
double JsonFindNumber(const std::string& json, const std::string& key, size_t from = 0);

}  // namespace rlflow
