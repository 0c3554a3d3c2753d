// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// The standalone driver of the backend's fuzz targets, for builds without
// libFuzzer (gcc, `pip install .`): each target defines
// LLVMFuzzerTestOneInput and FuzzCounters, and its main() returns
// FuzzMain(argc, argv). With libFuzzer (`make fuzz`), libFuzzer's own main
// drives the same LLVMFuzzerTestOneInput and this file is not built.
//
//   <target> <corpus-dir> [--seconds S] [--min-inputs N] [--seed N]
//
// runs every *.bin file of the corpus, then random mutations of them
// (byte flips, interesting integers at field offsets, truncation,
// insertion, splicing) until S seconds have passed and at least N inputs
// ran (in batches of 256), and prints the number of inputs run, the
// target's counters and the seed. The same seed and corpus run the same
// inputs in the same order: the way to replay a failure (give at least as
// many inputs as the failing run had reached).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace tritonpy {
namespace fuzz {

// How far the inputs got, for the summary line ("12 valid headers, ...").
std::string FuzzCounters();

int FuzzMain(int argc, char** argv);

}  // namespace fuzz
}  // namespace tritonpy
