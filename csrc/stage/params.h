// The stage's parameters: version 1's models by their fields, and every later model as one bit of
// `extras`, from the one list of them (models.def), with what each needs.
#pragma once

#include <string>
#include <vector>

#include "common.h"

namespace shazip::stage {

// The models beyond version 1's (models.def, the one list of them): Extra's masks by bit, and each
// model's name, version and needs (what `check_needs` and Python's shazip.stage.adaptive read).
enum ExtraBit : int {
#define STAGE_MODEL(MASK, name, version, needs, about) MASK##_BIT,
#include "models.def"
#undef STAGE_MODEL
  EXTRA_COUNT
};

enum Extra : u64 {
#define STAGE_MODEL(MASK, name, version, needs, about) MASK = u64(1) << MASK##_BIT,
#include "models.def"
#undef STAGE_MODEL
  EXTRAS_ALL = (u64(1) << EXTRA_COUNT) - 1,
  GROUPS_ANY = GROUPS | GROUP_WORD | GROUP_MIX | GROUP_APM,
  CELLS = CELL_LEFT | CELL_ORDER | CELL_UP,  // the cells are tracked for any of these
};

struct StageModel {
  const char* name;
  int version;
  const char* needs;  // space-separated: models' names, or "nn", "match", "apm"
  const char* about;
};

inline constexpr StageModel STAGE_MODELS[EXTRA_COUNT] = {
#define STAGE_MODEL(MASK, name, version, needs, about) {#name, version, needs, about},
#include "models.def"
#undef STAGE_MODEL
};

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
