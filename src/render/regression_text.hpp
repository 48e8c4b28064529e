// Internal to memdiag::render: the baseline's section of each format that
// has one: a line per matched run, a table of its phases, the component
// that moved; the same records in JSON.
#pragma once

#include "memdiag/render.hpp"

#include <nlohmann/json.hpp>

#include <string>

namespace memdiag::detail {

std::string regression_text(const RegressionReport& r);
std::string regression_markdown(const RegressionReport& r);
nlohmann::json regression_json(const RegressionReport& r);

}  // namespace memdiag::detail
