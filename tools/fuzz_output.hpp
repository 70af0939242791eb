// SPDX-License-Identifier: Apache-2.0
#pragma once
// What pav fuzz and pav verify say about a property run, in JSON and in text,
// so both commands report the engine's findings the same way.
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "properties/fuzz.hpp"
#include "tools/command.hpp"

namespace pav::cli {

// --save DIR (default: the documented counterexample folder).
CLI::Option* add_save_option(CLI::App& app, std::string& dir);

// Checks at start-up that cases can be saved under dir (pav::IoError, exit 3).
void check_save_dir(const std::string& dir);

// --property NAME (repeatable, or a comma list): the properties chosen, all
// when none is named; BadInput names an unknown one and lists the known ones.
// `available`: the properties to choose from (default: the built-in ones).
std::vector<const props::fuzz::Property*> select_properties(const std::vector<std::string>& names);
std::vector<const props::fuzz::Property*> select_properties(const std::vector<std::string>& names,
                                                            const std::vector<props::fuzz::Property>& available);

// One property run as JSON: cases, time, and the failure with its saved file.
nlohmann::ordered_json property_run_json(const props::fuzz::PropertyRun& run);

// Exit code of an engine run: 1 when a failure was found (even if its case
// could not be saved: the seed still reproduces it), 3 when a stop signal ended
// it early or a case could not be saved, else 0.
int fuzz_exit_code(const props::fuzz::FuzzReport& report);

}  // namespace pav::cli
