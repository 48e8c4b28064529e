// A validator for the subset of JSON Schema (2020-12) that
// schema/report.schema.json uses: type, const, enum, minimum, minLength,
// required, properties, additionalProperties: false, items, and local $ref.
// A keyword outside that subset is reported as an error, so the schema cannot
// quietly grow past what the tests check.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace memdiag::testkit {

std::vector<std::string> validate(const nlohmann::json& schema, const nlohmann::json& doc);
nlohmann::json load_json(const std::string& path);

}  // namespace memdiag::testkit
