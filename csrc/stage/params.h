// The stage's parameters: version 1's models by their fields, and every later model as one bit of
// `extras`, from the one list of them (models.def), with what each needs and uses.
#pragma once

#include <string>
#include <vector>

#include "common.h"

namespace shazip::stage {

// The models beyond version 1's (models.def, the one list of them): Extra's masks by bit, and each
// model's name, version, needs (what `check_needs` and Python's shazip.stage.adaptive read) and
// the lane state it uses (`users_of`).
enum ExtraBit : int {
#define STAGE_MODEL(MASK, name, version, needs, uses, contexts, about) MASK##_BIT,
#include "stage/models.def"
#undef STAGE_MODEL
  EXTRA_COUNT
};

enum Extra : u64 {
#define STAGE_MODEL(MASK, name, version, needs, uses, contexts, about) MASK = u64(1) << MASK##_BIT,
#include "stage/models.def"
#undef STAGE_MODEL
  EXTRAS_ALL = (u64(1) << EXTRA_COUNT) - 1,
};

struct StageModel {
  const char* name;
  int version;
  const char* needs;  // space-separated: models' names, or "nn", "match", "apm"
  const char* uses;   // space-separated: words of LANE_STATE
  const char* about;
};

inline constexpr StageModel STAGE_MODELS[EXTRA_COUNT] = {
#define STAGE_MODEL(MASK, name, version, needs, uses, contexts, about) {#name, version, needs, uses, about},
#include "stage/models.def"
#undef STAGE_MODEL
};

// What a model may use (models.def's `uses`): the state a lane tracks (lane.h: fields, the byte
// above in the field, cells, a number's digits and places, the field's value, the byte classes,
// groups, tokens, brackets) and the block's byte history, each kept only for the models that use it.
inline constexpr const char* LANE_STATE = "fields above cells digits number value shape groups tokens brackets history";

// whether the space-separated `list` holds the n bytes at `word`
constexpr bool listed(const char* list, const char* word, size_t n) {
  for (const char* at = list; *at;) {
    size_t k = 0;
    while (k < n && at[k] == word[k]) ++k;
    if (k == n && (at[n] == ' ' || at[n] == '\0')) return true;
    while (*at && *at != ' ') ++at;
    while (*at == ' ') ++at;
  }
  return false;
}
constexpr size_t length(const char* s) { return *s ? 1 + length(s + 1) : 0; }

// The models (an Extra mask) whose `uses` names `state`: those it is kept for.
constexpr u64 users_of(const char* state) {
  u64 mask = 0;
  for (int i = 0; i < EXTRA_COUNT; ++i) mask |= listed(STAGE_MODELS[i].uses, state, length(state)) ? u64(1) << i : 0;
  return mask;
}

// every word of every model's `uses` is one of LANE_STATE's
constexpr bool uses_are_known() {
  for (const StageModel& m : STAGE_MODELS)
    for (const char* at = m.uses; *at;) {
      size_t n = 0;
      while (at[n] && at[n] != ' ') ++n;
      if (!listed(LANE_STATE, at, n)) return false;
      at += n;
      while (*at == ' ') ++at;
    }
  return true;
}
static_assert(uses_are_known(), "models.def: a model uses a state that LANE_STATE does not name");

struct Params {
  int table_bits, history_bits, match_bits, match_min, mixer_lr;
  std::vector<int> orders;
  bool word, column, sparse, nn, match, apm;
  u64 extras;
  bool has(Extra e) const { return extras & e; }
  bool operator==(const Params& o) const {
    return table_bits == o.table_bits && history_bits == o.history_bits && match_bits == o.match_bits &&
           match_min == o.match_min && mixer_lr == o.mixer_lr && orders == o.orders && word == o.word &&
           column == o.column && sparse == o.sparse && nn == o.nn && match == o.match && apm == o.apm &&
           extras == o.extras;
  }
};

// Refuses parameters with a model but not what it needs (models.def's `needs`).
inline void check_needs(const Params& p) {
  for (int i = 0; i < EXTRA_COUNT; ++i) {
    if (!(p.extras >> i & 1)) continue;
    const std::string needs = STAGE_MODELS[i].needs;
    for (size_t at = 0; at < needs.size();) {
      size_t end = needs.find(' ', at);
      if (end == std::string::npos) end = needs.size();
      const std::string need = needs.substr(at, end - at);
      at = end + 1;
      bool there = need == "nn" ? p.nn : need == "match" ? p.match : need == "apm" ? p.apm : false;
      for (int j = 0; j < EXTRA_COUNT && !there; ++j) there = need == STAGE_MODELS[j].name && (p.extras >> j & 1);
      if (!there) throw std::invalid_argument(std::string("the ") + STAGE_MODELS[i].name + " model needs " + need);
    }
  }
}


}  // namespace shazip::stage
