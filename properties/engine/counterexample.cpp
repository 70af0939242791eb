// SPDX-License-Identifier: Apache-2.0
#include "properties/engine/counterexample.hpp"

#include <fmt/core.h>

#include <cstdlib>
#include <filesystem>

#include "common/durable_file.hpp"
#include "properties/case/case_format.hpp"

namespace pav::props {

std::string default_counterexample_dir() {
  const char* env = std::getenv("PAV_COUNTEREXAMPLE_DIR");
  return env && *env ? env : "counterexamples";
}

namespace {

// FNV-1a, 64 bits, folded to 32: a short name part, not a security hash.
uint32_t short_hash(const std::string& text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return uint32_t(h ^ (h >> 32));
}

}  // namespace

std::string counterexample_name(const std::string& property, std::optional<uint64_t> seed, const CaseSpec& spec) {
  std::string name = property.empty() ? std::string("case") : property;
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '_' && ch != '.') ch = '_';
  if (seed) name += fmt::format("-seed{}", *seed);
  return name + fmt::format("-{:08x}.json", short_hash(case_to_json(spec).dump()));
}

std::string case_id(const std::string& property, const CaseSpec& spec, const nlohmann::json& value_meta) {
  return fmt::format("{}-{:08x}", property, short_hash(case_to_json(spec).dump() + "\n" + value_meta.dump()));
}

std::string save_counterexample(const std::string& dir, const std::string& property, std::optional<uint64_t> seed,
                                const CaseSpec& spec, nlohmann::json meta) {
  const std::filesystem::path folder = dir.empty() ? std::filesystem::path(".") : std::filesystem::path(dir);
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  if (ec) throw IoError("cannot create the counterexample folder " + folder.string() + ": " + ec.message());
  const std::filesystem::path path = folder / counterexample_name(property, seed, spec);
  if (!meta.is_object()) meta = nlohmann::json::object();
  meta["property"] = property;
  if (seed) meta["seed"] = *seed;
  if (const char* rc = std::getenv("RC_PARAMS")) meta["rc_params"] = rc;
  save_case(path.string(), spec, meta);
  return path.string();
}

}  // namespace pav::props
