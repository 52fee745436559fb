// Denormal floats flushed to zero on the CPU, as PyTorch's torch.set_flush_denormal: a result too
// small for a normal float becomes 0 (FTZ) and such an input reads as 0 (DAZ). Denormal
// arithmetic takes tens to hundreds of cycles an operation on x86; a training step repeated on one
// batch, whose gradients shrink as it converges, slowed from 7.5 to 12.8 ms in a few hundred
// steps without it (norm_softmax on a 2-core EPYC) and stayed at 7.5 ms with it.
//
// It sets the calling thread's floating-point control (MXCSR) and so every thread started from it
// afterwards: Halide's thread pool, which kiln's kernels and pipelines share, starts on the first
// parallel kernel, so call it before any (as `kiln tune` does). Returns false where the CPU has
// no such mode (not x86 with SSE).
//
//   kiln::set_flush_denormal(true);
#pragma once

namespace kiln {

bool set_flush_denormal(bool on);

}  // namespace kiln
