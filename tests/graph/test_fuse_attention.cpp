// fuse_attention (graph/fuse_attention.cpp): attention written with matmul, softmax and a causal
// where becomes the fused attention ops in compiled graphs, forward and traced backward, with
// eager's outputs and gradients; chains it must not touch (probabilities the caller also gets, a
// mask other than the causal one) stay as they are and still give eager's results.
#include <filesystem>
#include <unistd.h>

#include <cmath>
#include <sstream>

#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;
namespace fs = std::filesystem;

namespace {

enum class Mask { none, causal, anti_causal };

// Attention as a user writes it (nn::CausalSelfAttention's form), returning the probabilities too.
std::pair<Tensor, Tensor> attend(const Tensor& q, const Tensor& k, const Tensor& v, Mask mask) {
  Tensor s = matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(double(q.size(3))));
  if (mask != Mask::none) {
    Tensor pos = arange(0, double(q.size(2)), 1, {.dtype = DType::i64});
    Tensor seen = mask == Mask::causal ? ge(pos.unsqueeze(1), pos.unsqueeze(0)) : le(pos.unsqueeze(1), pos.unsqueeze(0));
    s = where(seen, s, -INFINITY);
  }
  Tensor p = softmax(s, -1);
  return {matmul(p, v), p};
}

struct Run {
  TensorList outputs, grads;
  std::string optimized;  // the compiled graph's text ("" when eager)
};

// Outputs and q, k, v gradients of sum(out * w), eager or compiled on `backend`.
Run run(Mask mask, bool return_p, const std::string& backend) {
  EnableGradGuard grad;
  Tensor q = random_tensor({2, 3, 70, 8}, f32, 1).requires_grad_(), k = random_tensor({2, 3, 70, 8}, f32, 2).requires_grad_(),
         v = random_tensor({2, 3, 70, 8}, f32, 3).requires_grad_(), w = random_tensor({2, 3, 70, 8}, f32, 4);
  auto fn = [&](const Tensor& a, const Tensor& b, const Tensor& c) {
    auto [out, p] = attend(a, b, c, mask);
    return return_p ? TensorList{out, p} : TensorList{out};
  };
  std::string dir = (fs::temp_directory_path() / ("kiln-test-fuse-attention-" + std::to_string(::getpid()))).string();
  Run r;
  if (backend.empty()) {
    r.outputs = fn(q, k, v);
  } else {
    fs::remove_all(dir);
    set_debug_dir(dir);
    auto f = compile([&](const Tensor& a, const Tensor& b, const Tensor& c) { return fn(a, b, c); },
                     {.backend = backend, .name = "attention"});
    r.outputs = f(q, k, v);
    set_debug_dir("");
    r.optimized = dumped(dir, ".optimized.txt");
    fs::remove_all(dir);
  }
  (r.outputs[0] * w).sum().backward();
  r.grads = {q.grad(), k.grad(), v.grad()};
  return r;
}

void check_matches_eager(const Run& got, const Run& eager, const std::string& what) {
  BOOST_TEST_REQUIRE(got.outputs.size() == eager.outputs.size());
  for (size_t i = 0; i < got.outputs.size(); ++i)
    check_close(got.outputs[i], host_values(eager.outputs[i]), eager.outputs[i].shape(), {2e-5, 2e-5},
                what + ": output " + std::to_string(i));
  const char* names[] = {"q", "k", "v"};
  for (size_t i = 0; i < 3; ++i)
    check_close(got.grads[i], host_values(eager.grads[i]), eager.grads[i].shape(), {2e-5, 2e-5},
                what + ": grad " + names[i]);
}

bool has_op(const std::string& graph, const std::string& op) { return graph.find("= " + op + "(") != std::string::npos; }

// Whether the attention's first output (the line "  %N: ... = attention(...merged_heads=true...)")
// is read straight by a reshaping view: the head-merging copy is gone.
bool merged_output_is_read_as_a_view(const std::string& graph) {
  std::istringstream lines(graph);
  std::string line, out;
  while (std::getline(lines, line)) {
    if (out.empty() && line.find("= attention(") != std::string::npos && line.find("merged_heads=true") != std::string::npos) {
      size_t at = line.find('%');
      out = line.substr(at, line.find(':', at) - at);
    } else if (!out.empty() && (line.find("(" + out + ",") != std::string::npos || line.find("(" + out + ")") != std::string::npos)) {
      for (const char* view : {"= view(", "= reshape(", "= flatten("})
        if (line.find(view) != std::string::npos) return true;
    }
  }
  return false;
}

}  // namespace

BOOST_AUTO_TEST_CASE(causal_and_unmasked_attention_run_fused_with_eager_gradients) {
  for (Mask mask : {Mask::causal, Mask::none})
    for (std::string backend : {"halide", "eager"}) {
      std::string what = std::string(mask == Mask::causal ? "causal" : "unmasked") + " on " + backend;
      Run c = run(mask, false, backend);
      BOOST_TEST(has_op(c.optimized, "attention"), what << ":\n" << c.optimized);
      // The halide backend compiles a joint graph (the traced backward is fused too); the eager
      // backend records the attention op on the tape, whose derivative rule runs its backward.
      BOOST_TEST(has_op(c.optimized, "attention_backward") == (backend == "halide"), what << ":\n" << c.optimized);
      BOOST_TEST(!has_op(c.optimized, "softmax"), what << ":\n" << c.optimized);
      BOOST_TEST((c.optimized.find("causal=true") != std::string::npos) == (mask == Mask::causal), what);
      check_matches_eager(c, run(mask, false, ""), what);
    }
}

BOOST_AUTO_TEST_CASE(probabilities_the_caller_gets_and_other_masks_are_left_alone) {
  Run p = run(Mask::causal, true, "halide");
  BOOST_TEST(!has_op(p.optimized, "attention"), p.optimized);
  BOOST_TEST(has_op(p.optimized, "softmax"), p.optimized);
  check_matches_eager(p, run(Mask::causal, true, ""), "probabilities returned");
  Run a = run(Mask::anti_causal, false, "halide");
  BOOST_TEST(!has_op(a.optimized, "attention"), a.optimized);
  check_matches_eager(a, run(Mask::anti_causal, false, ""), "keys j >= i");
}

// The heads merged after the attention (transpose, contiguous, reshape, as nn::CausalSelfAttention
// does): the attention writes its output in [B, T, H, D] order (merged_heads) and the copy goes;
// outputs and gradients (through the joint graph on halide, the tape's derivative rule on eager)
// are eager's.
BOOST_AUTO_TEST_CASE(merged_heads_are_written_by_the_attention_without_a_copy) {
  auto run_merged = [](const std::string& backend, std::string* optimized) {
    EnableGradGuard grad;
    Tensor q = random_tensor({2, 3, 40, 8}, f32, 5).requires_grad_(), k = random_tensor({2, 3, 40, 8}, f32, 6).requires_grad_(),
           v = random_tensor({2, 3, 40, 8}, f32, 7).requires_grad_(), w = random_tensor({2, 40, 24}, f32, 8);
    auto fn = [](const Tensor& a, const Tensor& b, const Tensor& c) {
      Tensor o = attend(a, b, c, Mask::causal).first;
      return o.transpose(1, 2).contiguous().reshape({o.size(0), o.size(2), o.size(1) * o.size(3)});
    };
    Tensor y;
    if (backend.empty()) {
      y = fn(q, k, v);
    } else {
      std::string dir =
          (fs::temp_directory_path() / ("kiln-test-merged-heads-" + std::to_string(::getpid()))).string();
      fs::remove_all(dir);
      set_debug_dir(dir);
      auto f = compile([&](const Tensor& a, const Tensor& b, const Tensor& c) { return fn(a, b, c); },
                       {.backend = backend, .name = "merged"});
      y = f(q, k, v);
      set_debug_dir("");
      *optimized = dumped(dir, ".optimized.txt");
      fs::remove_all(dir);
    }
    (y * w).sum().backward();
    return TensorList{y, q.grad(), k.grad(), v.grad()};
  };
  std::string unused;
  TensorList want = run_merged("", &unused);
  for (std::string backend : {"halide", "eager"}) {
    std::string optimized;
    TensorList got = run_merged(backend, &optimized);
    BOOST_TEST(optimized.find("merged_heads=true") != std::string::npos, backend << ":\n" << optimized);
    BOOST_TEST(merged_output_is_read_as_a_view(optimized), backend << ":\n" << optimized);
    const char* names[] = {"output", "grad q", "grad k", "grad v"};
    for (size_t i = 0; i < want.size(); ++i)
      check_close(got[i], host_values(want[i]), want[i].shape(), {2e-5, 2e-5}, backend + ": " + names[i]);
  }
}
