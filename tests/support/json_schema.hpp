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

// Every property the schema defines, by path ("config.parallelism.mode",
// "samples[].phase"), with its type or values in words and its
// description; local $refs resolved. open: objects that allow properties
// beyond their own (additionalProperties not false), by path.
struct SchemaField {
  std::string path;
  std::string type;
  std::string description;
};
std::vector<SchemaField> schema_fields(const nlohmann::json& schema, std::vector<std::string>* open = nullptr);
// The same in the schema's own order of properties.
std::vector<SchemaField> schema_fields(const nlohmann::ordered_json& schema);
nlohmann::ordered_json load_ordered_json(const std::string& path);
// Every path a document holds, in the same spelling.
std::vector<std::string> document_paths(const nlohmann::json& doc);

}  // namespace memdiag::testkit
