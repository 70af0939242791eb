// SPDX-License-Identifier: Apache-2.0
// open_kernel: --kernel text to an adapter.
#include "adapters/in_process.hpp"
#include "adapters/kernel.hpp"
#include "adapters/lib_kernel.hpp"
#include "adapters/pav_kernel.hpp"
#include "adapters/worker_kernel.hpp"
#ifdef PAV_HAVE_GPU
#include "kernels/hip/host_staged.hpp"
#endif

namespace pav::adapters {

std::unique_ptr<KernelUnderTest> open_kernel(const std::string& spec, const OpenOptions& options) {
  const auto colon = spec.find(':');
  const std::string scheme = colon == std::string::npos ? std::string() : spec.substr(0, colon);
  const std::string rest = colon == std::string::npos ? std::string() : spec.substr(colon + 1);
  if (scheme == "exec") {
    if (split_words(rest).empty()) throw KernelSpecError("--kernel exec: no command after 'exec:'");
    if (options.isolate) throw KernelSpecError("--isolate applies to lib: kernels (a worker is a process already)");
    return open_worker_kernel(rest, spec, options);
  }
  if (scheme == "inproc") {
    if (options.isolate) throw KernelSpecError("--isolate applies to lib: kernels, not to in-process ones");
    return open_in_process_kernel(rest, {options.timeout_seconds, options.should_stop});
  }
  std::vector<std::string> words = split_words(rest);
  if (scheme == "lib") {
    if (words.empty()) throw KernelSpecError("--kernel lib: no library path after 'lib:'");
    if (options.isolate) return open_isolated_kernel(spec, options);
    const std::string path = words.front();
    words.erase(words.begin());
    return open_lib_kernel(path, words, spec);
  }
  if (scheme == "pav") {
    if (words.empty()) throw KernelSpecError("--kernel pav: expected pav:cpu or pav:gpu");
    const std::string which = words.front();
    words.erase(words.begin());
    if (options.isolate) return open_isolated_kernel(spec, options);
    return open_pav_kernel(which, words, spec);
  }
  throw KernelSpecError("--kernel '" + spec +
                        "': expected pav:cpu, pav:gpu, lib:PATH.so [WORDS...] or exec:'CMD ARGS'");
}

std::unique_ptr<KernelUnderTest> open_pav_kernel(const std::string& which, const std::vector<std::string>& words,
                                                 const std::string& spec) {
  PavKernelOptions o = parse_pav_kernel_words(words);
  if (which == "cpu") {
    o.backend = kernels::Backend::cpu;
  } else if (which == "gpu") {
#ifdef PAV_HAVE_GPU
    kernels::gpu::register_host_staged_backend();
#endif
    if (!kernels::gpu_backend_available())
      throw KernelUnavailable("--kernel pav:gpu: no GPU backend in this build or no device present");
    o.backend = kernels::Backend::gpu;
  } else {
    throw KernelSpecError("--kernel pav:" + which + ": expected pav:cpu or pav:gpu");
  }
  return make_pav_kernel(o, spec);
}

}  // namespace pav::adapters
