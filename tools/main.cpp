// SPDX-License-Identifier: Apache-2.0
// The pav executable: the dispatcher (tools/command.cpp) over the commands
// linked in (pav_commands), each of which registers itself.
#include "tools/command.hpp"

int main(int argc, char** argv) { return pav::cli::run_main(argc, argv); }
