// The measurement files' launch records (PyTorch profiler: each kernel's name, grid, block,
// registers, shared memory, duration), read alike by the contention fit and the lone-CTA fit.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "hardware/kernel_shapes.hpp"

namespace twin::calibrate {

// A measurement file's JSON (std::runtime_error naming the file if it cannot be read).
nlohmann::json read_measurement(const std::string& file);
// The launch that took longest: the kernel that decides the curve (nullptr: none recorded).
const nlohmann::json* major_launch(const nlohmann::json& c);
// The product of a JSON array of numbers (a grid's CTAs).
double product(const nlohmann::json& v);
// Whether a launch record is nvjet's split-K kernel (slices of k, cuBLASLt's reduction after).
bool split_k_launch(const nlohmann::json& l);
// A measured nvjet launch of an (m×k)·(k×n) GEMM, `batch` of them, read from its kernel's name
// and grid (hardware::nvjet_named_launch: a split-K kernel's slices from the grid); throws
// std::runtime_error if the name is not nvjet's.
hardware::GemmLaunch nvjet_launch(const nlohmann::json& l, const hardware::GemmDims& d,
                                  double batch);

}  // namespace twin::calibrate
