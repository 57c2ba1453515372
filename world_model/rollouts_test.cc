// The rollout file format: what is written reads back equal; a torn or
// corrupt file, another version and latents of the wrong size are one-line
// errors; a writer opened again on a partial file (a collection killed
// midway) keeps its complete episodes, drops a torn last one and goes on.
#include "world_model/rollouts.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/file_util.h"

namespace rlflow::world_model {
namespace {

RolloutHeader Header() {
  RolloutHeader h;
  h.set_latent_size(3);
  h.set_rule_actions(10);
  h.set_rules_id("test");
  h.set_max_locations(4);
  h.set_encoder("test encoder");
  h.set_policy("random");
  h.set_seed(7);
  h.set_horizon(5);
  h.set_reward("normalised");
  h.add_models("m");
  return h;
}

Episode MakeEpisode(int k) {
  Episode e;
  e.set_model("m");
  e.set_initial_cost_ms(1.5 + k);
  e.mutable_initial_valid()->set_rule_mask(PackMask({1, 0, 1, 0, 0, 0, 0, 0, 0, 1}));
  e.mutable_initial_valid()->add_locations(2);
  for (int t = 0; t < 2; ++t) {
    Step* s = e.add_steps();
    for (int i = 0; i < 3; ++i) s->add_latent(0.5f * (k + t + i));
    s->set_rule_action(t == 1 ? -1 : 2);
    s->set_location(t == 1 ? -1 : 1);
    s->set_reward(0.25f * k);
    s->set_done(t == 1);
    s->set_cost_ms(1.0 + k);
  }
  for (int i = 0; i < 3; ++i) e.add_final_latent(-1.0f * i);
  e.set_seed(100 + k);
  return e;
}

std::string Bytes(const std::string& path) { return ReadFile(path); }

void ExpectError(const std::string& path, const std::string& needle) {
  try {
    ReadRollouts(path);
    ADD_FAILURE() << "no error for " << path;
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find(needle), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
}

TEST(Rollouts, RoundTrip) {
  std::string path = MakeTempDir("rollouts_") + "/r.rollouts";
  RolloutWriter w(path, Header());
  for (int k = 0; k < 3; ++k) w.Append(MakeEpisode(k));
  EXPECT_FALSE(FileExists(path));  // only PATH.partial until Finish
  w.Finish();
  EXPECT_FALSE(FileExists(path + ".partial"));
  Rollouts r = ReadRollouts(path);
  EXPECT_EQ(r.header.magic(), kRolloutMagic);
  EXPECT_EQ(r.header.version(), kRolloutVersion);
  EXPECT_EQ(r.header.encoder(), "test encoder");
  ASSERT_EQ(r.episodes.size(), 3u);
  for (int k = 0; k < 3; ++k) EXPECT_EQ(r.episodes[k].SerializeAsString(), MakeEpisode(k).SerializeAsString());
  std::vector<uint8_t> mask = UnpackMask(r.episodes[0].initial_valid().rule_mask(), 10);
  EXPECT_EQ(mask, (std::vector<uint8_t>{1, 0, 1, 0, 0, 0, 0, 0, 0, 1}));
}

TEST(Rollouts, BadFilesAreOneLineErrors) {
  std::string dir = MakeTempDir("rollouts_bad_");
  ExpectError(dir + "/missing", "missing");
  WriteFileAtomically(dir + "/other", "not a rollout file at all");
  ExpectError(dir + "/other", "not an rlflow rollout file");
  std::string good = dir + "/good";
  {
    RolloutWriter w(good, Header());
    w.Append(MakeEpisode(0));
    w.Finish();
  }
  std::string bytes = Bytes(good);
  WriteFileAtomically(dir + "/torn", bytes.substr(0, bytes.size() - 5));
  ExpectError(dir + "/torn", "truncated");
  std::string corrupt = bytes;
  corrupt[corrupt.size() - 3] = static_cast<char>(0xff);
  corrupt[corrupt.size() - 4] = static_cast<char>(0xff);
  WriteFileAtomically(dir + "/corrupt", corrupt);
  ExpectError(dir + "/corrupt", "checksum");
  RolloutHeader v2 = Header();
  {
    RolloutWriter w(dir + "/v2", v2);
    w.Finish();
  }
  // Another version: rewrite the header record with version 2.
  Rollouts r = ReadRollouts(dir + "/v2");
  EXPECT_TRUE(r.episodes.empty());
  std::string v2_bytes = Bytes(dir + "/v2");
  RolloutHeader h = r.header;
  h.set_version(2);
  std::string record = h.SerializeAsString();
  std::string rebuilt = v2_bytes.substr(0, 16);
  for (int i = 0; i < 8; ++i) rebuilt.push_back(static_cast<char>((record.size() >> (8 * i)) & 0xff));
  // The new record's checksum (CRC-32, IEEE), so that only the version is wrong.
  uint32_t c = 0xffffffffu;
  for (unsigned char b : record) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
  }
  c ^= 0xffffffffu;
  for (int i = 0; i < 4; ++i) rebuilt.push_back(static_cast<char>((c >> (8 * i)) & 0xff));
  rebuilt += record;
  WriteFileAtomically(dir + "/v2", rebuilt);
  ExpectError(dir + "/v2", "version 2");
  // Latents of the wrong size are refused when written.
  RolloutWriter w(dir + "/size", Header());
  Episode e = MakeEpisode(0);
  e.mutable_steps(0)->add_latent(1.0f);
  EXPECT_THROW(w.Append(e), Error);
}

TEST(Rollouts, APartialFileIsResumed) {
  std::string path = MakeTempDir("rollouts_resume_") + "/r.rollouts";
  {
    RolloutWriter w(path, Header());
    w.Append(MakeEpisode(0));
    w.Append(MakeEpisode(1));
    // Killed here: no Finish. A torn record is left at the end.
  }
  std::string partial = Bytes(path + ".partial");
  WriteFileAtomically(path + ".partial",
                      partial + std::string("\x40\x00\x00\x00\x00\x00\x00\x00\x01\x02\x03\x04partial", 19));
  // Another collection may not take it over.
  RolloutHeader other = Header();
  other.set_seed(8);
  EXPECT_THROW(RolloutWriter(path, other), Error);
  RolloutWriter w(path, Header());
  EXPECT_EQ(w.episodes(), 2);
  w.Append(MakeEpisode(2));
  w.Finish();
  Rollouts r = ReadRollouts(path);
  ASSERT_EQ(r.episodes.size(), 3u);
  for (int k = 0; k < 3; ++k) EXPECT_EQ(r.episodes[k].SerializeAsString(), MakeEpisode(k).SerializeAsString());
}

}  // namespace
}  // namespace rlflow::world_model
