#include "properties/counterexample.hpp"

#include <cstdlib>
#include <filesystem>

#include "properties/case_format.hpp"

namespace pav::props {

std::string save_counterexample(const std::string& property, const CaseSpec& spec,
                                const nlohmann::json& extra_meta) {
  const char* env = std::getenv("PAV_COUNTEREXAMPLE_DIR");
  const std::filesystem::path dir = env && *env ? env : "counterexamples";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return {};
  std::string name = property;
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '_') ch = '_';
  const auto path = dir / (name + ".json");
  nlohmann::json meta = extra_meta;
  meta["property"] = property;
  if (const char* rc = std::getenv("RC_PARAMS")) meta["rc_params"] = rc;
  save_case(path.string(), spec, meta);
  return path.string();
}

}  // namespace pav::props
