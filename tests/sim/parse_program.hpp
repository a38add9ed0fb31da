#pragma once
// An NPU program from its text form, the test failing with the parser's
// message when it does not parse (the sim tests write programs as text).

#include <spool/npu/text.hpp>

#include <doctest/doctest.h>

#include <string>

namespace spool::sim_test {

inline npu::Program parse_program(const std::string& text) {
  auto parsed = npu::parse(text, "test.npu");
  REQUIRE_MESSAGE(parsed.ok(), parsed.error().render());
  return parsed.take();
}

}  // namespace spool::sim_test
