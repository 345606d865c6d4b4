#define BOOST_TEST_MODULE resume_point
#include <boost/test/unit_test.hpp>

#include "relay/resume_point.h"

using namespace outbox;

namespace {

// published_through P at published_stream_seq S, assigned_through A, in `epoch`.
SourceState marks(uint64_t P, uint64_t S, uint64_t A, uint64_t epoch = 1) {
  SourceState s;
  s.epoch = epoch;
  s.publishedThrough = P;
  s.publishedStreamSeq = S;
  s.assignedThrough = A;
  return s;
}

// The same in an epoch that began after version `versionsAfter`, at stream sequence `streamSeq`.
SourceState marksInEpoch(uint64_t P, uint64_t S, uint64_t A, uint64_t epoch, uint64_t versionsAfter,
                         uint64_t streamSeq) {
  SourceState s = marks(P, S, A, epoch);
  s.epochVersionsAfter = versionsAfter;
  s.epochStreamSeq = streamSeq;
  return s;
}

// The stream: last sequence L, and its newest stored message (version at seq, of epoch), if any.
StreamTip stream(uint64_t L) { return StreamTip{L, std::nullopt, 0, 0}; }
StreamTip stream(uint64_t L, uint64_t version, uint64_t seq, uint64_t epoch = 1) {
  return StreamTip{L, version, epoch, seq};
}

std::pair<uint64_t, uint64_t> resume(const SourceState& s, const StreamTip& t) {
  auto r = findResumePoint(s, t, "CONTROL_S");
  BOOST_REQUIRE_MESSAGE(r.isOk(), r.status().message());
  return {r->version, r->seq};
}

std::string halt(const SourceState& s, const StreamTip& t) {
  auto r = findResumePoint(s, t, "CONTROL_S");
  BOOST_REQUIRE(!r.isOk());
  BOOST_TEST(r.status().isPermanent());
  return r.status().message();
}

using Point = std::pair<uint64_t, uint64_t>;

}  // namespace

BOOST_AUTO_TEST_CASE(in_step_and_fresh) {
  BOOST_TEST((resume(marks(0, 0, 0), stream(0)) == Point{0, 0}));
  BOOST_TEST((resume(marks(100, 100, 120), stream(100, 100, 100)) == Point{100, 100}));
}

BOOST_AUTO_TEST_CASE(a_crash_between_ack_and_mark_advances_the_marks) {
  BOOST_TEST((resume(marks(4, 4, 12), stream(12, 12, 12)) == Point{12, 12}));
  // The same after a repair left published_stream_seq above published_through.
  BOOST_TEST((resume(marks(95, 100, 110), stream(103, 98, 103)) == Point{98, 103}));
}

// Issue 8 finding 4, and the review of its first fix: messages deleted, purged or expired after
// the marks' sequence were this bridge's versions; nothing is published again.
BOOST_AUTO_TEST_CASE(deleted_or_expired_messages_past_the_marks_advance_them) {
  BOOST_TEST((resume(marks(4, 4, 12), stream(12)) == Point{12, 12}));                 // all purged
  BOOST_TEST((resume(marks(4, 4, 12), stream(12, 2, 2)) == Point{12, 12}));           // tip before the marks
  BOOST_TEST((resume(marks(100, 100, 100), stream(100, 95, 95)) == Point{100, 100}));  // last 5 deleted
  BOOST_TEST((resume(marks(100, 100, 105), stream(105, 102, 102)) == Point{105, 105}));
}

BOOST_AUTO_TEST_CASE(a_lost_tail_resumes_after_the_newest_surviving_version) {
  // nats-server lost its unsynced tail: the last sequence went back below the marks.
  BOOST_TEST((resume(marks(30, 30, 30), stream(8, 8, 8)) == Point{8, 8}));
  // ...and messages before the new last sequence were deleted: resume after the newest stored
  // version, the next message following the last sequence.
  BOOST_TEST((resume(marks(30, 30, 30), stream(10, 7, 7)) == Point{7, 10}));
}

BOOST_AUTO_TEST_CASE(a_lost_tail_with_nothing_of_this_epoch_left_republishes_only_the_tail) {
  // Everything expired by max_age, then the unsynced tail lost: 80 sequences remain of 100.
  BOOST_TEST((resume(marks(100, 100, 100), stream(80)) == Point{80, 80}));
  // In epoch 2 (began after version 50 at sequence 60), the lost part cannot start before the epoch.
  SourceState s = marksInEpoch(90, 100, 90, 2, 50, 60);
  BOOST_TEST((resume(s, stream(70)) == Point{60, 70}));
  BOOST_TEST((resume(s, stream(70, 40, 55, 1)) == Point{60, 70}));  // an epoch-1 message survives
}

BOOST_AUTO_TEST_CASE(a_recreated_stream_is_published_again_from_the_epochs_first_version) {
  BOOST_TEST((resume(marks(10, 10, 10), stream(0)) == Point{0, 0}));
  SourceState s = marksInEpoch(15, 17, 15, 2, 10, 12);
  BOOST_TEST((resume(s, stream(0)) == Point{10, 0}));
  BOOST_TEST((resume(s, stream(3)) == Point{10, 3}));  // recreated and written to by... nobody else
}

BOOST_AUTO_TEST_CASE(halts_when_only_an_epoch_bump_can_resolve_it) {
  BOOST_TEST(halt(marks(0, 0, 0), stream(9, 9, 9)).find("ahead of the database") != std::string::npos);
  BOOST_TEST(halt(marks(4, 4, 6), stream(12)).find("ahead of the database") != std::string::npos);
  BOOST_TEST(halt(marks(30, 30, 30), stream(40, 40, 40)).find("ahead of the database") != std::string::npos);
  BOOST_TEST(halt(marks(10, 10, 10), stream(10, 10, 10, 3)).find("holds epoch 3") != std::string::npos);
  // An epoch-1 message after the epoch-2 marks: written after the bump.
  BOOST_TEST(halt(marks(50, 20, 60, 2), stream(22, 12, 22, 1)).find("through an epoch bump") != std::string::npos);
  // A version the marks cannot account for.
  BOOST_TEST(halt(marks(10, 10, 20), stream(12, 15, 12)).find("another writer") != std::string::npos);
}

// Issue 8, finding 3: a leader still publishing when `epoch bump` read the stream stores its last
// old-epoch messages after that point. The new epoch begins after them, with nothing republished
// twice and no halt (a second bump is never needed).
BOOST_AUTO_TEST_CASE(a_fenced_leaders_last_old_epoch_messages_move_the_epochs_start) {
  // The bump saw the stream end at 40 and moved versions past 60; the leader stored 41..45 (its
  // versions 41..45 of epoch 1) before it noticed.
  SourceState bumped = marksInEpoch(60, 40, 60, 2, 60, 40);
  auto r = findResumePoint(bumped, stream(45, 45, 45, 1), "CONTROL_S");
  BOOST_REQUIRE_MESSAGE(r.isOk(), r.status().message());
  BOOST_TEST(r->version == 60u);
  BOOST_TEST(r->seq == 45u);
  // Sequences 41..45 hold versions 41..45: the rows the bump took them from get them back.
  BOOST_TEST((r->staleTail == StaleTail{40, 45, 41, 45}));
  // Once the epoch has published, an old-epoch message after its marks is another writer's.
  BOOST_TEST(halt(marksInEpoch(62, 42, 62, 2, 60, 40), stream(45, 45, 45, 1)).find("through an epoch bump") !=
             std::string::npos);
  // An old-epoch version past the bump's versions was assigned after the bump: never by this bridge.
  BOOST_TEST(halt(marksInEpoch(60, 40, 60, 2, 60, 40), stream(45, 61, 45, 1)).find("through an epoch bump") !=
             std::string::npos);
  // The same messages, expired (max_age) before the new epoch's first reconcile, cannot be told
  // from the epoch's own: halt, whether the epoch has assigned versions or not (review of issue
  // 19: counted as the epoch's own 61..65 when it had assigned 61..70, the fenced leader's rows
  // went out twice and the epoch's 61..65 never).
  BOOST_TEST(halt(bumped, stream(45)).find("no message after it survives") != std::string::npos);
  BOOST_TEST(halt(marksInEpoch(60, 40, 70, 2, 60, 40), stream(45)).find("no message after it survives") !=
             std::string::npos);
  // Or only messages up to the epoch's start survive.
  BOOST_TEST(halt(marksInEpoch(60, 40, 70, 2, 60, 40), stream(45, 40, 40, 1)).find("no message after it survives") !=
             std::string::npos);
  // Once the epoch has published, messages past its marks are its own: counted as usual.
  auto published = findResumePoint(marksInEpoch(62, 42, 70, 2, 60, 40), stream(45), "CONTROL_S");
  BOOST_REQUIRE(published.isOk());
  BOOST_TEST(published->version == 65u);
  BOOST_TEST(!published->staleTail);
  // In step: no move.
  BOOST_TEST(!findResumePoint(bumped, stream(40, 40, 40, 1), "CONTROL_S")->staleTail);
}

// Issue 19, item 7, follow-up: which versions the stale messages are, so their rows get them back.
BOOST_AUTO_TEST_CASE(a_stale_tail_names_the_versions_it_holds) {
  SourceState bumped = marksInEpoch(60, 40, 60, 2, 60, 40);
  // The newest of them deleted since: the sequences still count, the one before names the run.
  BOOST_TEST((findResumePoint(bumped, stream(45, 43, 43, 1), "CONTROL_S")->staleTail == StaleTail{40, 45, 41, 45}));
  // A session's first publish is fenced on the sequence only: the run may start at any version.
  BOOST_TEST((findResumePoint(bumped, stream(42, 57, 42, 1), "CONTROL_S")->staleTail == StaleTail{40, 42, 56, 57}));
  // A version too low for the sequences past the start to hold one each is no chain of ours.
  BOOST_TEST(halt(bumped, stream(45, 3, 45, 1)).find("through an epoch bump") != std::string::npos);
  // The epoch assigned versions, none published: still only the old epoch's messages past S.
  BOOST_TEST((findResumePoint(marksInEpoch(60, 40, 70, 2, 60, 40), stream(45, 45, 45, 1), "CONTROL_S")->staleTail ==
              StaleTail{40, 45, 41, 45}));
}

// What a bump keeps: only versions certainly in the stream, so no row whose version the stream
// lacks keeps it (it would never be published). Review of issue 8: a lost tail (L < S) kept the
// marks, and rows 91..100 were never published again.
BOOST_AUTO_TEST_CASE(an_epoch_bump_keeps_only_versions_certainly_in_the_stream) {
  auto kept = [](const SourceState& s, const StreamTip& t) { return planEpochBump(s, t, 0).kept; };
  BOOST_TEST(kept(marks(100, 100, 100), stream(120)) == 100u);            // all expired: not 0
  BOOST_TEST(kept(marks(100, 100, 150), stream(120)) == 120u);            // and 101..120 were published
  BOOST_TEST(kept(marks(100, 100, 100), stream(0)) == 0u);                // recreated: everything again
  BOOST_TEST(kept(marks(100, 100, 150), stream(130, 130, 130)) == 130u);  // marks lag
  BOOST_TEST(kept(marks(100, 100, 150), stream(90, 90, 90)) == 90u);      // lost tail: the stream's
  BOOST_TEST(kept(marks(100, 100, 150, 2), stream(140, 140, 140, 1)) == 100u);  // another writer: the marks
  BOOST_TEST(kept(marks(50, 50, 60), stream(100, 100, 100)) == 60u);      // restored: all assigned kept
  BOOST_TEST(kept(marks(50, 50, 60), stream(100)) == 60u);                // restored, all expired
}

// Review of issue 8: the new epoch and the first new version came from the database alone, so
// a restored database reused the stream's epoch number, and versions of messages that had
// expired.
BOOST_AUTO_TEST_CASE(an_epoch_bump_moves_past_the_streams_epoch_and_expired_versions) {
  auto plan = planEpochBump(marks(50, 50, 50), stream(200, 180, 190, 2), 50);
  BOOST_TEST(plan.epoch == 3u);  // the stream already holds epoch 2
  BOOST_TEST(plan.highest >= 200u);
  plan = planEpochBump(marks(50, 50, 50), stream(200), 50);  // everything expired
  BOOST_TEST(plan.epoch == 2u);
  BOOST_TEST(plan.highest == 200u);  // the version at 200 was at least 50 + 150
  plan = planEpochBump(marks(10, 10, 12), stream(10, 10, 10), 12);
  BOOST_TEST(plan.epoch == 2u);
  BOOST_TEST(plan.highest == 12u);
  BOOST_TEST(plan.kept == 10u);
}
