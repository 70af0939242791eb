// SPDX-License-Identifier: Apache-2.0
// The adapter_bench executable (bench/adapter_bench.cpp has the bench).
int adapter_bench_main(int argc, char** argv);

int main(int argc, char** argv) { return adapter_bench_main(argc, argv); }
