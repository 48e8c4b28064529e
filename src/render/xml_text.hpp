// Internal to memdiag::render: text made safe for XML and HTML.
#pragma once

#include <string>
#include <string_view>

namespace memdiag::detail {

// &, <, >, " and ' escaped; control characters other than tab, newline and
// carriage return, and bytes that are not well-formed UTF-8, become U+FFFD.
std::string xml_escape(std::string_view in);

}  // namespace memdiag::detail
