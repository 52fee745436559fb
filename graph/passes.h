// Graph passes: free functions that rewrite a Graph in place and return how many nodes they
// changed. Each leaves the graph valid: values in topological order, every input kept, outputs
// in order. Nodes of random ops (OpDef::random) are never dropped, merged or folded, so a compiled
// function draws from the generator exactly as eager code does.
//
//   int n = eliminate_common_subexpressions(g);  // exp(x) twice -> once
//   fold_views(g);                               // view(x, x's shape) -> x
//   decompose(g, {"softmax", "layer_norm"});     // composite ops -> primitive ops
//   eliminate_dead_code(g);
#pragma once
#include <set>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace kiln {

// Removes the nodes none of whose outputs reach g.outputs, except random nodes: dropping an
// unused draw would shift every later draw of the random stream away from eager's. Values are
// renumbered compactly (inputs first, in order); all inputs stay. Returns the nodes removed.
int eliminate_dead_code(Graph& g);

// Merges nodes with the same op, exactly equal attributes and the same input values into the
// first of them (never random ops), then removes what became dead. Returns the nodes merged.
int eliminate_common_subexpressions(Graph& g);

// Folds shape arithmetic: a view whose output has its input's shape, strides and offset is its
// input (view to the same shape, transpose(d, d), identity permute, squeeze of no size-1 dim);
// view(reshape-like(x)) of a contiguous x becomes one view of x. Returns the views folded.
int fold_views(Graph& g);

// A transpose of a 2-D matmul's result that nothing else reads becomes the matmul of the
// transposed operands, (a b)^T = b^T a^T: the GEMM writes the layout its readers want instead of
// leaving them a transposed view (a weight's gradient, read by the optimizer's update). Returns
// the matmuls rewritten.
int transpose_matmuls(Graph& g);

// On CUDA, a matmul operand that cuBLAS cannot read in place (a matrix neither row- nor
// column-major, such as a slice with a step along both dims) gets an explicit `contiguous` node,
// which a pipeline computes (fused with its neighbours where it can) instead of the eager matmul
// copying it with a kernel of its own: the rule is the eager matmul's (cublas_dense_copies in
// dsl/eager/matmul.h). Heads viewed out of one projection need no copy: their batch dims go to
// cuBLAS as pointer arrays. (The CPU's GEMM layouts: schedules/gemm_layout.h.) Returns the copies
// inserted.
int cublas_gemm_operands(Graph& g);

// On CUDA, add(matmul(a, b), bias) with bias [N] along the product's last dim, the product read
// by nothing else, becomes matmul_bias(a, b, bias): cuBLASLt adds the bias in its GEMM's epilogue
// (where cublas_bias_epilogue_applies, dsl/eager/matmul.h). GPT-2's q, k, v projection otherwise
// wrote its [8192, 2304] product and read it back to add the bias, 36 us a layer on an H200.
// Runs after differentiation: matmul_bias has no derivative rule. `notes` gets a line per add of
// a matmul's product on CUDA: folded, or kept apart and why. With `fused_readers` (the backend
// fuses ops), a sum that only pointwise ops read keeps its add, which their pipeline computes
// (except before a tanh GELU, which joins the epilogue). Returns the matmuls folded.
int cublas_bias_epilogue(Graph& g, std::vector<std::string>* notes = nullptr, bool fused_readers = false);

// On CUDA, after cublas_bias_epilogue, GELU in its tanh form (GPT-2's) moves into the epilogue of
// the cuBLASLt GEMM beside it: gelu(matmul_bias(a, b, bias)) becomes matmul_bias_gelu(a, b, bias),
// which also writes GELU's input (aux) where something else reads it (the backward's
// gelu_backward); gelu_backward(matmul(a, b), x), the product read by nothing else, becomes
// matmul_gelu_backward(a, b, x). In GPT-2's bf16 step the two GELU kernels of a layer took 50 and
// 59 us on an H200, each reading and writing [8192, 3072]. Not for the erf form (cuBLASLt has
// none), a batch of products, or an aux whose rows are not a multiple of 8 long. `notes` gets a
// line per GELU or GELU gradient of a GEMM's product on CUDA: folded, or kept apart and why.
// Returns the GELUs folded.
int cublas_gelu_epilogues(Graph& g, std::vector<std::string>* notes = nullptr);

// On CUDA, a Linear's bias gradient, sum(dy) over every dim but the last, is summed in the epilogue
// (cuBLASLt's BGRADB) of the weight gradient's GEMM, matmul(dy.flatten(0, -2).t(), x), which
// reads dy anyway: both become matmul_bias_grad(dy^T, x) -> {the weight gradient, the bias
// gradient}, at the earlier of the two places (the operands' views are made again there). In
// GPT-2's bf16 step the bias gradients of the fc and qkv Linears took 25 and 22 us a layer on an
// H200 as column-sum kernels. Static shapes, dy dense and of the sum's dtype. `notes` gets a line
// per such sum on CUDA: folded, or kept apart and why. Returns the sums folded.
int cublas_bias_grad_epilogues(Graph& g, std::vector<std::string>* notes = nullptr);

// On CUDA, for a contiguous static f32 input (graph/split_long_reductions.cpp): softmax,
// log_softmax and logsumexp along its last dim, rows of at least 16384 elements, become a split
// reduction: each chunk's max and sum of exps in one pass over the rows, the chunks combined per
// row, the output in a second pass (a [8192, 50304] softmax read its logits three times and wrote
// once; split, twice); cross_entropy of (N, C) logits becomes the split log-sum-exps, the target
// logits gathered (an embedding of the logits viewed as one column) and their mean difference.
// A sum, mean, max or min of all of at least 2^20 elements becomes the same
// op over chunks, then over the chunks' results. A chunk is the longest divisor of the row (the
// element count) in [128, 8192]; reductions no such chunk divides are kept. Returns the nodes split.
int split_long_reductions(Graph& g);

// softmax(scale * q k^T, causally masked) v, spelled with matmul, mul, where and softmax on CPU
// values of rank 4, becomes one `attention` node, and the backward the derivative rules traced for
// it (when the graph has it) one `attention_backward` node (graph/fuse_attention.cpp lists the
// exact forms). A chain with an intermediate read elsewhere is left alone. `notes` gets one line
// per fused attention. Returns the attentions fused.
int fuse_attention(Graph& g, std::vector<std::string>* notes = nullptr);

// An attention output whose heads the graph merges (contiguous(transpose(o, 1, 2)), then a
// reshape) is written by the attention in that [B, T, H, Dv] order instead (its `merged_heads`
// attribute), and the copy goes; the backward reads a transposed view of it. Attentions whose
// output anything else reads are left alone (graph/attention_layout.cpp). Returns the attentions
// changed.
int merge_attention_heads(Graph& g);

// The sum of zero-padded cats along one dim (the gradient of a value split by slices, q, k and v
// out of one projection: cat(0, 0, dv) + cat(dq, 0, 0) + cat(0, dk, 0)) becomes one cat of the
// pieces (cat(dq, dk, dv)), pieces over zeros taken as they are and pieces over pieces added.
// Static shapes only. Returns the sums merged.
int merge_padded_cat_sums(Graph& g);

// Replaces the nodes of the named composite ops by primitive ops (see default_decompositions()
// for the ones it knows; others are left alone). Constants become 0-d `full` nodes. Returns the
// nodes decomposed.
//   softmax(x, dim)     -> e = exp(x - max(x, dim, keepdim)); e / sum(e, dim, keepdim)
//   layer_norm(x, w, b) -> xc = x - mean(x); xc * rsqrt(mean(square(xc)) + eps) * w + b
int decompose(Graph& g, const std::set<std::string>& ops);
std::vector<std::string> default_decompositions();

}  // namespace kiln
