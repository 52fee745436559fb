// Tensors as NumPy .npy files (the format of numpy.save / numpy.load).
//
//   save_npy("x.npy", x);            // numpy.load("x.npy") gives the same values
//   Tensor y = load_npy("x.npy");    // always a contiguous CPU tensor
//
// save_npy writes format version 1.0 (2.0 when the header does not fit in 64 KiB), little-endian,
// C order, with the header NumPy itself writes (sorted keys, padded so the data starts at a
// multiple of 64 bytes). Dtypes: f32 '<f4', f64 '<f8', f16 '<f2', i32 '<i4', i64 '<i8',
// bool '|b1'; bf16 has no NumPy dtype and is refused (convert it with x.to(f32) first).
// Non-contiguous tensors are saved by their logical (row-major) values. The write is atomic: the
// file appears complete under `path` or not at all (temporary file in the same directory, renamed).
//
// load_npy reads versions 1.0, 2.0 and 3.0, both byte orders (big-endian '>' is byte-swapped),
// C and Fortran order (a Fortran-order file is read as the reversed shape and permuted). Besides
// the dtypes above it widens the small integer types losslessly: '|i1', '|u1', '<i2', '<u2' load
// as i32 and '<u4' as i64; other dtypes (u8, complex, strings, structured) are refused. Every
// problem (missing file, bad magic, bad header, unknown dtype, truncated or surplus data) raises
// kiln::Error naming load_npy, the path and what is wrong.
#pragma once
#include <string>

#include "dsl/tensor.h"

namespace kiln {

void save_npy(const std::string& path, const Tensor& tensor);
Tensor load_npy(const std::string& path);

// The .npy header (magic through the final '\n') save_npy writes for a tensor of this shape
// and dtype; exposed for tests and for tools that stream data after it.
std::string npy_header(const Shape& shape, DType dtype);

}  // namespace kiln
