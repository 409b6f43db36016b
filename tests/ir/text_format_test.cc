// Tests of the IR text format (ir/printer.h, ir/parser.h; docs/ir.md is the reference): canonical text
// parses and prints back byte for byte; loose spellings (spacing, comments, missing categories, attribute
// order) print canonically; every parse error names the right line:column and says what was expected; and
// random graphs built with the Graph API survive print -> parse -> print unchanged.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "lms/ir/graph.h"
#include "lms/ir/parser.h"
#include "lms/ir/printer.h"

namespace lms {
namespace {

// Parses `text`, failing the test with the error if it does not parse.
Graph parse_ok(std::string_view text) {
  auto g = parse_graph(text);
  EXPECT_TRUE(g.has_value()) << g.error().str() << "\nin:\n" << text;
  return g ? std::move(*g) : Graph{};
}

// Parses and prints.
std::string reprint(std::string_view text) { return print_graph(parse_ok(text)); }

// Floats compare by bits, except that every NaN equals every NaN: the text spells them all "nan".
bool same_attribute(const Attribute& a, const Attribute& b) {
  if (a.index() != b.index()) return false;
  if (const double* x = std::get_if<double>(&a)) {
    double y = std::get<double>(b);
    if (std::isnan(*x) || std::isnan(y)) return std::isnan(*x) && std::isnan(y);
    return std::memcmp(x, &y, sizeof y) == 0;
  }
  return a == b;
}

// Structural equality, by ids (both graphs are expected in the same storage order).
void expect_same_graph(const Graph& a, const Graph& b) {
  EXPECT_EQ(a.name(), b.name());
  EXPECT_EQ(a.scheduled(), b.scheduled());
  ASSERT_EQ(a.num_nodes(), b.num_nodes());
  ASSERT_EQ(a.num_values(), b.num_values());
  for (NodeId n : a.node_ids()) {
    const Node &x = a.node(n), &y = b.node(n);
    EXPECT_EQ(x.op, y.op) << n.v;
    EXPECT_EQ(x.category, y.category) << n.v;
    EXPECT_EQ(x.inputs, y.inputs) << n.v;
    EXPECT_EQ(x.control_inputs, y.control_inputs) << n.v;
    EXPECT_EQ(x.outputs, y.outputs) << n.v;
    ASSERT_EQ(x.attrs.entries().size(), y.attrs.entries().size()) << n.v;
    for (size_t i = 0; i < x.attrs.entries().size(); ++i) {
      EXPECT_EQ(x.attrs.entries()[i].first, y.attrs.entries()[i].first);
      EXPECT_TRUE(same_attribute(x.attrs.entries()[i].second, y.attrs.entries()[i].second))
          << to_string(x.attrs.entries()[i].second) << " vs " << to_string(y.attrs.entries()[i].second);
    }
  }
  for (uint32_t i = 0; i < a.num_values(); ++i) {
    const Value &x = a.value(ValueId{i}), &y = b.value(ValueId{i});
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.type, y.type);
    EXPECT_EQ(x.placement, y.placement);
    EXPECT_EQ(x.producer, y.producer);
    EXPECT_EQ(x.output_index, y.output_index);
    EXPECT_EQ(x.consumers, y.consumers);
  }
  EXPECT_EQ(a.outputs(), b.outputs());
}

// Every syntactic feature in canonical spelling: a scheduled header, a name with '.' and '-', sources,
// every attribute kind (strings with escapes, negative ints, int lists, floats 1e-05 0.1 1.0 -inf, bools),
// a multi-output node, host placement, control inputs, every category, a forward reference (%s reads
// %later), a name starting with a digit, a scalar type, and a return line.
constexpr std::string_view kCanonical = R"(graph net-1.v2 scheduled {
  %x = input() : f32[8,3,32,32] #fwd
  %w = param() {init = "he"} : f32[16,3,3,3] #fwd
  %g = param() {init = "a\"b\\c\nd\te\x01f"} : f32[16] #fwd
  %b = param() : f32[16] #fwd
  %c = conv2d(%x, %w) {stride = [2, 2], pad = [-1, 0], groups = 1} : f32[8,16,16,16] #fwd
  %y, %y.mean, %y.invstd = batch_norm(%c, %g, %b) {eps = 1e-05, momentum = 0.1} : f32[8,16,16,16], f32[16], f32[16] #fwd
  %h = swap_out(%y) : f32[8,16,16,16] @host #swap
  %z = swap_in(%h) after(%x, %y) : f32[8,16,16,16] #swap
  %s = add(%z, %later) : f32[8,16,16,16] #bwd
  %later = scale(%z) {factor = 1.0} : f32[8,16,16,16] #recompute
  %t = reshape(%s) {shape = [8, -1]} : f32[8,4096] #bwd
  %mm = matmul(%t, %t) {transpose_a = false, transpose_b = true} : f32[8,8] #bwd
  %k = constant() {value = -inf} : f32[] #fwd
  %0_a-b = bias_add(%mm, %k) {axis = -9223372036854775808} : bf16[8,0] @host #upd
  %m = state() {init = "zeros"} : i64[] #upd
  return %mm, %y.invstd
}
)";

TEST(TextRoundTrip, CanonicalTextPrintsBackUnchanged) {
  Graph g = parse_ok(kCanonical);
  EXPECT_EQ(print_graph(g), kCanonical);
  EXPECT_EQ(g.name(), "net-1.v2");
  EXPECT_TRUE(g.scheduled());
  EXPECT_EQ(g.num_nodes(), 15u);

  ValueId y = *g.find_value("y"), invstd = *g.find_value("y.invstd"), mm = *g.find_value("mm");
  EXPECT_EQ(g.value(invstd).producer, g.value(y).producer);
  EXPECT_EQ(g.value(invstd).output_index, 2);
  EXPECT_EQ(g.value(*g.find_value("h")).placement, Placement::host);
  EXPECT_EQ(g.value(*g.find_value("0_a-b")).placement, Placement::host);
  EXPECT_EQ(g.value(*g.find_value("z")).placement, Placement::device);
  EXPECT_EQ(g.outputs(), (std::vector<ValueId>{mm, invstd}));

  // The forward reference resolves to the later node's output.
  NodeId s = g.value(*g.find_value("s")).producer;
  EXPECT_EQ(g.node(s).inputs[1], *g.find_value("later"));
  EXPECT_EQ(g.node(s).category, Category::bwd);

  // after(%x, %y) names the nodes producing %x and %y.
  NodeId z = g.value(*g.find_value("z")).producer;
  EXPECT_EQ(g.node(z).control_inputs,
            (std::vector<NodeId>{g.value(*g.find_value("x")).producer, g.value(y).producer}));

  // Attribute values arrive decoded and with their kinds.
  const Node& gnode = g.node(g.value(*g.find_value("g")).producer);
  EXPECT_EQ(gnode.attrs.get_string("init", ""), std::string("a\"b\\c\nd\te\x01" "f"));
  const Node& bn = g.node(g.value(y).producer);
  EXPECT_EQ(bn.attrs.get_float("eps", 0), 1e-5);
  const Node& c = g.node(g.value(*g.find_value("c")).producer);
  EXPECT_EQ(c.attrs.get_ints("pad", {}), (IntList{-1, 0}));
  EXPECT_EQ(g.node(g.value(*g.find_value("0_a-b")).producer).attrs.get_int("axis", 0),
            std::numeric_limits<int64_t>::min());
  EXPECT_TRUE(g.node(g.value(mm).producer).attrs.get_bool("transpose_b", false));
  EXPECT_EQ(g.value(*g.find_value("k")).type, (TensorType{DType::f32, {}}));
}

TEST(TextRoundTrip, LooseSpellingPrintsCanonically) {
  // Tabs and extra spaces, CRLF line ends, comments of both kinds (and `//` inside a string is not one),
  // GoLden-test RUN/CHECK lines around the graph, a missing category (fwd), an explicit @device, attributes
  // out of declared order, an int for a float attribute, control inputs out of order and repeated.
  std::string_view loose =
      "# RUN: lms opt %s --passes verify\n"
      "\n"
      "// a comment\n"
      "graph   g{   # header comment\n"
      "\t%x=input( ):f32[ 8 , 16 ]\r\n"
      "  %y ,%y.m,%y.v = batch_norm(%x,%x,%x){momentum=1,eps=1e-5}:f32[8,16],f32[16]@device,f32[16]   #bwd\n"
      "  # a comment line inside the graph\n"
      "  %p = param() {init = \"http://x\"} : f32[16]   // trailing comment\n"
      "  %z = relu(%y) after(%y.v, %x, %p, %x) : f32[8,16] #fwd # trailing comment\n"
      "  return %z\n"
      "}  // done\n"
      "# CHECK: %z = relu\n";
  EXPECT_EQ(reprint(loose),
            "graph g {\n"
            "  %x = input() : f32[8,16] #fwd\n"
            "  %y, %y.m, %y.v = batch_norm(%x, %x, %x) {eps = 1e-05, momentum = 1.0} : f32[8,16], f32[16], "
            "f32[16] #bwd\n"
            "  %p = param() {init = \"http://x\"} : f32[16] #fwd\n"
            "  %z = relu(%y) after(%x, %y, %p) : f32[8,16] #fwd\n"
            "  return %z\n"
            "}\n");
}

TEST(TextRoundTrip, EmptyGraphAndNoNewlineAtEnd) {
  EXPECT_EQ(reprint("graph g {\n}"), "graph g {\n}\n");
  EXPECT_EQ(reprint("graph scheduled scheduled {\n}\n"), "graph scheduled scheduled {\n}\n");
}

// One attribute spelling in, the canonical spelling out, for every kind and the awkward values.
TEST(TextRoundTrip, AttributeValues) {
  struct Case {
    std::string_view op_and_attr;  // "OP ATTR"
    std::string_view in;
    std::string_view out;
  };
  const Case cases[] = {
      {"scale factor", "0.1", "0.1"},
      {"scale factor", "1e-05", "1e-05"},
      {"scale factor", "1e-5", "1e-05"},
      {"scale factor", "1.0", "1.0"},
      {"scale factor", "3", "3.0"},
      {"scale factor", "-2.50", "-2.5"},
      {"scale factor", "1E+300", "1e+300"},
      {"scale factor", "5e-324", "5e-324"},
      {"scale factor", "-0.0", "-0.0"},
      {"scale factor", "inf", "inf"},
      {"scale factor", "-inf", "-inf"},
      {"scale factor", "nan", "nan"},
      {"scale factor", "123456789.125", "123456789.125"},
      {"bias_add axis", "-1", "-1"},
      {"bias_add axis", "-0", "0"},
      {"bias_add axis", "9223372036854775807", "9223372036854775807"},
      {"bias_add axis", "-9223372036854775808", "-9223372036854775808"},
      {"reshape shape", "[]", "[]"},
      {"reshape shape", "[ -1 ]", "[-1]"},
      {"reshape shape", "[1,-2,  3]", "[1, -2, 3]"},
      {"matmul transpose_a", "true", "true"},
      {"matmul transpose_a", "false", "false"},
      {"param init", R"("")", R"("")"},
      {"param init", R"("\x41\x7f\x0d\r")", "\"A\x7f\\x0d\\x0d\""},
      {"param init", R"("\xc3\xa9 raw: é")", "\"\xc3\xa9 raw: \xc3\xa9\""},
      {"param init", R"("// not a comment # nor this")", R"("// not a comment # nor this")"},
  };
  for (const Case& c : cases) {
    std::string_view spec = c.op_and_attr;
    std::string op(spec.substr(0, spec.find(' '))), attr(spec.substr(spec.find(' ') + 1));
    std::string text = fmt::format("graph g {{\n  %v = {}() {{{} = {}}} : f32[2] #fwd\n}}\n", op, attr, c.in);
    std::string want = fmt::format("graph g {{\n  %v = {}() {{{} = {}}} : f32[2] #fwd\n}}\n", op, attr, c.out);
    std::string got = reprint(text);
    EXPECT_EQ(got, want) << c.in;
    EXPECT_EQ(reprint(got), got) << c.in;
  }
}

TEST(TextRoundTrip, GraphBuiltWithTheApiPrintsAsDocumented) {
  Graph g("model");
  auto f32 = [](Shape s) { return std::vector<TensorType>{TensorType{DType::f32, std::move(s)}}; };
  auto names = [](std::string n) { return std::vector<std::string>{std::move(n)}; };
  NodeId x = g.add_node(Op::input, {}, f32({4}), names("x"));
  NodeId h = g.add_node(Op::swap_out, {}, f32({4}), names("x.host"), Category::swap);
  NodeId r = g.add_node(Op::relu, {}, f32({4}), names("x"), Category::fwd);  // clashes: becomes x.1
  g.set_inputs(h, {g.first_output(x)});
  g.set_inputs(r, {g.first_output(x)});
  g.add_control_input(r, h);
  g.set_outputs({g.first_output(r)});
  std::string text = print_graph(g);
  EXPECT_EQ(text,
            "graph model {\n"
            "  %x = input() : f32[4] #fwd\n"
            "  %x.host = swap_out(%x) : f32[4] @host #swap\n"
            "  %x.1 = relu(%x) after(%x.host) : f32[4] #fwd\n"
            "  return %x.1\n"
            "}\n");
  expect_same_graph(parse_ok(text), g);
  EXPECT_EQ(print_node(g, r), "%x.1 = relu(%x) after(%x.host) : f32[4] #fwd");
}

TEST(TextParse, PlacementComesFromTheTextNotTheOp) {
  // swap_out's outputs default to host, but without @host the text says device; the verifier judges it.
  Graph g = parse_ok("graph g {\n  %x = input() : f32[1]\n  %h = swap_out(%x) : f32[1]\n}\n");
  EXPECT_EQ(g.value(*g.find_value("h")).placement, Placement::device);
}

TEST(TextParse, ControlInputMayNameAnyOutputOfTheNode) {
  Graph g = parse_ok(
      "graph g {\n"
      "  %x = input() : f32[2,3]\n"
      "  %y, %y.mean, %y.invstd = layer_norm(%x, %x, %x) : f32[2,3], f32[2], f32[2]\n"
      "  %z = relu(%x) after(%y.invstd) : f32[2,3]\n"
      "}\n");
  EXPECT_NE(print_graph(g).find("%z = relu(%x) after(%y) : f32[2,3] #fwd"), std::string::npos) << print_graph(g);
}

std::string read_file(const std::string& path) {
  std::string text;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return text;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
  std::fclose(f);
  return text;
}

// The example at the top of docs/ir.md is canonical text: it parses and prints back unchanged.
TEST(TextDocs, ExampleInIrMdRoundTrips) {
  std::string doc = read_file(fmt::format("{}/docs/ir.md", LMS_SOURCE_DIR));
  size_t section = doc.find("## An example");
  ASSERT_NE(section, std::string::npos);
  size_t open = doc.find("```\n", section);
  size_t close = doc.find("```\n", open + 4);
  ASSERT_NE(close, std::string::npos);
  std::string example = doc.substr(open + 4, close - open - 4);
  std::string graph = example.substr(example.find("graph "));  // without the leading comment line
  EXPECT_EQ(reprint(example), graph);
}

TEST(TextParse, SeveralRequiredAttributes) {
  // Each attribute is checked as it is read; that check must not mistake the others' absence for an error.
  Graph g = parse_ok("graph g {\n  %x = input() : f32[4]\n  %s = slice(%x) {end = 2, axis = 0, start = 1} : f32[1]\n}\n");
  EXPECT_EQ(print_node(g, NodeId{1}), "%s = slice(%x) {axis = 0, start = 1, end = 2} : f32[1] #fwd");
  auto missing = parse_graph("graph g {\n  %x = input() : f32[4]\n  %s = slice(%x) {axis = 0, end = 2} : f32[1]\n}\n");
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().where, "<input>:3:8");
  EXPECT_NE(missing.error().what.find("op 'slice' needs attribute 'start'"), std::string::npos) << missing.error().str();
}

// The seeds of the fuzzer (fuzz/corpus) are valid graphs; keeping them so keeps the fuzzer starting from
// inputs that reach deep into the parser, as the op library changes.
TEST(TextParse, FuzzCorpusSeedsRoundTrip) {
  const char* seeds[] = {"canonical.lms", "golden_style.lms", "loose.lms", "training_step.lms", "empty_graph.lms"};
  for (const char* name : seeds) {
    std::string path = fmt::format("{}/fuzz/corpus/{}", LMS_SOURCE_DIR, name);
    std::string text = read_file(path);
    ASSERT_FALSE(text.empty()) << path;
    auto g = parse_graph(text, path);
    ASSERT_TRUE(g.has_value()) << g.error().str();
    std::string printed = print_graph(*g);
    EXPECT_EQ(reprint(printed), printed) << name;
  }
}

// Hostile sizes must cost about linear time: long reference lists in any order, long attribute lists, many
// blank lines. The bounds are loose; a quadratic path would take minutes here.
TEST(TextParse, LargeInputsStayLinear) {
  constexpr int kCount = 100000;
  std::string defs, refs;
  for (int i = 0; i < kCount; ++i) defs += fmt::format("  %v{} = input() : f32[1]\n", i);
  for (int i = kCount - 1; i >= 0; --i) refs += fmt::format("{}%v{}", i == kCount - 1 ? "" : ", ", i);
  std::string text = "graph g {\n" + defs + "  %y = add(" + refs + ") after(" + refs + ") : f32[1]\n  return " +
                     refs + "\n}\n";
  Graph g = parse_ok(text);
  EXPECT_EQ(g.node(NodeId{kCount}).control_inputs.size(), static_cast<size_t>(kCount));
  EXPECT_EQ(g.node(NodeId{kCount}).inputs.size(), static_cast<size_t>(kCount));

  std::string attrs;
  for (int i = 0; i < kCount; ++i) attrs += fmt::format("{}value = {}", i ? ", " : "", i);
  auto dup = parse_graph("graph g {\n  %c = constant() {" + attrs + "} : f32[1]\n}\n");
  ASSERT_FALSE(dup.has_value());
  EXPECT_EQ(dup.error().what, "duplicate attribute 'value'");

  std::string blank(10 * kCount, '\n');
  EXPECT_EQ(reprint("graph g {" + blank + "}" + blank), "graph g {\n}\n");
}

// --- Errors -----------------------------------------------------------------------------------------------

struct ErrorCase {
  std::string_view name;
  std::string text;
  std::string_view where;  // "LINE:COL"
  std::string_view what;   // a substring of the message
};

// A graph around `body` (node lines), so that the body's first line is line 2.
std::string in_graph(std::string_view body) { return fmt::format("graph g {{\n{}}}\n", body); }

TEST(TextErrors, NameTheLineColumnAndTheProblem) {
  const std::string x = "  %x = input() : f32[8,16]\n";
  const ErrorCase cases[] = {
      {"empty", "", "1:1", "empty input: expected 'graph NAME {'"},
      {"only comments", "# RUN: x\n\n// y\n", "4:1", "empty input: expected 'graph NAME {'"},
      {"binary", std::string("\x01\x02\xff garbage", 11), "1:1", "unexpected character '\\x01'"},
      {"non-utf8 in a node", in_graph("  %x = \xfe\xff()\n"), "2:8", "unexpected character '\\xfe'"},
      {"nul byte", in_graph(std::string("  %x = input(\0) : f32[1]\n", 25)), "2:14", "unexpected character '\\x00'"},
      {"not a graph", "graf g {\n}\n", "1:1", "expected 'graph NAME {', got 'graf'"},
      {"no brace", "graph g\n}\n", "1:8", "expected '{', got end of line"},
      {"bad graph name", "graph 1g {\n}\n", "1:7", "expected a graph name, got '1g'"},
      {"unknown op", in_graph(x + "  %y = foo(%x) : f32[8,16]\n"), "3:8", "unknown op 'foo'"},
      {"unknown attribute", in_graph("  %c = constant() {valu = 1.0} : f32[1]\n"), "2:20",
       "op 'constant' has no attribute 'valu'"},
      {"wrong attribute kind", in_graph("  %c = constant() {value = \"a\"} : f32[1]\n"), "2:28",
       "attribute 'value' of op 'constant' must be float, got string"},
      {"missing required attribute", in_graph(x + "  %y = scale(%x) : f32[8,16]\n"), "3:8",
       "op 'scale' needs attribute 'factor'"},
      {"duplicate attribute", in_graph("  %c = constant() {value = 1.0, value = 2.0} : f32[1]\n"), "2:33",
       "duplicate attribute 'value'"},
      {"duplicate definition", in_graph(x + "  %y = relu(%x) : f32[8,16]\n  %x = relu(%y) : f32[8,16]\n"), "4:3",
       "duplicate definition of %x (first defined at line 2)"},
      {"duplicate on one line", in_graph(x + "  %y, %y, %z = batch_norm(%x, %x, %x) : f32[1], f32[1], f32[1]\n"),
       "3:7", "duplicate definition of %y (first defined at line 3)"},
      {"undefined input", in_graph(x + "  %y = add(%x, %q) : f32[8,16]\n"), "3:16", "undefined value %q"},
      {"undefined after", in_graph(x + "  %y = relu(%x) after(%q) : f32[8,16]\n"), "3:23", "undefined value %q"},
      {"undefined return", in_graph(x + "  return %x, %nope\n"), "3:14", "undefined value %nope"},
      {"too few names", in_graph(x + "  %y = batch_norm(%x, %x, %x) : f32[8,16], f32[16], f32[16]\n"), "3:3",
       "batch_norm has 3 outputs, got 1 name"},
      {"too many names", in_graph(x + "  %y, %z = relu(%x) : f32[8,16], f32[8,16]\n"), "3:3",
       "relu has 1 output, got 2 names"},
      {"too few types", in_graph(x + "  %y, %m, %v = batch_norm(%x, %x, %x) : f32[8,16], f32[16]\n"), "3:41",
       "batch_norm has 3 outputs, got 2 types"},
      {"missing close brace", "graph g {\n" + x, "3:1",
       "expected '}' to close graph 'g' (opened at line 1), got end of input"},
      {"text after close brace", in_graph(x) + "# fine\ngraph h {\n", "5:1",
       "expected only comments after the closing '}', got 'graph'"},
      {"same line after close brace", "graph g {\n} x\n", "2:3", "expected end of line, got 'x'"},
      {"unterminated string", in_graph("  %p = param() {init = \"he} : f32[1]\n"), "2:24", "unterminated string"},
      {"escape at end", in_graph("  %p = param() {init = \"he\\\n"), "2:24", "unterminated string"},
      {"unknown escape", in_graph("  %p = param() {init = \"h\\q\"} : f32[1]\n"), "2:26", "unknown escape '\\q'"},
      {"bad hex escape", in_graph("  %p = param() {init = \"\\x4\"} : f32[1]\n"), "2:25", "two hex digits"},
      {"raw control in string", in_graph("  %p = param() {init = \"a\x01\"} : f32[1]\n"), "2:26",
       "control character '\\x01' in string"},
      {"int overflow", in_graph("  %b = bias_add() {axis = 9223372036854775808} : f32[1]\n"), "2:27",
       "integer literal '9223372036854775808' does not fit in 64 bits"},
      {"negative int overflow", in_graph("  %b = bias_add() {axis = -9223372036854775809} : f32[1]\n"), "2:27",
       "does not fit in 64 bits"},
      {"list overflow", in_graph("  %r = reshape() {shape = [1, 99999999999999999999]} : f32[1]\n"), "2:31",
       "does not fit in 64 bits"},
      {"float in int list", in_graph("  %r = reshape() {shape = [1, 2.5]} : f32[1]\n"), "2:31",
       "expected an integer, got '2.5'"},
      {"float out of range", in_graph("  %c = constant() {value = 1e999} : f32[1]\n"), "2:28",
       "float literal '1e999' is out of range"},
      {"malformed number", in_graph("  %c = constant() {value = 1e} : f32[1]\n"), "2:28", "malformed number '1e'"},
      {"number run into a name", in_graph("  %c = constant() {value = 12ab} : f32[1]\n"), "2:28",
       "malformed number '12ab'"},
      {"bad attribute value", in_graph("  %c = constant() {value = yes} : f32[1]\n"), "2:28",
       "expected an attribute value"},
      {"huge dim", in_graph("  %x = input() : f32[8,99999999999999999999]\n"), "2:24", "does not fit in 64 bits"},
      {"negative dim", in_graph("  %x = input() : f32[8,-1]\n"), "2:24", "dimension must be >= 0, got -1"},
      {"float dim", in_graph("  %x = input() : f32[8.0]\n"), "2:22", "expected a dimension, got '8.0'"},
      {"unknown dtype", in_graph("  %x = input() : c64[8]\n"), "2:18", "unknown dtype 'c64'"},
      {"unknown category", in_graph("  %x = input() : f32[8] #fw\n"), "2:25", "unknown category '#fw'"},
      {"unknown placement", in_graph("  %x = input() : f32[8] @gpu\n"), "2:26", "placement"},
      {"missing paren", in_graph(x + "  %y = relu(%x : f32[8,16]\n"), "3:16", "expected ',' or ')', got ':'"},
      {"missing types", in_graph(x + "  %y = relu(%x)\n"), "3:16", "':' and the output types, got end of line"},
      {"missing equals", in_graph("  %x input() : f32[1]\n"), "2:6", "expected ',' or '=', got 'input'"},
      {"bare percent", in_graph("  % = input() : f32[1]\n"), "2:4", "expected a value name after '%'"},
      {"node after return", in_graph(x + "  return %x\n" + x), "4:3", "expected '}' after the return line"},
      {"empty return", in_graph(x + "  return\n"), "3:9", "expected a value ('%name') to return, got end of line"},
      {"junk line", in_graph("  hello\n"), "2:3", "expected a node ('%name = op(...)'), 'return' or '}'"},
      {"junk after category", in_graph("  %x = input() : f32[8] #fwd junk\n"), "2:30", "expected end of line"},
  };
  for (const ErrorCase& c : cases) {
    auto g = parse_graph(c.text, "t.lms");
    ASSERT_FALSE(g.has_value()) << c.name;
    EXPECT_EQ(g.error().where, fmt::format("t.lms:{}", c.where)) << c.name << ": " << g.error().str();
    EXPECT_NE(g.error().what.find(c.what), std::string::npos) << c.name << ": " << g.error().str();
    EXPECT_EQ(g.error().str().find('\n'), std::string::npos) << c.name << ": errors are one line";
  }
}

TEST(TextErrors, DefaultFileNameAndOneLine) {
  auto g = parse_graph("graph g {\n  %x = nope() : f32[1]\n}\n");
  ASSERT_FALSE(g.has_value());
  EXPECT_EQ(g.error().str(), "<input>:2:8: unknown op 'nope'");
}

// --- Random graphs ----------------------------------------------------------------------------------------

// Builds a random graph with the Graph API: random ops and names, attributes of the declared kinds with
// awkward values (any bytes in strings, any bit pattern in floats, extreme ints), random edges in both
// directions, control inputs, placements, categories and outputs. Shape rules are not consulted: the
// format has to carry any graph, valid or not.
class RandomGraphs {
 public:
  explicit RandomGraphs(uint32_t seed) : rng_(seed) {}

  Graph make() {
    Graph g(graph_name());
    g.set_scheduled(coin());
    size_t n = uniform(0, 30);
    std::vector<NodeId> nodes;
    for (size_t i = 0; i < n; ++i) {
      auto defs = all_op_defs();
      const OpDef& d = defs[uniform(0, defs.size() - 1)];
      std::vector<TensorType> types;
      std::vector<std::string> names;
      for (size_t k = 0; k < d.outputs.size(); ++k) {
        types.push_back(tensor_type());
        names.push_back(value_name());
      }
      NodeId id = g.add_node(d.op, attributes(d), types, names, static_cast<Category>(uniform(0, kNumCategories - 1)));
      for (ValueId v : g.node(id).outputs) g.set_placement(v, coin() ? Placement::host : Placement::device);
      nodes.push_back(id);
    }
    if (g.num_values() > 0) {
      for (NodeId id : nodes) {
        std::vector<ValueId> ins;
        for (size_t k = uniform(0, 4); k > 0; --k) ins.push_back(any_value(g));
        g.set_inputs(id, ins);
        for (size_t k = uniform(0, 2); k > 0; --k) g.add_control_input(id, nodes[uniform(0, nodes.size() - 1)]);
      }
      std::vector<ValueId> outs;
      for (size_t k = uniform(0, 3); k > 0; --k) outs.push_back(any_value(g));
      g.set_outputs(outs);
    }
    return g;
  }

 private:
  size_t uniform(size_t lo, size_t hi) { return std::uniform_int_distribution<size_t>(lo, hi)(rng_); }
  bool coin() { return uniform(0, 1) == 1; }
  ValueId any_value(const Graph& g) { return ValueId{static_cast<uint32_t>(uniform(0, g.num_values() - 1))}; }

  std::string chars(std::string_view alphabet, size_t len) {
    std::string s;
    for (size_t i = 0; i < len; ++i) s += alphabet[uniform(0, alphabet.size() - 1)];
    return s;
  }
  static constexpr std::string_view kLetters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_";
  static constexpr std::string_view kNameChars = "abcxyzABC_0123456789.-";
  std::string graph_name() { return chars(kLetters, 1) + chars(kNameChars, uniform(0, 6)); }
  std::string value_name() { return chars(kNameChars, uniform(1, 4)); }  // clashes get ".N" from the graph

  int64_t extreme_int() {
    switch (uniform(0, 3)) {
      case 0: return std::numeric_limits<int64_t>::min();
      case 1: return std::numeric_limits<int64_t>::max();
      case 2: return static_cast<int64_t>(uniform(0, 20)) - 10;
      default: return static_cast<int64_t>(rng_());
    }
  }

  TensorType tensor_type() {
    TensorType t{static_cast<DType>(uniform(0, kNumDTypes - 1)), {}};
    for (size_t r = uniform(0, 4); r > 0; --r)
      t.shape.push_back(coin() ? static_cast<int64_t>(uniform(0, 300)) : std::numeric_limits<int64_t>::max());
    return t;
  }

  Attribute value_of(AttrKind k) {
    switch (k) {
      case AttrKind::Int: return extreme_int();
      case AttrKind::Float: {
        if (coin()) return static_cast<double>(extreme_int()) / 7.0;
        uint64_t bits = (uint64_t{rng_()} << 32) | rng_();
        double d;
        std::memcpy(&d, &bits, sizeof d);
        return d;  // any bit pattern: NaNs, infinities, subnormals, -0.0
      }
      case AttrKind::Bool: return coin();
      case AttrKind::String: {
        std::string s;
        for (size_t i = uniform(0, 12); i > 0; --i) s += static_cast<char>(uniform(0, 255));
        return s;
      }
      case AttrKind::IntList: {
        IntList l;
        for (size_t i = uniform(0, 4); i > 0; --i) l.push_back(extreme_int());
        return l;
      }
    }
    return int64_t{0};
  }

  // Required attributes always, optional ones half the time, in declared order (normalized).
  Attributes attributes(const OpDef& d) {
    Attributes a;
    for (const AttrSpec& s : d.attrs)
      if (!s.default_value || coin()) a.set(s.name, value_of(s.kind));
    return a;
  }

  std::mt19937 rng_;
};

TEST(TextRoundTrip, RandomGraphs) {
  RandomGraphs gen(20240601);
  for (int i = 0; i < 300; ++i) {
    Graph g = gen.make();
    std::string text = print_graph(g);
    auto parsed = parse_graph(text);
    ASSERT_TRUE(parsed.has_value()) << parsed.error().str() << "\n" << text;
    ASSERT_EQ(print_graph(*parsed), text);
    expect_same_graph(*parsed, g);
  }
}

// A graph far larger than resnet152's training graph round-trips; the times are printed for information only
// (speed is checked by bench/ir_bench, not by a timed test).
TEST(TextPrint, LargeGraphRoundTrips) {
  Graph g("big");
  constexpr int kNodes = 20000;
  auto t = std::vector<TensorType>{TensorType{DType::f32, {256, 64, 56, 56}}};
  ValueId prev = g.first_output(g.add_node(Op::input, {}, t, std::vector<std::string>{"x"}));
  Attributes conv;
  conv.set("stride", IntList{1, 1});
  conv.set("pad", IntList{1, 1});
  for (int i = 0; i < kNodes; ++i) {
    NodeId n = g.add_node(Op::conv2d, conv, t, std::vector<std::string>{fmt::format("layer{}.conv", i)});
    g.set_inputs(n, {prev, prev});
    prev = g.first_output(n);
  }
  auto start = std::chrono::steady_clock::now();
  std::string text = print_graph(g);
  double print_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  start = std::chrono::steady_clock::now();
  auto parsed = parse_graph(text);
  double parse_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(parsed.has_value()) << parsed.error().str();
  RecordProperty("print_ms", fmt::format("{:.1f}", print_ms));
  RecordProperty("parse_ms", fmt::format("{:.1f}", parse_ms));
  fmt::print("{} nodes, {} bytes: print {:.1f} ms, parse {:.1f} ms\n", kNodes + 1, text.size(), print_ms, parse_ms);
  EXPECT_EQ(print_graph(*parsed), text);
}

}  // namespace
}  // namespace lms
