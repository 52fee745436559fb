// kiln: torch.compile for C++, built on Halide. The one header users include.
//
//   #include "kiln.h"
//   using namespace kiln;
//   manual_seed(0);
//   Tensor x = randn({64, 128});
//   Tensor y = gelu(matmul(x, randn({128, 256})));
#pragma once

#include "dsl/autocast.h"
#include "dsl/creation.h"
#include "dsl/custom_op.h"
#include "dsl/cuda/cuda_allocator.h"
#include "dsl/cuda/cuda_context.h"
#include "dsl/cuda/cudnn_api.h"
#include "dsl/cuda/nccl_api.h"
#include "dsl/eager/cublas_gemm.h"
#include "dsl/dtype.h"
#include "dsl/eigen.h"
#include "dsl/device.h"
#include "dsl/distributed/ddp.h"
#include "dsl/distributed/launch.h"
#include "dsl/distributed/process_group.h"
#include "dsl/error.h"
#include "dsl/flush_denormal.h"
#include "dsl/functions.h"
#include "dsl/npy.h"
#include "dsl/profiler.h"
#include "dsl/random.h"
#include "dsl/tensor.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/tape_memory.h"
#include "dsl/nn/layers.h"
#include "dsl/nn/state_dict.h"
#include "dsl/nn/transformer.h"
#include "dsl/optim/grad_scaler.h"
#include "dsl/optim/optimizer.h"
#include "graph/check_op.h"
#include "graph/compile.h"
#include "graph/halide_op.h"
#include "aot/model.h"
#include "aot/program.h"
#include "graph/logs.h"
