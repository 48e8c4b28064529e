#include "json_schema.hpp"

#include <algorithm>
#include <fstream>
#include <set>
#include <stdexcept>

namespace memdiag::testkit {
using nlohmann::json;

namespace {

bool has_type(const json& v, const std::string& t) {
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  if (t == "string") return v.is_string();
  if (t == "integer") return v.is_number_integer();
  if (t == "number") return v.is_number();
  if (t == "boolean") return v.is_boolean();
  if (t == "null") return v.is_null();
  throw std::runtime_error("schema uses unknown type " + t);
}

class Validator {
 public:
  explicit Validator(const json& root) : root_(root) {}

  void check(const json& s, const json& v, const std::string& path) {
    static const std::set<std::string> known = {
        "$schema", "$id", "title", "description", "type", "const", "enum", "minimum", "minLength", "required",
        "properties", "additionalProperties", "items", "$ref", "$defs", "maximum"};
    for (auto it = s.begin(); it != s.end(); ++it) {
      if (!known.count(it.key())) errors.push_back(path + ": schema keyword '" + it.key() + "' not supported");
    }
    if (s.contains("$ref")) {
      const std::string ref = s["$ref"];
      const std::string prefix = "#/$defs/";
      if (ref.rfind(prefix, 0) != 0) {
        errors.push_back(path + ": unsupported $ref " + ref);
        return;
      }
      check(root_.at("$defs").at(ref.substr(prefix.size())), v, path);
      return;
    }
    if (s.contains("type")) {
      bool ok = false;
      if (s["type"].is_array()) {
        for (const auto& t : s["type"]) ok = ok || has_type(v, t.get<std::string>());
      } else {
        ok = has_type(v, s["type"].get<std::string>());
      }
      if (!ok) {
        errors.push_back(path + ": expected type " + s["type"].dump() + ", got " + v.dump().substr(0, 40));
        return;
      }
    }
    if (s.contains("const") && v != s["const"]) errors.push_back(path + ": expected " + s["const"].dump());
    if (s.contains("enum")) {
      bool found = false;
      for (const auto& e : s["enum"]) found = found || e == v;
      if (!found) errors.push_back(path + ": " + v.dump() + " not in " + s["enum"].dump());
    }
    if (v.is_number()) {
      if (s.contains("minimum") && v.get<double>() < s["minimum"].get<double>()) {
        errors.push_back(path + ": below minimum " + s["minimum"].dump());
      }
      if (s.contains("maximum") && v.get<double>() > s["maximum"].get<double>()) {
        errors.push_back(path + ": above maximum " + s["maximum"].dump());
      }
    }
    if (v.is_string() && s.contains("minLength") && v.get<std::string>().size() < s["minLength"].get<std::size_t>()) {
      errors.push_back(path + ": shorter than " + s["minLength"].dump());
    }
    if (v.is_object()) {
      if (s.contains("required")) {
        for (const auto& r : s["required"]) {
          if (!v.contains(r.get<std::string>())) errors.push_back(path + "." + r.get<std::string>() + ": missing");
        }
      }
      const json props = s.value("properties", json::object());
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (props.contains(it.key())) {
          check(props[it.key()], it.value(), path + "." + it.key());
        } else if (s.contains("additionalProperties") && s["additionalProperties"] == false) {
          errors.push_back(path + "." + it.key() + ": not allowed");
        } else if (s.contains("additionalProperties") && s["additionalProperties"].is_object()) {
          check(s["additionalProperties"], it.value(), path + "." + it.key());
        }
      }
    }
    if (v.is_array() && s.contains("items")) {
      for (std::size_t i = 0; i < v.size(); ++i) check(s["items"], v[i], path + "[" + std::to_string(i) + "]");
    }
  }

  std::vector<std::string> errors;

 private:
  const json& root_;
};

}  // namespace

std::vector<std::string> validate(const json& schema, const json& doc) {
  Validator v(schema);
  v.check(schema, doc, "$");
  return v.errors;
}

namespace {

template <typename J>
const J& resolve(const J& root, const J& s) {
  if (!s.contains("$ref")) return s;
  const std::string ref = s["$ref"];
  return root["$defs"][ref.substr(std::string("#/$defs/").size())];
}

template <typename J>
std::string type_words(const J& s) {
  if (s.contains("const")) return "`" + s["const"].dump() + "`";
  if (s.contains("enum")) {
    std::string out;
    for (const auto& e : s["enum"]) {
      out += (out.empty() ? "" : ", ") + ("`" + (e.is_string() ? e.template get<std::string>() : e.dump()) + "`");
    }
    return out;
  }
  if (!s.contains("type")) return "";
  if (s["type"].is_array()) {
    std::string out;
    for (const auto& t : s["type"]) out += (out.empty() ? "" : " or ") + t.template get<std::string>();
    return out;
  }
  return s["type"].template get<std::string>();
}

template <typename J>
void walk(const J& root, const J& node, const std::string& path, std::vector<SchemaField>& out,
          std::vector<std::string>* open) {
  const J& s = resolve(root, node);
  if (s.contains("items")) walk(root, s["items"], path + "[]", out, open);
  // A map (keys of the writer's choosing, values of one schema): open.
  if (open != nullptr && s.contains("additionalProperties") && s["additionalProperties"].is_object()) {
    open->push_back(path);
  }
  if (!s.contains("properties")) return;
  if (open != nullptr && !(s.contains("additionalProperties") && s["additionalProperties"] == false)) {
    open->push_back(path);
  }
  for (auto it = s["properties"].begin(); it != s["properties"].end(); ++it) {
    const J& p = resolve(root, it.value());
    const std::string child = path.empty() ? it.key() : path + "." + it.key();
    // The description at the use wins over the definition's.
    const J& d = it.value().contains("description") ? it.value() : p;
    out.push_back({child, type_words(p), d.value("description", "")});
    walk(root, it.value(), child, out, open);
  }
}

void paths_of(const json& v, const std::string& path, std::vector<std::string>& out) {
  if (v.is_array()) {
    for (const json& e : v) paths_of(e, path + "[]", out);
  } else if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it) {
      const std::string child = path.empty() ? it.key() : path + "." + it.key();
      out.push_back(child);
      paths_of(it.value(), child, out);
    }
  }
}

}  // namespace

std::vector<SchemaField> schema_fields(const nlohmann::json& schema, std::vector<std::string>* open) {
  std::vector<SchemaField> out;
  walk(schema, schema, "", out, open);
  return out;
}

std::vector<SchemaField> schema_fields(const nlohmann::ordered_json& schema) {
  std::vector<SchemaField> out;
  walk(schema, schema, "", out, nullptr);
  return out;
}

std::vector<std::string> document_paths(const nlohmann::json& doc) {
  std::vector<std::string> out;
  paths_of(doc, "", out);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

nlohmann::ordered_json load_ordered_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  return nlohmann::ordered_json::parse(in);
}

json load_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  return json::parse(in);
}

}  // namespace memdiag::testkit
