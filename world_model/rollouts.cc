#include "world_model/rollouts.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "core/file_util.h"

namespace rlflow::world_model {
namespace {

constexpr char kFileMagic[] = "rlflow.rollouts\n";
constexpr size_t kFileMagicSize = sizeof(kFileMagic) - 1;

// CRC-32 (IEEE 802.3, as zlib's crc32) of a record's bytes.
uint32_t Crc32(const std::string& bytes) {
  static const std::vector<uint32_t> table = [] {
    std::vector<uint32_t> t(256);
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t c = 0xffffffffu;
  for (unsigned char b : bytes) c = table[(c ^ b) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

uint64_t LittleEndian(const std::string& bytes, size_t at, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
  return v;
}

void PutLittleEndian(std::string* out, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void PutRecord(std::string* out, const google::protobuf::Message& m) {
  std::string bytes;
  if (!m.SerializeToString(&bytes)) Fail("rollouts: could not serialise a record");
  PutLittleEndian(out, bytes.size(), 8);
  PutLittleEndian(out, Crc32(bytes), 4);
  *out += bytes;
}

// The records of `bytes` after the magic; `torn` receives whether the last
// one was cut short (then it is not returned). A record whose checksum does
// not match is an error naming it.
std::vector<std::string> Records(const std::string& bytes, const std::string& path, bool* torn) {
  if (bytes.size() < kFileMagicSize || bytes.compare(0, kFileMagicSize, kFileMagic) != 0)
    Fail("'", path, "' is not an rlflow rollout file");
  std::vector<std::string> out;
  size_t at = kFileMagicSize;
  *torn = false;
  while (at < bytes.size()) {
    if (bytes.size() - at < 12) {
      *torn = true;
      break;
    }
    const uint64_t n = LittleEndian(bytes, at, 8);
    const uint32_t crc = static_cast<uint32_t>(LittleEndian(bytes, at + 8, 4));
    at += 12;
    if (n > bytes.size() - at) {
      *torn = true;
      break;
    }
    std::string record = bytes.substr(at, n);
    if (Crc32(record) != crc) Fail("rollout file '", path, "': record ", out.size(), " is corrupt (checksum)");
    out.push_back(std::move(record));
    at += n;
  }
  return out;
}

RolloutHeader ParseHeader(const std::vector<std::string>& records, const std::string& path) {
  if (records.empty()) Fail("rollout file '", path, "' has no header");
  RolloutHeader h;
  if (!h.ParseFromString(records[0]) || h.magic() != kRolloutMagic)
    Fail("rollout file '", path, "' has a corrupt header");
  if (h.version() != kRolloutVersion)
    Fail("rollout file '", path, "' has format version ", h.version(), "; this build reads version ", kRolloutVersion);
  if (h.latent_size() == 0 || h.rule_actions() == 0)
    Fail("rollout file '", path, "' has an empty latent or action space");
  return h;
}

void CheckEpisode(const Episode& e, const RolloutHeader& h, const std::string& path, size_t index) {
  auto bad = [&](const std::string& what) { Fail("rollout file '", path, "': episode ", index, " ", what); };
  const size_t z = h.latent_size();
  if (static_cast<size_t>(e.final_latent_size()) != z) bad("has a final latent of the wrong size");
  for (const Step& s : e.steps()) {
    if (static_cast<size_t>(s.latent_size()) != z) bad("has a latent of the wrong size");
    if (s.rule_action() < -1 || s.rule_action() >= static_cast<int>(h.rule_actions()))
      bad("has an action outside the rule actions");
    if ((s.rule_action() < 0) != (s.location() < 0)) bad("has a stop action with a location");
  }
}

}  // namespace

Rollouts ReadRollouts(const std::string& path) {
  bool torn = false;
  std::vector<std::string> records = Records(ReadFile(path, "rollout file"), path, &torn);
  if (torn) Fail("rollout file '", path, "' is truncated");
  Rollouts r;
  r.header = ParseHeader(records, path);
  for (size_t k = 1; k < records.size(); ++k) {
    Episode e;
    if (!e.ParseFromString(records[k])) Fail("rollout file '", path, "': episode ", k - 1, " is corrupt");
    CheckEpisode(e, r.header, path, k - 1);
    r.episodes.push_back(std::move(e));
  }
  return r;
}

bool SameCollection(const RolloutHeader& a, const RolloutHeader& b) {
  return a.SerializeAsString() == b.SerializeAsString();
}

RolloutWriter::RolloutWriter(const std::string& path, const RolloutHeader& header)
    : path_(path), partial_(path + ".partial"), header_(header) {
  header_.set_magic(kRolloutMagic);
  header_.set_version(kRolloutVersion);
  const RolloutHeader& h = header_;
  std::string keep = kFileMagic;
  PutRecord(&keep, h);
  if (FileExists(partial_)) {
    bool torn = false;
    std::vector<std::string> records = Records(ReadFile(partial_, "partial rollout file"), partial_, &torn);
    RolloutHeader old = ParseHeader(records, partial_);
    if (!SameCollection(old, h))
      Fail("'", partial_, "' holds episodes of another collection (other flags); delete it or choose another --out");
    // Keep the complete, parseable episodes (a torn last record is dropped).
    for (size_t k = 1; k < records.size(); ++k) {
      Episode e;
      if (!e.ParseFromString(records[k])) break;
      PutRecord(&keep, e);
      ++episodes_;
    }
  }
  // The kept part is written whole first, then appended to.
  WriteFileAtomically(partial_, keep);
  file_ = std::fopen(partial_.c_str(), "ab");
  if (file_ == nullptr) Fail("cannot open '", partial_, "' for appending: ", std::strerror(errno));
}

RolloutWriter::~RolloutWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

void RolloutWriter::Append(const Episode& episode) {
  if (file_ == nullptr) Fail("rollouts: Append after Finish");
  CheckEpisode(episode, header_, partial_, episodes_);
  std::string record;
  PutRecord(&record, episode);
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size() || std::fflush(file_) != 0 ||
      ::fsync(::fileno(file_)) != 0)
    Fail("cannot write to '", partial_, "': ", std::strerror(errno));
  ++episodes_;
}

void RolloutWriter::Finish() {
  if (file_ == nullptr) return;
  std::fclose(file_);
  file_ = nullptr;
  if (std::rename(partial_.c_str(), path_.c_str()) != 0)
    Fail("cannot rename '", partial_, "' to '", path_, "': ", std::strerror(errno));
}

std::string PackMask(const std::vector<uint8_t>& mask) {
  std::string bits((mask.size() + 7) / 8, '\0');
  for (size_t a = 0; a < mask.size(); ++a)
    if (mask[a]) bits[a / 8] = static_cast<char>(static_cast<unsigned char>(bits[a / 8]) | (1u << (a % 8)));
  return bits;
}

std::vector<uint8_t> UnpackMask(const std::string& bits, int size) {
  std::vector<uint8_t> mask(size, 0);
  for (int a = 0; a < size && static_cast<size_t>(a / 8) < bits.size(); ++a)
    mask[a] = (static_cast<unsigned char>(bits[a / 8]) >> (a % 8)) & 1u;
  return mask;
}

}  // namespace rlflow::world_model
