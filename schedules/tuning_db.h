// The tuning database (issue 25): what `kiln tune` measured, for compile() and the eager GEMM to
// apply. A folder (KILN_TUNING_DB, else the kiln cache's `tuning/`) holding one file a record:
//
//   # kiln tuning record (schedules/tuning_db.h)
//   kind region
//   device AMD EPYC 9B14 (2 threads)
//   versions kiln-0.1.0-1a2b3c4d5e6f7a8b halide-14.0.0
//   [body]
//   cpu.vector.scale 2
//   [key]
//   inputs %0:f32[4, 256, 2048]cpu{...}
//   ...
//
// A record's file is named by its kind and 16 hex digits of its key and device; it is applied only
// when its kind, key (for a region, its whole signature, region_signature.h), device and versions
// (KILN_CODEGEN_VERSION: kiln's version, its code generator's sources, Halide's) all equal the
// asker's, so a record of another machine, an older kiln or another region is never applied. A
// stale (other versions) region record or a malformed one is skipped with one warning per file and
// process (a stale GEMM choice is measured again, silently).
// Records are written with write_file_atomic (a temporary file renamed over the record): a writer
// killed mid-write leaves the old record or the new one, never a torn one; tuners and compiling
// processes may share the folder (the later rename of one record wins, whole).
//
// Two kinds today: "region" (a compiled region's schedule directives, region_schedule.h, written
// by `kiln tune`) and "gemm" (the eager CPU GEMM's Halide/Eigen choice, dsl/eager/gemm_choice.h,
// measured on first use or by `kiln tune --defaults`).
#pragma once
#include <optional>
#include <string>

#include "dsl/device.h"
#include "dsl/eager/gemm_choice.h"

namespace kiln {

struct TuningRecord {
  std::string kind;      // "region", "gemm"
  std::string key;       // what it tunes: a region's signature; "f32" for the GEMM choice
  std::string device;    // tuning_device_name()
  std::string versions;  // tuning_versions() when written
  std::string body;      // a region schedule's directives; a GEMM choice's points
};

// The database's folder; empty while a TuningDbScope turns it off.
std::string tuning_db_dir();
// What a record's measurement depends on besides the machine: KILN_CODEGEN_VERSION.
std::string tuning_versions();
// The machine a device's records belong to: "AMD EPYC 9B14 (2 threads)", "NVIDIA H200".
std::string tuning_device_name(Device d);

std::string tuning_record_text(const TuningRecord& r);
// kiln::Error naming `where` for a malformed text.
TuningRecord parse_tuning_record(const std::string& text, const std::string& where);
std::string tuning_record_path(const std::string& kind, const std::string& key, const std::string& device);

// Writes the record made by this kiln (tuning_versions()) atomically; returns its path.
// kiln::Error when the database is off or the folder cannot be written.
std::string write_tuning_record(const std::string& kind, const std::string& key, const std::string& device,
                                const std::string& body);
// The record of this kind, key and device made by this kiln, or none; `warn_stale`: one made by
// another kiln is worth a warning (a user's tuning is lost), else it is silently replaced.
std::optional<TuningRecord> find_tuning_record(const std::string& kind, const std::string& key,
                                               const std::string& device, bool warn_stale = true);

// This machine's GEMM choice from the database; else measured now and written there (logged under
// KILN_LOGS=schedule). The eager matmul asks it once a process (installed at start-up).
std::optional<GemmChoice> machine_gemm_choice_from_db();

// For its lifetime the database is `dir` (none: off: nothing is found or written), for every
// thread; kiln tune and the tests use it.
class TuningDbScope {
 public:
  explicit TuningDbScope(std::optional<std::string> dir);
  ~TuningDbScope();
  TuningDbScope(const TuningDbScope&) = delete;
  TuningDbScope& operator=(const TuningDbScope&) = delete;

 private:
  std::optional<std::optional<std::string>> saved_;
};

}  // namespace kiln
