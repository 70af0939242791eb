// The pav executable: the dispatcher (tools/command.cpp) over the commands
// linked in, each of which registers itself.
#include "tools/backend_option.hpp"
#include "tools/command.hpp"
#ifdef PAV_HAVE_GPU
#include "kernels/hip/host_staged.hpp"
#endif

namespace pav::cli {

bool register_gpu() {
#ifdef PAV_HAVE_GPU
  static const bool registered = kernels::gpu::register_host_staged_backend();
  return registered;
#else
  return false;
#endif
}

}  // namespace pav::cli

int main(int argc, char** argv) { return pav::cli::run_main(argc, argv); }
