#pragma once
// The report's "Operators" section: the run's operator-level spans by name, CPU side and GPU
// side, with their share of each side's time, and the GPU time split into kernels, memcpy,
// memset and communication.
//   CPU side: cpu_op, cuda_runtime, cuda_driver, python_function spans (Kineto), tf_op (a
//             TensorFlow profiler trace's host ops, from SageMaker's detailed profiling).
//   GPU side: kernel, gpu_memcpy, gpu_memset (Kineto), tf_device_op (the TF trace's device
//             tracks).
// Annotations that enclose other spans (user_annotation, gpu_user_annotation) are left out, so
// that no time counts twice; so are instants (cProfile's python_function rows are the Python
// functions section's, report_python.h).
//
// Threads: BuildOperators reads through one RunReader, called from one thread.

#include "base/status.h"
#include "report/report_model.h"
#include "store/run_reader.h"

namespace trainprof::report {

Status BuildOperators(store::RunReader& reader, Operators* out);

}  // namespace trainprof::report
