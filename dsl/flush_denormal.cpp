#include "dsl/flush_denormal.h"

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

namespace kiln {

bool set_flush_denormal(bool on) {
#if defined(__SSE__)
  constexpr unsigned kFlushToZero = 0x8000, kDenormalsAreZero = 0x0040;  // MXCSR bits FTZ, DAZ
  unsigned csr = _mm_getcsr();
  _mm_setcsr(on ? csr | kFlushToZero | kDenormalsAreZero : csr & ~(kFlushToZero | kDenormalsAreZero));
  return true;
#else
  return !on;
#endif
}

}  // namespace kiln
