#pragma once
// Rollout files: episodes of the real rewrite environment, the world
// model's training data. The format (version kRolloutVersion):
//
//   the 16 bytes "rlflow.rollouts\n", then records, each a 64-bit
//   little-endian byte count n, the CRC-32 (IEEE, zlib's) of the record's
//   bytes as 32-bit little-endian, and the n bytes of a serialized protobuf
//   message (world_model/rollouts.proto): first the RolloutHeader, then one
//   Episode per record.
//
// RolloutWriter appends episodes to PATH.partial one record at a time
// (flushed and synced), and Finish renames it to PATH, so PATH only ever
// appears whole. A collection killed midway leaves PATH.partial with every
// episode written so far; a writer opened again on it with the same header
// keeps them (a torn last record is dropped) and goes on from there.
//
// No flags, no I/O beyond the named files.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "world_model/rollouts.pb.h"

namespace rlflow::world_model {

inline constexpr uint32_t kRolloutVersion = 1;
inline constexpr char kRolloutMagic[] = "rlflow.rollouts";

struct Rollouts {
  RolloutHeader header;
  std::vector<Episode> episodes;
};

// A finished rollout file. rlflow::Error (one line naming the file) if it
// is missing, not a rollout file, of another version, truncated or corrupt,
// or if an episode's latents do not have the header's size.
Rollouts ReadRollouts(const std::string& path);

// The header's fields that must match for a partial file to be resumed:
// everything but the models' order is compared.
bool SameCollection(const RolloutHeader& a, const RolloutHeader& b);

class RolloutWriter {
 public:
  // Starts PATH.partial, or resumes it when it exists with the same header
  // (rlflow::Error if its header differs). PATH itself is replaced by
  // Finish.
  RolloutWriter(const std::string& path, const RolloutHeader& header);
  ~RolloutWriter();
  RolloutWriter(const RolloutWriter&) = delete;
  RolloutWriter& operator=(const RolloutWriter&) = delete;

  // Episodes in the file (the resumed ones included).
  int episodes() const { return episodes_; }
  // Appends one episode: written, flushed and synced before it returns.
  void Append(const Episode& episode);
  // Renames PATH.partial to PATH (atomically).
  void Finish();

 private:
  std::string path_, partial_;
  FILE* file_ = nullptr;
  int episodes_ = 0;
  RolloutHeader header_;
};

// Packs / unpacks a rule mask (bit a, LSB first, for rule action a).
std::string PackMask(const std::vector<uint8_t>& mask);
std::vector<uint8_t> UnpackMask(const std::string& bits, int size);

}  // namespace rlflow::world_model
