// SPDX-License-Identifier: Apache-2.0
#include "kernels/dispatch/device_visibility.hpp"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

namespace pav::kernels::dispatch {
namespace {

std::string describe_var(const char* name, const std::string& value) {
  return std::string(name) + "='" + value + "'";
}

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t");
  if (a == std::string::npos) return "";
  const size_t b = s.find_last_not_of(" \t");
  return s.substr(a, b - a + 1);
}

std::vector<int> parse_list(const char* name, const std::string& value) {
  std::vector<int> out;
  if (trim(value).empty()) return out;  // set but empty: nothing visible
  size_t start = 0;
  int position = 0;
  while (true) {
    const size_t comma = value.find(',', start);
    const std::string entry = trim(value.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    const std::string where = describe_var(name, value) + ": entry " + std::to_string(position) + " '" + entry + "'";
    if (entry.empty()) throw std::invalid_argument(where + " is empty");
    if (!std::all_of(entry.begin(), entry.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
      if (entry.rfind("GPU-", 0) == 0)
        throw std::invalid_argument(where + " is a UUID; a physical index lookup needs integer indices");
      throw std::invalid_argument(where + " is not a non-negative device index");
    }
    if (entry.size() > 6) throw std::invalid_argument(where + " is out of range");
    const int idx = std::stoi(entry);
    if (std::find(out.begin(), out.end(), idx) != out.end())
      throw std::invalid_argument(where + " repeats device " + std::to_string(idx));
    out.push_back(idx);
    if (comma == std::string::npos) break;
    start = comma + 1;
    ++position;
  }
  return out;
}

}  // namespace

std::optional<std::vector<int>> visible_devices(const VisibilityEnv& env) {
  std::optional<std::vector<int>> table;  // after ROCR; nullopt = identity
  if (env.rocr) table = parse_list("ROCR_VISIBLE_DEVICES", *env.rocr);
  const char* name = env.hip ? "HIP_VISIBLE_DEVICES" : "CUDA_VISIBLE_DEVICES";
  const std::optional<std::string>& second = env.hip ? env.hip : env.cuda;
  if (!second) return table;
  const std::vector<int> picks = parse_list(name, *second);
  std::vector<int> out;
  for (int p : picks) {
    if (table) {
      if (p >= int(table->size())) break;  // the runtime stops at the first index it cannot map
      out.push_back((*table)[size_t(p)]);
    } else {
      out.push_back(p);
    }
  }
  return out;
}

int physical_device_index(int logical, const VisibilityEnv& env) {
  if (logical < 0) throw std::invalid_argument("logical device " + std::to_string(logical) + " is negative");
  const std::optional<std::vector<int>> visible = visible_devices(env);
  if (!visible) return logical;
  if (logical < int(visible->size())) return (*visible)[size_t(logical)];
  std::string msg = "logical device " + std::to_string(logical) + " is not visible: " +
                    std::to_string(visible->size()) + " device(s) visible";
  if (env.rocr) msg += " after " + describe_var("ROCR_VISIBLE_DEVICES", *env.rocr);
  if (env.hip) msg += (env.rocr ? " then " : " after ") + describe_var("HIP_VISIBLE_DEVICES", *env.hip);
  else if (env.cuda) msg += (env.rocr ? " then " : " after ") + describe_var("CUDA_VISIBLE_DEVICES", *env.cuda);
  if (env.rocr && (env.hip || env.cuda))
    msg += " (HIP/CUDA indices select from the ROCR list, not from physical devices)";
  throw std::invalid_argument(msg);
}

const VisibilityEnv& process_visibility_env() {
  static const VisibilityEnv env = [] {
    auto get = [](const char* n) -> std::optional<std::string> {
      const char* v = std::getenv(n);
      if (!v) return std::nullopt;
      return std::string(v);
    };
    return VisibilityEnv{get("ROCR_VISIBLE_DEVICES"), get("HIP_VISIBLE_DEVICES"), get("CUDA_VISIBLE_DEVICES")};
  }();
  return env;
}

}  // namespace pav::kernels::dispatch
