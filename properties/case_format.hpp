#pragma once
// The JSON case format: one whole decode call (shapes, dtypes, layouts,
// lengths, block tables, scales, options), tensors inline when small or
// generated from a recorded seed. See README "Case files".
#include <string>

#include <nlohmann/json.hpp>

#include "properties/host_case.hpp"

namespace pav::props {

inline constexpr const char* kCaseFormat = "pav-case/1";

// Thrown for a malformed case; what() names the field ("options.arch: ...").
struct CaseError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

CaseSpec case_from_json(const nlohmann::json& j);
nlohmann::json case_to_json(const CaseSpec& spec, const nlohmann::json& meta = nlohmann::json::object());

// Reads a case file; CaseError names the file and the field at fault.
CaseSpec load_case_spec(const std::string& path, nlohmann::json* meta_out = nullptr);
// Writes a case file durably (pav::write_file_atomically: a temporary file,
// flushed, checked, renamed); meta also records the pav version and source
// commit. Throws pav::IoError naming the path when it cannot be written.
void save_case(const std::string& path, const CaseSpec& spec, const nlohmann::json& meta);

// Convenience: read and build.
HostCase load_case(const std::string& path);

}  // namespace pav::props
