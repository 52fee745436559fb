// Where compiled pipelines' own allocations (materialized intermediates) come from: kiln's caching
// allocator, for JIT pipelines (JITHandlers) and for the standalone runtime of cached ones. Fresh
// multi-megabyte blocks on every call would page-fault each time.
#pragma once
#include <cstddef>

namespace kiln {

void* pipeline_malloc(void* user_context, size_t bytes);
void pipeline_free(void* user_context, void* ptr);

}  // namespace kiln
