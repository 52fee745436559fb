// The eager runner of the creation ops: host loops that fill a new tensor. Random ops read and
// advance the one Philox generator when they run, so each run draws new numbers.
#include <cmath>
#include <cstring>

#include "dsl/cuda/cuda_context.h"
#include "dsl/dispatch.h"
#include "dsl/eager/kernel_call.h"
#include "dsl/eager/runners.h"
#include "dsl/kernel_table.h"
#include "dsl/ops/ranges.h"
#include "dsl/error.h"
#include "dsl/random.h"

namespace kiln {

namespace {

void fill(const Tensor& t, auto&& value_at) {
  void* p = t.data_ptr();
  for (int64_t i = 0, n = t.numel(); i < n; ++i) store_from_double(p, t.dtype(), i, value_at(i));
}

// Uniform in [0, 1) with 24 (f32) or 53 (f64) random bits.
double uniform_from(const std::array<uint32_t, 4>& r, int pair, bool wide) {
  if (!wide) return (r[pair * 2] >> 8) * 0x1.0p-24;
  return ((uint64_t(r[pair * 2]) << 21) ^ (r[pair * 2 + 1] >> 11)) * 0x1.0p-53;
}

void fill_random(const std::string& op, const Tensor& t, const Attrs& a) {
  PhiloxState& g = default_generator();
  const uint64_t base = g.offset, seed = g.seed;
  DType dt = t.dtype();
  if (op == "randn") {
    fill(t, [&](int64_t i) {  // Box-Muller on two uniforms per element
      auto r = philox4x32(base + uint64_t(i), seed);
      double u1 = 1.0 - uniform_from(r, 0, true), u2 = uniform_from(r, 1, true);
      return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
    });
  } else if (op == "randint") {
    int64_t low = a.get<int64_t>("low");
    uint64_t span = uint64_t(a.get<int64_t>("high") - low);
    fill(t, [&](int64_t i) {
      auto r = philox4x32(base + uint64_t(i), seed);
      return double(low + int64_t(((uint64_t(r[0]) << 32 | r[1]) % span)));
    });
  } else {  // rand, rand_like
    // f16/bf16 draw on a grid of their mantissa width, so rounding to the dtype never gives 1.
    double grid = dt == DType::f16 ? 0x1.0p11 : dt == DType::bf16 ? 0x1.0p8 : 0;
    fill(t, [&](int64_t i) {
      double u = uniform_from(philox4x32(base + uint64_t(i), seed), 0, dt == DType::f64);
      return grid ? std::floor(u * grid) / grid : u;
    });
  }
  g.offset += uint64_t(t.numel());
}

// CUDA: constants are filled on the device, arange and linspace of f32, i32 and i64 by a kernel;
// other dtypes and random draws are made on the host (the same numbers as on the CPU) and copied.
Tensor create_on_cuda(const OpDef& def, const TensorMeta& m, const TensorList& inputs, const Attrs& a) {
  if (def.name == "full") {
    Tensor t = Tensor::empty(m.shape, {m.dtype, m.device});
    uint64_t bits = 0;
    store_from_double(&bits, m.dtype, 0, a.get<double>("value"));
    if (t.numel() > 0)
      cuda_fill(reinterpret_cast<CUdeviceptr>(t.data_ptr()), &bits, itemsize(m.dtype), size_t(t.numel()), m.device.index);
    return t;
  }
  if (def.name == "arange" || def.name == "linspace") {
    KernelDeviceScope cuda_kernels(true);
    if (KernelFn fn = find_kernel("kiln_arange_" + std::string(name(m.dtype)))) {
      Tensor t = Tensor::empty(m.shape, {m.dtype, m.device});
      if (t.numel() == 0) return t;
      RangeParams r = range_params(def.name, a, t.numel());
      KernelBuffer out(t, {t.numel()}, {1});
      int32_t count = int32_t(t.numel());
      call_kernel(fn, {&r.start, &r.step, &r.last, &count, &out.buf}, def.name);
      return t;
    }
  }
  TensorList on_host;
  for (const Tensor& x : inputs) on_host.push_back(Tensor::empty(x.shape(), {x.dtype(), Device::cpu()}));
  Attrs host_attrs = a;
  if (host_attrs.has("device")) host_attrs.set("device", std::string("cpu"));
  KernelDeviceScope cpu_kernels(false);
  return run_creation(def, on_host, host_attrs)[0].to(m.device);
}

}  // namespace

TensorList run_creation(const OpDef& def, const TensorList& inputs, const Attrs& a) {
  TensorMeta m = def.infer(metas_of(inputs), a)[0];
  if (m.device.is_cuda()) return {create_on_cuda(def, m, inputs, a)};
  Tensor t = Tensor::empty(m.shape, {m.dtype, m.device});
  if (def.random) {
    fill_random(def.name, t, a);
  } else if (def.name == "full") {
    double v = a.get<double>("value");
    if (v == 0) std::memset(t.data_ptr(), 0, size_t(t.numel()) * itemsize(t.dtype()));
    else fill(t, [&](int64_t) { return v; });
  } else if (def.name == "arange" || def.name == "linspace") {
    RangeParams r = range_params(def.name, a, t.numel());
    fill(t, [&](int64_t i) { return range_element(r, i, t.numel()); });
  } else {
    throw_error("eager: no creation runner for op ", def.name);
  }
  return {t};
}

}  // namespace kiln
