// SPDX-License-Identifier: Apache-2.0
#pragma once
// --backend cpu|gpu|auto, shared by the commands that run kernels (the
// session picks the backend the name stands for).
#include <string>

#include "tools/command.hpp"

namespace pav::cli {

inline CLI::Option* add_backend_option(CLI::App& app, std::string& name) {
  return app.add_option("--backend", name, "cpu, gpu, or auto (gpu when a device is present)")
      ->check(CLI::IsMember({"cpu", "gpu", "auto"}));
}

}  // namespace pav::cli
