#include "aot/manifest.h"

#include <sstream>

#include "dsl/error.h"
#include "dsl/profiler.h"
#include "graph/text_records.h"

namespace kiln::aot {

namespace {

constexpr int kVersion = 1;

}  // namespace

std::string write_manifest(const Manifest& m) {
  std::ostringstream os;
  os << "kiln-aot " << kVersion << "\nmodel " << json_quote(m.model) << '\n';
  if (!m.target.empty()) os << "target " << json_quote(m.target) << ' ' << record_list(m.target_features) << '\n';
  for (const ManifestInput& in : m.inputs) os << "input " << json_quote(in.name) << '\n';
  os << "outputs " << m.outputs << '\n';
  for (const DynamicRange& r : m.dynamic) os << "dynamic " << r.input << ' ' << r.dim << ' ' << r.min << ' ' << r.max << '\n';
  for (const SizeBranch& b : m.branches)
    os << "specialize " << b.input << ' ' << b.dim << ' ' << b.modulus << ' ' << b.value << '\n';
  os << "end\n";
  return os.str();
}

Manifest read_manifest(std::string_view text) {
  Manifest m;
  std::istringstream is{std::string(text)};
  int number = 0;
  bool ended = false, versioned = false;
  for (std::string line; std::getline(is, line);) {
    TextRecord f(line, ++number, "read_manifest");
    if (f.size() == 0) continue;
    f.check(!ended, "text after 'end'");
    const std::string& kind = f.str(0);
    if (kind == "kiln-aot") {
      f.expect(2);
      f.check(f.integer(1) == kVersion, "manifest format version " + f.str(1) + ", this kiln reads " +
                                            std::to_string(kVersion));
      versioned = true;
    } else if (kind == "model") {
      f.expect(2);
      m.model = f.str(1);
    } else if (kind == "target") {
      f.expect(3);
      m.target = f.str(1);
      m.target_features = f.ids(2, 1024);
    } else if (kind == "input") {
      f.expect(2);
      m.inputs.push_back({f.str(1)});
    } else if (kind == "outputs") {
      f.expect(2);
      m.outputs = int(f.integer(1));
      f.check(m.outputs >= 0, "a negative output count");
    } else if (kind == "dynamic") {
      f.expect(5);
      DynamicRange r{f.id(1, m.inputs.size()), int(f.integer(2)), f.integer(3), f.integer(4)};
      f.check(r.dim >= 0 && r.min >= 0 && r.min <= r.max, "a dynamic dim needs dim >= 0 and 0 <= min <= max");
      m.dynamic.push_back(r);
    } else if (kind == "specialize") {
      f.expect(5);
      SizeBranch b{f.id(1, m.inputs.size()), int(f.integer(2)), f.integer(3), f.integer(4)};
      f.check(b.dim >= 0 && b.modulus >= 0, "a specialization needs dim >= 0 and modulus >= 0");
      m.branches.push_back(b);
    } else if (kind == "end") {
      ended = true;
    } else {
      f.fail("unknown record '" + kind + "'");
    }
  }
  KILN_CHECK(versioned && ended, "read_manifest: not a kiln AOT manifest (no 'kiln-aot ", kVersion,
             "' line or no 'end')");
  return m;
}

}  // namespace kiln::aot
