#pragma once
// The fuzz targets (tools/fuzz/*_fuzzer.cc) define LLVMFuzzerTestOneInput;
// each is linked three ways: with libFuzzer (--config=fuzz), with a replay
// main that runs the target over files, and into a GoogleTest that replays
// the seed corpus and the regression inputs in every `./bazelw test //...`.
#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
