#include "schedules/cpu_tuning.h"

namespace kiln {

const std::vector<CpuTunable>& cpu_tunables() {
  using T = CpuTuning;
  static const std::vector<CpuTunable> table = {
      {"cpu.task.elements", 256, int64_t(1) << 26, [](const T& t) { return t.task_elements; },
       [](T& t, int64_t v) { t.task_elements = v; }, "units of work a parallel task",
       {1 << 12, 1 << 14, 1 << 15, 1 << 16, 1 << 17, 1 << 18, 1 << 20}},
      {"cpu.parallel", 0, 1, [](const T& t) { return int64_t(t.parallel); }, [](T& t, int64_t v) { t.parallel = v != 0; },
       "0 runs every loop serial",
       {0, 1}},
      {"cpu.vector.scale", 1, 4, [](const T& t) { return int64_t(t.vector_scale); },
       [](T& t, int64_t v) { t.vector_scale = int(v); }, "vectors this many native vectors wide",
       {1, 2, 4}},
      {"cpu.row.partials", 1, 16, [](const T& t) { return int64_t(t.partials); },
       [](T& t, int64_t v) { t.partials = int(v); }, "a row reduction's accumulators, in vectors",
       {1, 2, 4, 8}},
      {"cpu.transpose.tile", 16, 512, [](const T& t) { return int64_t(t.transpose_tile); },
       [](T& t, int64_t v) { t.transpose_tile = int(v); }, "a transposing Func's tile edge",
       {32, 64, 128, 256}},
      {"cpu.column.task", 8, 8192, [](const T& t) { return int64_t(t.columns_per_task); },
       [](T& t, int64_t v) { t.columns_per_task = int(v); }, "a column reduction's task, in columns",
       {32, 64, 128, 256, 512}},
      {"cpu.row.fuse", 0, 1, [](const T& t) { return int64_t(t.fuse_rows); }, [](T& t, int64_t v) { t.fuse_rows = v != 0; },
       "0 computes every row op's intermediate whole before its reader",
       {0, 1}},
  };
  return table;
}

const CpuTunable* find_cpu_tunable(std::string_view directive) {
  for (const CpuTunable& t : cpu_tunables())
    if (directive == t.directive) return &t;
  return nullptr;
}

}  // namespace kiln
