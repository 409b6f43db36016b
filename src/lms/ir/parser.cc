// The IR text parser. It works in two phases (see Note [Two phases]): first every line is read into a
// statement, checking syntax, op names, attributes and result/type counts, and recording where each value is
// defined; then the graph is built from the statements and references are resolved. A hand-written cursor
// over one line at a time does the lexing: the format has one statement per line and no nesting deeper than
// an int list, so there is no recursion (no stack exhaustion on hostile input) and every byte is looked at a
// bounded number of times (linear time).
//
// Note [Two phases]: a reference may name a value defined on a later line (graphs are printed in storage
// order, which need not be a topological order, e.g. after a pass appends a node that an earlier node
// reads). So no reference can be resolved until every line is read, and the graph's nodes are created
// before any input is set. Names in the text are unique (checked in phase one), so Graph::add_node keeps
// them as they are and printing gives them back unchanged.
#include "lms/ir/parser.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

namespace lms {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_ident_start(char c) { return is_alpha(c) || c == '_'; }
bool is_ident_char(char c) { return is_ident_start(c) || is_digit(c); }
// Value names (after '%') and graph names may also hold '.' and '-': builders name values "layer1.0.conv1"
// and passes derive names like "x.swap-out".
bool is_name_char(char c) { return is_ident_char(c) || c == '.' || c == '-'; }
bool is_printable(char c) { return c > ' ' && c < 0x7f; }

// A byte string for an error message: printable ASCII as is, anything else as \xHH, so the message stays one
// printable line whatever the input holds. Long tokens are cut, since the message only has to locate them.
std::string escaped(std::string_view s) {
  constexpr size_t kMaxShown = 40;
  std::string out;
  for (size_t i = 0; i < s.size() && i < kMaxShown; ++i) {
    char c = s[i];
    if (c >= ' ' && c < 0x7f) out += c;
    else fmt::format_to(std::back_inserter(out), "\\x{:02x}", static_cast<unsigned char>(c));
  }
  if (s.size() > kMaxShown) out += "...";
  return out;
}

std::string plural(size_t n, std::string_view noun) { return fmt::format("{} {}{}", n, noun, n == 1 ? "" : "s"); }

// A reference to a value in the text: `%name`, where it stands (for errors in phase two).
struct Ref {
  std::string_view name;  // without '%'; a view into the parsed text
  size_t line = 0;
  size_t col = 0;  // of the '%'
};

// One node line, read but not yet resolved.
struct NodeStmt {
  Op op{};
  std::vector<Ref> results;
  std::vector<Ref> inputs;
  std::vector<Ref> after;
  Attributes attrs;  // normalized
  std::vector<TensorType> types;
  std::vector<Placement> placements;
  Category category = Category::fwd;
};

// Where a value is defined, and (in phase two) the value created for it.
struct Definition {
  size_t line = 0;
  ValueId value;
};

class Parser {
 public:
  Parser(std::string_view text, std::string_view file) : text_(text), file_(file) {}

  Result<Graph> run() {
    // One statement per line: the line count bounds the number of definitions (up to multi-output nodes),
    // and reserving once avoids rehashing a table of thousands of names as it grows.
    size_t lines = 1;
    for (char c : text_) lines += c == '\n';
    definitions_.reserve(lines);
    LMS_TRY_VOID(parse_header());
    LMS_TRY_VOID(parse_body());
    LMS_TRY_VOID(parse_trailer());
    return build();
  }

 private:
  // --- Lines and positions -------------------------------------------------------------------------------

  // Loads the next line into line_ (without its '\n'); false at the end of the text.
  bool next_line() {
    if (next_ >= text_.size()) return false;
    size_t end = text_.find('\n', next_);
    if (end == std::string_view::npos) end = text_.size();
    line_ = text_.substr(next_, end - next_);
    next_ = end + 1;
    ++line_no_;
    pos_ = 0;
    return true;
  }

  std::string where(size_t pos) const { return fmt::format("{}:{}:{}", file_, line_no_, pos + 1); }
  std::string where(size_t line, size_t col) const { return fmt::format("{}:{}:{}", file_, line, col); }

  // Where the end of the text is: just after its last byte.
  std::string where_eof() const {
    size_t last_nl = text_.rfind('\n');
    size_t lines = 0;
    for (char c : text_) lines += c == '\n';
    size_t col = last_nl == std::string_view::npos ? text_.size() : text_.size() - last_nl - 1;
    return fmt::format("{}:{}:{}", file_, lines + 1, col + 1);
  }

  template <class... Args>
  std::unexpected<Error> error_at(size_t pos, fmt::format_string<Args...> f, Args&&... args) const {
    return fail_at(where(pos), f, std::forward<Args>(args)...);
  }

  // The token at pos_ as an error message shows it.
  std::string found() const {
    if (at_comment_or_end(false)) return "end of line";
    size_t end = pos_;
    char c = line_[pos_];
    if (c == '%' || is_name_char(c)) {
      end = pos_ + 1;
      while (end < line_.size() && is_name_char(line_[end])) ++end;
    } else if (c == '"') {
      end = line_.find('"', pos_ + 1);
      end = end == std::string_view::npos ? line_.size() : end + 1;
    } else {
      end = pos_ + 1;
    }
    return fmt::format("'{}'", escaped(line_.substr(pos_, end - pos_)));
  }

  // "expected WHAT, got 'X'" at pos_; a byte that cannot begin any token (a control character, a non-ASCII
  // byte of binary garbage) is named as such, since "got" would not help.
  std::unexpected<Error> expected(std::string_view what) const {
    if (pos_ < line_.size() && !is_printable(line_[pos_]) && !is_space(line_[pos_]))
      return error_at(pos_, "unexpected character '{}' (expected {})", escaped(line_.substr(pos_, 1)), what);
    return error_at(pos_, "expected {}, got {}", what, found());
  }

  // --- Lexing on the current line ------------------------------------------------------------------------

  void skip_space() {
    while (pos_ < line_.size() && is_space(line_[pos_])) ++pos_;
  }
  char peek() const { return pos_ < line_.size() ? line_[pos_] : '\0'; }
  bool at(char c) const { return pos_ < line_.size() && line_[pos_] == c; }

  // True at the end of the line or at a comment: `//` anywhere outside a string, or (with `hash`) a `#` at
  // the start of the line or after whitespace. `#` right after the types is a category, so callers that
  // might be there pass hash = false first.
  bool at_comment_or_end(bool hash) const {
    if (pos_ >= line_.size()) return true;
    if (line_[pos_] == '/' && pos_ + 1 < line_.size() && line_[pos_ + 1] == '/') return true;
    return hash && line_[pos_] == '#' && (pos_ == 0 || is_space(line_[pos_ - 1]));
  }

  // A line that holds nothing but whitespace and comments.
  bool blank_line() {
    skip_space();
    return at_comment_or_end(true);
  }

  Result<void> expect_end_of_line() {
    skip_space();
    if (!at_comment_or_end(true)) return expected("end of line");
    return {};
  }

  // Consumes `c` (after whitespace) or fails with "expected WHAT".
  Result<void> expect(char c, std::string_view what) {
    skip_space();
    if (!at(c)) return expected(what);
    ++pos_;
    return {};
  }

  // Consumes `c` (after whitespace) if it is there.
  bool accept(char c) {
    skip_space();
    if (!at(c)) return false;
    ++pos_;
    return true;
  }

  // [A-Za-z_][A-Za-z0-9_]* at pos_ (after whitespace); empty if there is none.
  std::string_view ident() {
    skip_space();
    if (!is_ident_start(peek())) return {};
    size_t start = pos_;
    while (pos_ < line_.size() && is_ident_char(line_[pos_])) ++pos_;
    return line_.substr(start, pos_ - start);
  }

  // `%name`.
  Result<Ref> ref(std::string_view what) {
    skip_space();
    if (!at('%')) return expected(what);
    size_t start = pos_++;
    size_t name_start = pos_;
    while (pos_ < line_.size() && is_name_char(line_[pos_])) ++pos_;
    if (pos_ == name_start) return expected("a value name after '%'");
    return Ref{line_.substr(name_start, pos_ - name_start), line_no_, start + 1};
  }

  // `(%a, %b)` after the '(' has been consumed; may be empty.
  Result<std::vector<Ref>> ref_list_until_paren() {
    std::vector<Ref> refs;
    if (accept(')')) return refs;
    for (;;) {
      refs.push_back(LMS_TRY(ref("a value ('%name') or ')'")));
      if (accept(',')) continue;
      if (accept(')')) return refs;
      return expected("',' or ')'");
    }
  }

  // An int or float literal: -?digits(.digits*)?([eE][+-]?digits)?, or -inf. Plain inf and nan are words,
  // handled by the caller.
  Result<Attribute> number() {
    skip_space();
    size_t start = pos_;
    if (at('-')) {
      ++pos_;
      if (line_.substr(pos_, 3) == "inf" && (pos_ + 3 >= line_.size() || !is_name_char(line_[pos_ + 3]))) {
        pos_ += 3;
        return Attribute{-std::numeric_limits<double>::infinity()};
      }
    }
    if (!is_digit(peek())) return expected("a number");
    bool is_float = false;
    bool malformed = false;
    while (is_digit(peek())) ++pos_;
    if (at('.')) {
      is_float = true;
      ++pos_;
      while (is_digit(peek())) ++pos_;
    }
    if (at('e') || at('E')) {
      is_float = true;
      ++pos_;
      if (at('+') || at('-')) ++pos_;
      malformed = !is_digit(peek());
      while (is_digit(peek())) ++pos_;
    }
    // "12abc", "1e", "1.2.3": the literal runs into more name characters.
    if (malformed || (pos_ < line_.size() && is_name_char(line_[pos_]))) {
      size_t end = start;
      while (end < line_.size() && (is_name_char(line_[end]) || line_[end] == '+')) ++end;
      return error_at(start, "malformed number '{}'", escaped(line_.substr(start, end - start)));
    }
    std::string_view lit = line_.substr(start, pos_ - start);
    if (is_float) {
      double d = 0;
      auto r = std::from_chars(lit.data(), lit.data() + lit.size(), d);
      if (r.ec == std::errc::result_out_of_range)
        return error_at(start, "float literal '{}' is out of range", escaped(lit));
      if (r.ec != std::errc() || r.ptr != lit.data() + lit.size())
        return error_at(start, "malformed number '{}'", escaped(lit));
      return Attribute{d};
    }
    int64_t i = 0;
    auto r = std::from_chars(lit.data(), lit.data() + lit.size(), i);
    if (r.ec == std::errc::result_out_of_range)
      return error_at(start, "integer literal '{}' does not fit in 64 bits", escaped(lit));
    if (r.ec != std::errc() || r.ptr != lit.data() + lit.size())
      return error_at(start, "malformed number '{}'", escaped(lit));
    return Attribute{i};
  }

  Result<int64_t> integer(std::string_view what) {
    skip_space();
    size_t start = pos_;
    if (!at('-') && !is_digit(peek())) return expected(what);
    Attribute a = LMS_TRY(number());
    if (const int64_t* i = std::get_if<int64_t>(&a)) return *i;
    return error_at(start, "expected {}, got '{}'", what, escaped(line_.substr(start, pos_ - start)));
  }

  // A string literal; escapes are \" \\ \n \t \r \xHH (what to_string(Attribute) writes, plus \r).
  Result<std::string> string_literal() {
    size_t open = pos_++;
    std::string s;
    for (;;) {
      if (pos_ >= line_.size()) return error_at(open, "unterminated string");
      char c = line_[pos_];
      if (c == '"') {
        ++pos_;
        return s;
      }
      if (c != '\\') {
        // Raw control characters would not survive printing unchanged; bytes >= 0x80 are kept as they are.
        if (static_cast<unsigned char>(c) < 0x20)
          return error_at(pos_, "control character '{}' in string (write it as an escape)",
                          escaped(line_.substr(pos_, 1)));
        s += c;
        ++pos_;
        continue;
      }
      size_t esc = pos_++;
      char e = peek();
      switch (e) {
        case '"': s += '"'; break;
        case '\\': s += '\\'; break;
        case 'n': s += '\n'; break;
        case 't': s += '\t'; break;
        case 'r': s += '\r'; break;
        case 'x': {
          int v = 0;
          for (int k = 1; k <= 2; ++k) {
            char h = pos_ + k < line_.size() ? line_[pos_ + k] : '\0';
            int d = is_digit(h) ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
            if (d < 0) return error_at(esc, "expected two hex digits after '\\x' in string");
            v = v * 16 + d;
          }
          s += static_cast<char>(v);
          pos_ += 2;
          break;
        }
        default:
          if (pos_ >= line_.size()) return error_at(open, "unterminated string");
          return error_at(esc, "unknown escape '\\{}' in string", escaped(line_.substr(pos_, 1)));
      }
      ++pos_;
    }
  }

  // An attribute value: int, float, bool, string or int list.
  Result<Attribute> attr_value() {
    skip_space();
    char c = peek();
    if (c == '"') return Attribute{LMS_TRY(string_literal())};
    if (c == '-' || is_digit(c)) return number();
    if (c == '[') {
      ++pos_;
      IntList list;
      if (accept(']')) return Attribute{list};
      for (;;) {
        list.push_back(LMS_TRY(integer("an integer")));
        if (accept(',')) continue;
        if (accept(']')) return Attribute{std::move(list)};
        return expected("',' or ']'");
      }
    }
    size_t start = pos_;
    std::string_view w = ident();
    if (w == "true") return Attribute{true};
    if (w == "false") return Attribute{false};
    if (w == "inf") return Attribute{std::numeric_limits<double>::infinity()};
    if (w == "nan") return Attribute{std::numeric_limits<double>::quiet_NaN()};
    pos_ = start;
    return expected("an attribute value (number, true, false, string or [ints])");
  }

  // `f32[8,16]`.
  Result<TensorType> type() {
    skip_space();
    size_t start = pos_;
    std::string_view name = ident();
    if (name.empty()) return expected("a type such as f32[8,16]");
    std::optional<DType> dt = parse_dtype(name);
    if (!dt) {
      std::vector<std::string_view> known;
      for (int i = 0; i < kNumDTypes; ++i) known.push_back(dtype_name(static_cast<DType>(i)));
      return error_at(start, "unknown dtype '{}' (expected one of {})", escaped(name), fmt::join(known, ", "));
    }
    TensorType t{*dt, {}};
    LMS_TRY_VOID(expect('[', "'[' and the dimensions"));
    if (accept(']')) return t;
    for (;;) {
      skip_space();
      size_t dim_pos = pos_;
      int64_t d = LMS_TRY(integer("a dimension"));
      if (d < 0) return error_at(dim_pos, "dimension must be >= 0, got {}", d);
      t.shape.push_back(d);
      if (accept(',')) continue;
      if (accept(']')) return t;
      return expected("',' or ']'");
    }
  }

  // --- Statements ----------------------------------------------------------------------------------------

  // Skips blank and comment lines; false at the end of the text.
  bool next_statement() {
    while (next_line())
      if (!blank_line()) return true;
    return false;
  }

  Result<void> parse_header() {
    if (!next_statement()) return fail_at(where_eof(), "empty input: expected 'graph NAME {{'");
    size_t start = pos_;
    if (ident() != "graph") {
      pos_ = start;
      return expected("'graph NAME {'");
    }
    skip_space();
    if (!is_ident_start(peek())) return expected("a graph name");
    size_t name_start = pos_;
    while (pos_ < line_.size() && is_name_char(line_[pos_])) ++pos_;
    name_ = line_.substr(name_start, pos_ - name_start);
    size_t after_name = pos_;
    if (ident() == "scheduled") scheduled_ = true;
    else pos_ = after_name;
    LMS_TRY_VOID(expect('{', "'{'"));
    header_line_ = line_no_;
    return expect_end_of_line();
  }

  Result<void> parse_body() {
    bool returned = false;
    while (next_statement()) {
      if (at('}')) {
        ++pos_;
        return expect_end_of_line();
      }
      if (returned) return expected("'}' after the return line");
      if (at('%')) {
        LMS_TRY_VOID(parse_node());
        continue;
      }
      size_t start = pos_;
      if (ident() == "return") {
        LMS_TRY_VOID(parse_return());
        returned = true;
        continue;
      }
      pos_ = start;
      return expected("a node ('%name = op(...)'), 'return' or '}'");
    }
    return fail_at(where_eof(), "expected '}}' to close graph '{}' (opened at line {}), got end of input",
                   name_, header_line_);
  }

  // After the closing brace only comments and blank lines may follow (golden tests put CHECK lines there).
  Result<void> parse_trailer() {
    if (next_statement()) return expected("only comments after the closing '}'");
    return {};
  }

  Result<void> parse_return() {
    for (;;) {
      returns_.push_back(LMS_TRY(ref("a value ('%name') to return")));
      if (!accept(',')) break;
    }
    return expect_end_of_line();
  }

  Result<void> define(const Ref& r) {
    auto [it, inserted] = definitions_.try_emplace(r.name, Definition{r.line, {}});
    if (!inserted)
      return fail_at(where(r.line, r.col), "duplicate definition of %{} (first defined at line {})",
                     escaped(r.name), it->second.line);
    return {};
  }

  Result<void> parse_node() {
    NodeStmt n;
    for (;;) {
      n.results.push_back(LMS_TRY(ref("a result name ('%name')")));
      if (accept(',')) continue;
      if (accept('=')) break;
      return expected("',' or '='");
    }
    for (const Ref& r : n.results) LMS_TRY_VOID(define(r));

    skip_space();
    size_t op_pos = pos_;
    std::string_view op_text = ident();
    if (op_text.empty()) return expected("an op name");
    std::optional<Op> op = find_op(op_text);
    if (!op) return error_at(op_pos, "unknown op '{}'", escaped(op_text));
    n.op = *op;
    const OpDef& def = op_def(n.op);
    if (n.results.size() != def.outputs.size())
      return fail_at(where(n.results[0].line, n.results[0].col), "{} has {}, got {}", def.name,
                     plural(def.outputs.size(), "output"), plural(n.results.size(), "name"));

    LMS_TRY_VOID(expect('(', "'(' and the inputs"));
    n.inputs = LMS_TRY(ref_list_until_paren());

    skip_space();
    size_t after_pos = pos_;
    if (ident() == "after") {
      LMS_TRY_VOID(expect('(', "'(' and the nodes to run after"));
      n.after = LMS_TRY(ref_list_until_paren());
    } else {
      pos_ = after_pos;
    }

    bool braces = accept('{');
    n.attrs = LMS_TRY(parse_attrs(def, op_pos, braces));

    skip_space();
    if (!at(':'))
      return expected(braces ? "':' and the output types" : "'after(...)', '{attributes}' or ':' and the output types");
    ++pos_;
    skip_space();
    size_t types_pos = pos_;
    for (;;) {
      n.types.push_back(LMS_TRY(type()));
      Placement p = Placement::device;
      if (accept('@')) {
        size_t p_pos = pos_;
        std::string_view w = ident();
        if (w == "host") p = Placement::host;
        else if (w != "device") {
          pos_ = p_pos;
          return expected("a placement ('host' or 'device') after '@'");
        }
      }
      n.placements.push_back(p);
      if (!accept(',')) break;
    }
    if (n.types.size() != def.outputs.size())
      return error_at(types_pos, "{} has {}, got {}", def.name, plural(def.outputs.size(), "output"),
                      plural(n.types.size(), "type"));

    // `#name` right after the types is the category (fwd when absent); after it, only a comment.
    skip_space();
    if (at('#') && pos_ + 1 < line_.size() && is_ident_start(line_[pos_ + 1])) {
      size_t cat_pos = pos_++;
      std::string_view c = ident();
      std::optional<Category> cat = parse_category(c);
      if (!cat) {
        std::vector<std::string_view> known;
        for (int i = 0; i < kNumCategories; ++i) known.push_back(category_name(static_cast<Category>(i)));
        return error_at(cat_pos, "unknown category '#{}' (expected one of {})", escaped(c), fmt::join(known, ", "));
      }
      n.category = *cat;
    }
    LMS_TRY_VOID(expect_end_of_line());
    nodes_.push_back(std::move(n));
    return {};
  }

  // `{name = value, ...}` after the '{', checked against the op's declared attributes by normalize_attrs,
  // which words the errors. Each attribute is checked as soon as it is read, so that an error points
  // at its name (unknown) or value (wrong kind), and so that the list stays as short as the op's declared
  // list (a line of a million made-up attributes fails at the first, instead of costing a quadratic
  // duplicate search). Then the whole list is normalized, which reorders it and finds missing required
  // attributes; those have no place of their own, so the op name stands for them. Without braces the empty
  // list is still normalized, for the required attributes.
  Result<Attributes> parse_attrs(const OpDef& def, size_t op_pos, bool braces) {
    Attributes attrs;
    if (braces && !accept('}')) {
      for (;;) {
        skip_space();
        size_t name_pos = pos_;
        std::string_view name = ident();
        if (name.empty()) return expected("an attribute name");
        if (attrs.has(name)) return error_at(name_pos, "duplicate attribute '{}'", name);
        LMS_TRY_VOID(expect('=', "'=' and the attribute value"));
        skip_space();
        size_t value_pos = pos_;
        Attribute value = LMS_TRY(attr_value());
        const AttrSpec* spec = nullptr;
        for (const AttrSpec& s : def.attrs)
          if (s.name == name) spec = &s;
        AttrKind kind = kind_of(value);
        if (spec == nullptr || (kind != spec->kind && !(kind == AttrKind::Int && spec->kind == AttrKind::Float))) {
          // Alone, the attribute fails normalization on its name or kind, before required ones are looked for.
          Attributes one;
          one.set(name, value);
          auto checked = normalize_attrs(def, std::move(one));
          std::string what = checked ? fmt::format("attribute '{}' is not valid for op '{}'", name, def.name)
                                     : std::move(checked.error().what);
          return std::unexpected(Error{std::move(what), where(spec == nullptr ? name_pos : value_pos)});
        }
        attrs.set(name, std::move(value));
        if (accept(',')) continue;
        if (accept('}')) break;
        return expected("',' or '}'");
      }
    }
    auto normalized = normalize_attrs(def, std::move(attrs));
    if (!normalized) return std::unexpected(Error{normalized.error().what, where(op_pos)});
    return std::move(*normalized);
  }

  // --- Phase two: the graph ------------------------------------------------------------------------------

  Result<ValueId> resolve(const Ref& r) const {
    auto it = definitions_.find(r.name);
    if (it == definitions_.end()) return fail_at(where(r.line, r.col), "undefined value %{}", escaped(r.name));
    return it->second.value;
  }

  Result<Graph> build() {
    Graph g{std::string(name_)};
    g.set_scheduled(scheduled_);
    std::vector<NodeId> ids;
    ids.reserve(nodes_.size());
    std::vector<std::string> names;
    for (NodeStmt& n : nodes_) {
      names.clear();
      for (const Ref& r : n.results) names.emplace_back(r.name);
      NodeId id = g.add_node(n.op, std::move(n.attrs), n.types, names, n.category);
      ids.push_back(id);
      for (size_t i = 0; i < n.results.size(); ++i) {
        ValueId v = g.node(id).outputs[i];
        // add_node gives the op's default placement; the text is authoritative (the verifier judges it).
        g.set_placement(v, n.placements[i]);
        definitions_.find(n.results[i].name)->second.value = v;
      }
    }
    std::vector<ValueId> inputs;
    std::vector<NodeId> after;
    for (size_t k = 0; k < nodes_.size(); ++k) {
      inputs.clear();
      for (const Ref& r : nodes_[k].inputs) inputs.push_back(LMS_TRY(resolve(r)));
      g.set_inputs(ids[k], inputs);
      // Control inputs are stored sorted; adding them in increasing order appends each one, so a long
      // after(...) list costs n log n rather than n^2 insertions in the middle.
      after.clear();
      for (const Ref& r : nodes_[k].after) after.push_back(g.value(LMS_TRY(resolve(r))).producer);
      std::sort(after.begin(), after.end());
      after.erase(std::unique(after.begin(), after.end()), after.end());
      for (NodeId c : after) g.add_control_input(ids[k], c);
    }
    std::vector<ValueId> outputs;
    for (const Ref& r : returns_) outputs.push_back(LMS_TRY(resolve(r)));
    g.set_outputs(std::move(outputs));
    return g;
  }

  std::string_view text_;
  std::string_view file_;
  size_t next_ = 0;        // offset of the next line in text_
  std::string_view line_;  // the current line
  size_t line_no_ = 0;
  size_t pos_ = 0;  // offset in line_

  std::string_view name_;
  bool scheduled_ = false;
  size_t header_line_ = 0;
  std::vector<NodeStmt> nodes_;
  std::vector<Ref> returns_;
  std::unordered_map<std::string_view, Definition> definitions_;
};

}  // namespace

Result<Graph> parse_graph(std::string_view text, std::string_view filename) {
  return Parser(text, filename).run();
}

}  // namespace lms
