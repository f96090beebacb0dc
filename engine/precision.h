// --precision, parsed once at the command line: how a run stores its activations and weight copy
// and which math its GEMMs and convolutions use. Everything downstream asks this type, never the
// flag's text.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/data_type.h"

namespace dpbench {

enum class Precision {
  fp32,  // fp32 storage and math, no tensor cores
  tf32,  // fp32 storage, the GEMMs and convolutions on TF32 tensor cores
  fp16,  // fp16 activations and weight copy (fp32 master weights), loss scaling
  bf16,  // bf16 activations and weight copy (fp32 master weights)
};

// "fp32", "tf32", "fp16", "bf16": the flag's values, the result's "precision" and GPU peak tables.
inline const char* precision_name(Precision precision) {
  switch (precision) {
    case Precision::tf32: return "tf32";
    case Precision::fp16: return "fp16";
    case Precision::bf16: return "bf16";
    case Precision::fp32: break;
  }
  return "fp32";
}

inline const std::vector<Precision>& every_precision() {
  static const std::vector<Precision> all = {Precision::fp32, Precision::tf32, Precision::fp16, Precision::bf16};
  return all;
}

// The precision a name stands for; none for anything else.
inline std::optional<Precision> find_precision(std::string_view name) {
  for (Precision precision : every_precision())
    if (name == precision_name(precision)) return precision;
  return std::nullopt;
}

// Storage type of activations and of the weight copy: f16 / bf16 for fp16 / bf16, else f32.
inline DataType activation_type(Precision precision) {
  if (precision == Precision::fp16) return DataType::f16;
  if (precision == Precision::bf16) return DataType::bf16;
  return DataType::f32;
}

// Whether the GEMMs kept in fp32 may run on TF32 tensor cores (every precision but fp32).
inline bool allows_tf32(Precision precision) { return precision != Precision::fp32; }

}  // namespace dpbench
