// The figures a job reports, one row each: the name the user types (pbench --stats, the JSON key,
// Python's method), the partial parts it needs and its final value from the merged result. pbench's
// flags and text, the job result's JSON (so the report and Python) iterate this table; a figure
// computed from parts the partial already has is one row here (docs/design.md, "How to add a
// reduction"). Not installed: libpclient's public header lists no figures.
#pragma once

#include <cstdint>
#include <string_view>

#include "pclient/client.h"

namespace pclient {

struct FigureDef {
  std::string_view name;  // --stats, the JSON key, Python's x.NAME()
  // pbench's text line ("Var: ..."); empty for the figures of the one "Sum: ... Max: ..." line,
  // which every job has, written as before (an empty selection's line says so instead).
  std::string_view label;
  bool squares;  // needs the partial's exact sum of squares: Job::squares, which workers compute on request
  bool ddof;     // its value takes numpy's ddof (pbench --ddof; the JSON then has "ddof")
  double (*value)(const Result& r, uint32_t ddof);
};

inline constexpr FigureDef kFigures[] = {
    {"sum", "", false, false, [](const Result& r, uint32_t) { return r.sum; }},
    {"count", "", false, false, [](const Result& r, uint32_t) { return double(r.count); }},
    {"mean", "", false, false, [](const Result& r, uint32_t) { return r.mean(); }},
    {"min", "", false, false, [](const Result& r, uint32_t) { return r.min; }},
    {"max", "", false, false, [](const Result& r, uint32_t) { return r.max; }},
    {"var", "Var", true, true, [](const Result& r, uint32_t ddof) { return r.var(ddof); }},
    {"std", "Std", true, true, [](const Result& r, uint32_t ddof) { return r.std(ddof); }},
};

// The row named `name`, or nullptr.
inline const FigureDef* find_figure(std::string_view name) {
  for (const FigureDef& f : kFigures)
    if (f.name == name) return &f;
  return nullptr;
}

// Whether result r holds the parts figure f needs (every job has sum, count, min and max).
inline bool has_parts(const Result& r, const FigureDef& f) { return !f.squares || r.has_squares; }

}  // namespace pclient
