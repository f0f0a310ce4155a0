// The APM (SSE) stages after the mixers: the mix refined by the partial byte (FIELD_EQ: and the
// field), by the last byte, and (MATCH_APM, GROUP_APM) by the match's state and the last groups
// (the contract below says how).
//
// CONTRACT: the later APMs, each named as in models.def (where its bit and
// the stage version that added it are); the rules every model keeps are atop stage.h.
// FIELD_EQ's rule (contexts.h) also gives APM 1 its contexts.
//   MATCH_APM      an APM of x_mix in context c0 | mcx << 8 (mcx: the first match map's context,
//                  0 without a prediction), after APM 2: p = floor((3 p + p_match) / 4).
//   GROUP_APM      (needs the APMs) an APM of x_mix in context g2 >> 16 after MATCH_APM's: p = floor((3 p +
//                  its P16) / 4).
#pragma once

#include <algorithm>

#include "common.h"
#include "stage/apm.h"
#include "stage/hash.h"
#include "stage/lane.h"
#include "stage/params.h"
#include "stage/tables.h"

namespace shazip::stage {

constexpr u32 APM1_FIELDS = 8;  // FIELD_EQ: APM 1's contexts tell fields 0..6 and 7 or later apart

// GROUP_APM's context at bit k, c0 the bits so far: by the last 2 groups
inline size_t group_apm_context(const Lane& L, int c0) {
  return hash32(u32(L.groups & 0xFFFF) * 0x9E3779B1u + u32(c0) + u32(L.group_repeat) * 77u) >> 16;
}

class APMs {
 public:
  APMs() = default;
  APMs(const Params& p, const Tables& tb)
      : on_(p.apm), field_eq_(p.has(FIELD_EQ)), match_(p.has(MATCH_APM)), groups_(p.has(GROUP_APM)) {
    if (!on_) return;
    apm1_ = APM(tb, field_eq_ ? 256 * 2 * APM1_FIELDS : 256);
    if (match_) match_apm_ = APM(tb, 256 * 2 * MATCH_BANDS);
    if (groups_) group_apm_ = APM(tb, 65536);
    apm2_ = APM(tb, 65536);
  }
  size_t bytes() const { return apm1_.bytes() + apm2_.bytes() + match_apm_.bytes() + group_apm_.bytes(); }
  // the rows of partial byte c0 in lane L of the APMs whose context the lane tells (all but
  // MATCH_APM's; a hint only)
  void prefetch(const Lane& L, int c0) const {
    if (!on_) return;
    apm1_.prefetch(apm1_context(L, c0));
    apm2_.prefetch(size_t(c0) | (L.hist & 0xFF) << 8);
    if (groups_) group_apm_.prefetch(group_apm_context(L, c0));
  }
  // the final P16 from the mix x_mix (pm = squash(x_mix)); mcx: the first match map's context
  int refine(const Tables& tb, const Lane& L, int xm, int pm, int c0, size_t mcx) {
    if (!on_) return pm;
    const int a1 = apm1_.p16(xm, apm1_context(L, c0));
    const int pa = (pm + 3 * a1) >> 2;
    const int a2 = apm2_.p16(tb.st(pa), size_t(c0) | (L.hist & 0xFF) << 8);
    int p = (pa + 3 * a2) >> 2;
    if (match_) p = (3 * p + match_apm_.p16(xm, size_t(c0) | mcx << 8)) >> 2;
    if (groups_) p = (3 * p + group_apm_.p16(xm, group_apm_context(L, c0))) >> 2;
    return p;
  }
  void update(int y) {
    if (!on_) return;
    apm1_.update(y);
    apm2_.update(y);
    if (match_) match_apm_.update(y);
    if (groups_) group_apm_.update(y);
  }

 private:
  size_t apm1_context(const Lane& L, int c0) const {
    if (!field_eq_) return size_t(c0);
    return size_t(c0) | size_t(L.field_eq) << 8 | size_t(std::min<u32>(L.field, APM1_FIELDS - 1)) << 9;
  }
  bool on_ = false, field_eq_ = false, match_ = false, groups_ = false;
  APM apm1_, apm2_, match_apm_, group_apm_;
};


}  // namespace shazip::stage
