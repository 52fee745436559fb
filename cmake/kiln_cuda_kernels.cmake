# kiln_add_cuda_kernels(TARGET SOURCES a.cu [b.cu ...] [ARCHITECTURES 80 90])
#
# Compiles CUDA sources with nvcc into TARGET (a program or library that links kiln), for the CUDA
# kernels of custom ops (dsl/custom_op.h) written as .cu files. Each architecture gets its machine
# code, the last also its PTX (newer GPUs compile that at load); the default 80 90 covers A100,
# H100 and H200. The CUDA runtime is linked statically, so the program needs no libcudart at run
# time, and it starts on machines without a GPU or driver: the runtime loads the driver on its
# first call. A kernel launches on kiln's stream (cuda_stream(device) in dsl/custom_op.h) so that
# it runs in order with kiln's own kernels and copies:
#
#   // scale.cu
#   __global__ void scale(const float* x, float* y, float s, long long n) { ... }
#   void launch_scale(const float* x, float* y, float s, long long n, void* stream) {
#     scale<<<(n + 255) / 256, 256, 0, static_cast<cudaStream_t>(stream)>>>(x, y, s, n);
#   }
#
# nvcc is the one in CUDAToolkit_ROOT, CUDA_PATH or /usr/local/cuda (KILN_NVCC caches it); without
# it the function stops the configure with a message. kiln_cuda_kernels_available(VAR) says
# whether it would.
function(kiln_find_nvcc)
  find_program(KILN_NVCC nvcc HINTS ${CUDAToolkit_ROOT} $ENV{CUDA_PATH} /usr/local/cuda PATH_SUFFIXES bin
               DOC "nvcc for kiln_add_cuda_kernels")
  if (KILN_NVCC)
    get_filename_component(bin ${KILN_NVCC} DIRECTORY)
    find_library(KILN_CUDART_STATIC cudart_static HINTS ${bin}/../lib64 ${bin}/../targets/x86_64-linux/lib
                 DOC "the static CUDA runtime for kiln_add_cuda_kernels")
  endif ()
endfunction()

function(kiln_cuda_kernels_available var)
  kiln_find_nvcc()
  if (KILN_NVCC AND KILN_CUDART_STATIC)
    set(${var} TRUE PARENT_SCOPE)
  else ()
    set(${var} FALSE PARENT_SCOPE)
  endif ()
endfunction()

function(kiln_add_cuda_kernels target)
  cmake_parse_arguments(ARG "" "" "SOURCES;ARCHITECTURES" ${ARGN})
  if (NOT ARG_SOURCES)
    message(FATAL_ERROR "kiln_add_cuda_kernels(${target}): no SOURCES")
  endif ()
  if (NOT ARG_ARCHITECTURES)
    set(ARG_ARCHITECTURES 80 90)
  endif ()
  kiln_find_nvcc()
  if (NOT KILN_NVCC OR NOT KILN_CUDART_STATIC)
    message(FATAL_ERROR "kiln_add_cuda_kernels(${target}): nvcc or the static CUDA runtime (libcudart_static.a) "
                        "was not found; install the CUDA toolkit (/usr/local/cuda) or set CUDAToolkit_ROOT")
  endif ()
  set(gencode)
  foreach (arch IN LISTS ARG_ARCHITECTURES)
    list(APPEND gencode -gencode=arch=compute_${arch},code=sm_${arch})
  endforeach ()
  list(GET ARG_ARCHITECTURES -1 last)
  list(APPEND gencode -gencode=arch=compute_${last},code=compute_${last})
  set(objects)
  foreach (src IN LISTS ARG_SOURCES)
    get_filename_component(path ${src} ABSOLUTE)
    get_filename_component(stem ${src} NAME_WE)
    set(obj ${CMAKE_CURRENT_BINARY_DIR}/kiln_cuda_kernels/${target}/${stem}.o)
    add_custom_command(
      OUTPUT ${obj}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_CURRENT_BINARY_DIR}/kiln_cuda_kernels/${target}
      COMMAND ${KILN_NVCC} -c -O3 -std=c++17 -ccbin ${CMAKE_CXX_COMPILER} -Xcompiler=-fPIC ${gencode} ${path} -o ${obj}
      DEPENDS ${path}
      IMPLICIT_DEPENDS CXX ${path}
      COMMENT "nvcc ${src} (${target}: sm ${ARG_ARCHITECTURES})"
      VERBATIM)
    list(APPEND objects ${obj})
  endforeach ()
  set_source_files_properties(${objects} PROPERTIES EXTERNAL_OBJECT TRUE GENERATED TRUE)
  target_sources(${target} PRIVATE ${objects})
  find_package(Threads REQUIRED)
  target_link_libraries(${target} PRIVATE ${KILN_CUDART_STATIC} Threads::Threads ${CMAKE_DL_LIBS} rt)
endfunction()
