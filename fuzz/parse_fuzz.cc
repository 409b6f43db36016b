// libFuzzer target for the IR text parser and printer (docs/fuzzing.md says how to build and run it). Any
// input must parse or fail with an error; neither may crash, hang, leak or trip a sanitizer. An input that
// parses must round-trip: printing it, parsing the printed text and printing again gives the same bytes, and
// the printed text must itself parse (the printer never writes what the parser rejects). A broken round trip
// aborts, which libFuzzer reports as a crash and saves as a reproducer. A parsed graph also goes through the
// verifier, the next step `lms opt` takes with text: it re-runs every op's shape rule on whatever types and
// attributes the text declares, and must report problems as errors, never crash on them.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "lms/ir/parser.h"
#include "lms/ir/printer.h"
#include "lms/ir/verifier.h"

namespace {

[[noreturn]] void die(const char* what, const std::string& a, const std::string& b) {
  std::fprintf(stderr, "parse_fuzz: %s\n--- first ---\n%s\n--- second ---\n%s\n", what, a.c_str(), b.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto g = lms::parse_graph(text, "fuzz.lms");
  if (!g) {
    // Errors are one line with a location, whatever the input held.
    const std::string msg = g.error().str();
    if (msg.find('\n') != std::string::npos || g.error().where.rfind("fuzz.lms:", 0) != 0)
      die("malformed error message", msg, "");
    return 0;
  }
  const std::string printed = lms::print_graph(*g);
  auto again = lms::parse_graph(printed, "printed.lms");
  if (!again) die("printed text does not parse", printed, again.error().str());
  const std::string reprinted = lms::print_graph(*again);
  if (reprinted != printed) die("print -> parse -> print is not byte-identical", printed, reprinted);
  (void)lms::verify_graph(*g);
  return 0;
}
