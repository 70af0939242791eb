// SPDX-License-Identifier: Apache-2.0
#pragma once
// The JSON case format: one whole decode call (shapes, dtypes, layouts,
// lengths, block tables, scales, options), tensors inline when small or
// generated from a recorded seed. See docs/case-format.md.
#include <string>

#include <nlohmann/json.hpp>

#include "input/json_input.hpp"
#include "properties/case/host_case.hpp"

namespace pav::props {

inline constexpr const char* kCaseFormat = "pav-case/1";
// A case with a prelude (CaseSpec::prelude: the calls replayed before it
// through the same kernel instance). Readers take both versions; a case
// without a prelude is still written as pav-case/1.
inline constexpr const char* kSequenceCaseFormat = "pav-case/2";
// The most earlier calls a prelude holds (and a run keeps to search one):
// enough for state that builds up over a few hundred calls (a pool of
// buffers handed out fresh before they are reused), while a prelude's calls
// stay small (each is regenerated from its generator fields).
inline constexpr int kMaxPrelude = 256;

// Thrown for a malformed case; what() names the file and the field
// ("a.json: options.arch: ..."). The shared input error: the CLI exits 2.
using CaseError = input::InputError;

// Every field is checked for type and range before anything is computed from
// it (see docs/limits.md); source names the input in messages.
CaseSpec case_from_json(const nlohmann::json& j, const std::string& source = "case");
nlohmann::json case_to_json(const CaseSpec& spec, const nlohmann::json& meta = nlohmann::json::object());

// Reads a case file; CaseError names the file and the field at fault.
CaseSpec load_case_spec(const std::string& path, nlohmann::json* meta_out = nullptr);

// What a case's meta records, read by input/'s rules (CaseError "case:
// meta.FIELD: why" for a value of the wrong type): the --kernel text of the
// kernel it was found on (meta.kernel.spec; "" when meta.kernel is absent or
// null), and the property that found it (meta.property; "" when absent).
std::string case_kernel_spec(const nlohmann::json& meta);
std::string case_property(const nlohmann::json& meta);
// Writes a case file durably (pav::write_file_atomically: a temporary file,
// flushed, checked, renamed); meta also records the pav version and source
// commit. Throws pav::IoError naming the path when it cannot be written.
void save_case(const std::string& path, const CaseSpec& spec, const nlohmann::json& meta);

// Convenience: read and build.
HostCase load_case(const std::string& path);

}  // namespace pav::props
