// The memory plot of `lms plan --plot` (see plot.h).
#include "plot.h"

#include <algorithm>

#include <fmt/format.h>

#include "lms/support/size.h"

namespace lms::cli {

namespace {

constexpr double kWidth = 900, kHeight = 420;                       // the whole picture, in SVG units
constexpr double kLeft = 90, kRight = 20, kTop = 40, kBottom = 70;  // margins around the plot area
constexpr int kTicksY = 5;                                          // labelled horizontal grid lines

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '&') out += "&amp;";
    else if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

}  // namespace

MemoryCurve memory_curve(const Graph& g, const MemoryPlan& plan, const std::vector<double>& start,
                         std::string label, std::string color) {
  MemoryCurve c{std::move(label), std::move(color), {}, {}, {}, {}};
  const int n = plan.num_positions;
  std::vector<int64_t> delta(static_cast<size_t>(n) + 1, 0);
  for (const PlannedBuffer& b : plan.buffers) {
    if (b.life.placement != Placement::device || n == 0) continue;
    delta[b.life.first] += b.life.bytes;
    delta[b.life.last + 1] -= b.life.bytes;
  }
  const bool timed = start.size() == static_cast<size_t>(n) && n > 0;
  const double span = timed ? std::max(*std::max_element(start.begin(), start.end()), 1e-30) : std::max(n - 1, 1);
  int64_t live = 0;
  for (int p = 0; p < n; ++p) {
    live += delta[p];
    const double x = (timed ? start[p] : p) / span;
    c.x.push_back(x);
    c.bytes.push_back(live);
    const Op op = g.node(NodeId{static_cast<uint32_t>(p)}).op;
    if (op == Op::swap_out) c.swap_out.push_back(x);
    if (op == Op::swap_in) c.swap_in.push_back(x);
  }
  return c;
}

std::string memory_svg(const std::string& title, const std::vector<MemoryCurve>& curves, int64_t budget_bytes) {
  int64_t top = budget_bytes;
  for (const MemoryCurve& c : curves)
    for (int64_t b : c.bytes) top = std::max(top, b);
  top = std::max<int64_t>(top, 1);
  const double w = kWidth - kLeft - kRight, h = kHeight - kTop - kBottom;
  auto X = [&](double x) { return kLeft + x * w; };
  auto Y = [&](int64_t b) { return kTop + h - static_cast<double>(b) / static_cast<double>(top) * h * 0.95; };

  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n",
      kWidth, kHeight);
  s += fmt::format("<rect x=\"0\" y=\"0\" width=\"{}\" height=\"{}\" fill=\"white\"/>\n", kWidth, kHeight);
  s += fmt::format("<text x=\"{}\" y=\"22\" font-size=\"15\">{}</text>\n", kLeft, escape(title));
  for (int i = 0; i <= kTicksY; ++i) {
    const int64_t b = static_cast<int64_t>(static_cast<double>(top) / 0.95 * i / kTicksY);
    s += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>\n", X(0), Y(b),
                     X(1), Y(b));
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", kLeft - 6, Y(b) + 4,
                     escape(format_size(b)));
  }
  s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\" stroke=\"black\"/>\n", X(0),
                   Y(0), X(1));
  s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">fraction of the step</text>\n", X(0.5),
                   kHeight - 12);
  if (budget_bytes > 0 && budget_bytes < kUnlimitedBytes) {
    s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\" stroke=\"red\" "
                     "stroke-dasharray=\"6,4\"/>\n",
                     X(0), Y(budget_bytes), X(1));
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"red\" text-anchor=\"end\">budget {}</text>\n", X(1),
                     Y(budget_bytes) - 4, escape(format_size(budget_bytes)));
  }
  for (size_t i = 0; i < curves.size(); ++i) {
    const MemoryCurve& c = curves[i];
    std::string points;
    for (size_t k = 0; k < c.x.size(); ++k) points += fmt::format("{:.1f},{:.1f} ", X(c.x[k]), Y(c.bytes[k]));
    s += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" points=\"{}\"/>\n", c.color, points);
    const double ticks_y = Y(0) + 8 + 8 * static_cast<double>(i);
    for (double x : c.swap_out)
      s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"{3}\"/>\n", X(x),
                       ticks_y, ticks_y + 5, c.color);
    for (double x : c.swap_in)
      s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"{3}\" "
                       "stroke-dasharray=\"1,1\"/>\n",
                       X(x), ticks_y, ticks_y + 5, c.color);
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"{}\">{}</text>\n", X(0) + 10, kTop + 16 * (i + 1),
                     c.color, escape(c.label));
  }
  if (std::any_of(curves.begin(), curves.end(), [](const MemoryCurve& c) { return !c.swap_out.empty(); }))
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"#555\">ticks under the axis: swap-outs (solid), "
                     "swap-ins (dotted)</text>\n",
                     X(0), kHeight - 30);
  s += "</svg>\n";
  return s;
}

}  // namespace lms::cli
