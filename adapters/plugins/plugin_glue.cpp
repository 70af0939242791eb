// SPDX-License-Identifier: Apache-2.0
#include "adapters/plugins/plugin_glue.hpp"

#include <fmt/core.h>

#include "adapters/abi.hpp"

namespace pav::adapters::plugin {

namespace {

struct Instance {
  std::unique_ptr<KernelUnderTest> kernel;
};

int status_of(Outcome o) {
  switch (o) {
    case Outcome::ok: return PAV_OK;
    case Outcome::rejected: return PAV_REJECT;
    case Outcome::stale_plan: return PAV_STALE_PLAN;
    default: return PAV_ERROR;
  }
}

template <class F>
int guarded(char* err, size_t err_size, F f) {
  try {
    return f();
  } catch (const std::exception& e) {
    abi::set_message(err, err_size, e.what());
  } catch (...) {
    abi::set_message(err, err_size, "unknown exception");
  }
  return PAV_ERROR;
}

bool args_ok(const pav_decode_args* a, char* err, size_t err_size) {
  if (!a) {
    abi::set_message(err, err_size, "args is NULL");
    return false;
  }
  if (a->struct_size != sizeof(pav_decode_args)) {
    abi::set_message(err, err_size,
                     fmt::format("pav_decode_args.struct_size {} != {}: caller built against another header",
                                 a->struct_size, sizeof(pav_decode_args)));
    return false;
  }
  return true;
}

// Shapes and strides are checked before the request is built from them: a
// call that cannot be read safely is refused by check, an error for decode.
bool args_readable(const pav_decode_args* a, char* err, size_t err_size) {
  if (const std::string why = abi::args_problem(*a); !why.empty()) {
    abi::set_message(err, err_size, "malformed call: " + why);
    return false;
  }
  return true;
}

}  // namespace

KernelUnderTest* kernel_of(void* instance) {
  return instance ? static_cast<Instance*>(instance)->kernel.get() : nullptr;
}

int init(const Factory& make, int argc, const char* const* argv, void** instance, char* err, size_t err_size) {
  return guarded(err, err_size, [&] {
    std::vector<std::string> words;
    for (int i = 0; i < argc; ++i) words.emplace_back(argv[i]);
    try {
      *instance = new Instance{make(words)};
    } catch (const Unavailable& e) {
      abi::set_message(err, err_size, e.what());
      return int(PAV_UNAVAILABLE);
    }
    return int(PAV_OK);
  });
}

void fini(void* instance) { delete static_cast<Instance*>(instance); }

int describe(void* instance, pav_kernel_desc* desc, char* err, size_t err_size) {
  return guarded(err, err_size, [&] {
    KernelUnderTest* k = kernel_of(instance);
    if (!k) throw std::invalid_argument("no instance: call pav_kernel_init first");
    if (!desc || desc->struct_size != sizeof(pav_kernel_desc) || desc->abi_version != PAV_KERNEL_ABI_VERSION)
      throw std::invalid_argument("pav_kernel_desc of another size or ABI version");
    abi::to_abi(k->description(), desc);
    return PAV_OK;
  });
}

int check(void* instance, const pav_decode_args* args, char* reason, size_t reason_size) {
  if (!args_ok(args, reason, reason_size)) return PAV_ERROR;
  if (!args_readable(args, reason, reason_size)) return PAV_REJECT;
  return guarded(reason, reason_size, [&] {
    kernels::PlanView plan;
    const DecodeRequest r = abi::request_from_abi(*args, &plan);
    const CallResult res = kernel_of(instance)->check(r);
    abi::set_message(reason, reason_size, res.message);
    return status_of(res.outcome);
  });
}

int decode(void* instance, const pav_decode_args* args, char* err, size_t err_size) {
  if (!args_ok(args, err, err_size) || !args_readable(args, err, err_size)) return PAV_ERROR;
  return guarded(err, err_size, [&] {
    kernels::PlanView plan;
    const DecodeRequest r = abi::request_from_abi(*args, &plan);
    const CallResult res = kernel_of(instance)->decode(r);
    abi::set_message(err, err_size, res.message);
    return status_of(res.outcome);
  });
}

}  // namespace pav::adapters::plugin
