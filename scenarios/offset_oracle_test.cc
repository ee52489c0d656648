// Torn-offset checks on hand-built shared-offset histories.

#include <gtest/gtest.h>

#include "scenarios/oracle.h"

namespace leapfrog {
namespace {

constexpr uint32_t kBlock = 64;

History base(uint64_t blocks) {
  History h;
  h.header.block_size = kBlock;
  h.header.blocks = blocks;
  h.header.actors = {Actor{0, "observer", {}}, Actor{1, "observer", {}}};
  return h;
}

void read(History& h, uint32_t actor, TimeNs inv, TimeNs comp, int64_t offset, uint32_t len = kBlock) {
  h.offsets.push_back(OffsetRecord{OffsetRecord::Kind::Read, actor, 0, inv, comp, 0, offset, len});
}

void seek(History& h, uint32_t actor, TimeNs inv, TimeNs comp, int64_t pos) {
  h.offsets.push_back(OffsetRecord{OffsetRecord::Kind::Seek, actor, 0, inv, comp, 0, pos, 0});
}

TEST(OffsetOracle, InterleavedReadersAreClean) {
  History h = base(4);
  read(h, 0, 10, 20, 0);
  read(h, 1, 15, 30, 64);   // overlaps the first: either order is fine
  read(h, 0, 25, 40, 128);
  read(h, 1, 35, 50, 192);
  read(h, 0, 55, 60, -1, 0);  // end of file
  seek(h, 1, 70, 80, 256);
  auto r = check_history(h);
  EXPECT_EQ(r.violation_count, 0u);
  EXPECT_EQ(r.offsets_checked, 6u);
}

TEST(OffsetOracle, BlockReadTwice) {
  History h = base(4);
  read(h, 0, 10, 20, 0);
  read(h, 1, 10, 20, 0);
  auto r = check_history(h);
  ASSERT_EQ(r.violation_count, 1u);
  EXPECT_EQ(r.violations[0].kind, ViolationKind::TornOffset);
  EXPECT_EQ(r.violations[0].versions.size(), 1u);  // names the other read
}

TEST(OffsetOracle, BlockSkipped) {
  History h = base(4);
  read(h, 0, 10, 20, 0);
  read(h, 1, 30, 40, 128);
  EXPECT_EQ(check_history(h).violation_count, 1u);
}

TEST(OffsetOracle, EndOfFileWithUnreadBlocks) {
  History h = base(4);
  read(h, 0, 10, 20, 0);
  read(h, 1, 30, 40, 64);
  read(h, 1, 50, 60, -1, 0);
  EXPECT_EQ(check_history(h).violation_count, 1u);
}

TEST(OffsetOracle, RealTimeOrder) {
  History h = base(4);
  read(h, 0, 10, 20, 64);  // completed before the read of block 0 began
  read(h, 1, 30, 40, 0);
  auto r = check_history(h);
  ASSERT_EQ(r.violation_count, 1u);
  EXPECT_EQ(r.by_kind[static_cast<size_t>(ViolationKind::TornOffset)], 1u);
}

TEST(OffsetOracle, MisalignedRead) {
  History h = base(4);
  read(h, 0, 10, 20, 0);
  read(h, 1, 30, 40, 96);
  EXPECT_GE(check_history(h).violation_count, 1u);
}

TEST(OffsetOracle, SeekInconsistentWithReads) {
  History h = base(4);
  read(h, 0, 10, 20, 0);
  read(h, 0, 30, 40, 64);
  seek(h, 1, 50, 60, 64);  // both reads completed: the position must be 128
  seek(h, 1, 5, 8, 64);    // before any read began: the position must be 0
  seek(h, 1, 25, 28, 64);  // between the reads: fine
  auto r = check_history(h);
  EXPECT_EQ(r.violation_count, 2u);
}

TEST(OffsetOracle, EpochsAreSeparatePasses) {
  History h = base(2);
  read(h, 0, 10, 20, 0);
  read(h, 1, 30, 40, 64);
  h.offsets.push_back(OffsetRecord{OffsetRecord::Kind::Read, 0, 1, 50, 60, 0, 0, kBlock});
  h.offsets.push_back(OffsetRecord{OffsetRecord::Kind::Read, 1, 1, 70, 80, 0, 64, kBlock});
  EXPECT_EQ(check_history(h).violation_count, 0u);
}

TEST(OffsetOracle, BadBlockSizeIsAnError) {
  History h = base(2);
  h.header.block_size = 0;
  read(h, 0, 10, 20, 0);
  EXPECT_THROW(check_history(h), HistoryError);
}

}  // namespace
}  // namespace leapfrog
