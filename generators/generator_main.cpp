// The main of kiln's generator programs: Halide's generator command line (what
// add_halide_generator's programs run), plus `--kiln-fingerprints LIST STAMP_DIR`, the build's
// step that finds which kernels changed (generators/kernel_fingerprint.h).
#include <Halide.h>

#include <iostream>
#include <string>

#include "generators/kernel_stamps.h"

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "--kiln-fingerprints") {
    if (argc != 4) {
      std::cerr << "usage: " << argv[0] << " --kiln-fingerprints KERNEL_LIST STAMP_DIR\n";
      return 2;
    }
    return kiln::update_kernel_stamps(argv[2], argv[3]);
  }
  return Halide::Internal::generate_filter_main(argc, argv, std::cerr);
}
