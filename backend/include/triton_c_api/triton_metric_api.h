// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// Our own declarations of the custom-metrics part of Triton's TRITONSERVER
// C API (tritonserver 2.51 exports every one of them), used by
// backend/src/triton/metrics.cc. Names, parameter types and enum values follow
// the documented ABI; Triton resolves the symbols when it dlopens the
// backend.
#pragma once

#include <stdint.h>

#include "triton_c_api/triton_api.h"
#include "triton_c_api/triton_infer_api.h"

#ifdef __cplusplus
extern "C" {
#endif

struct TRITONSERVER_MetricFamily;
struct TRITONSERVER_Metric;
struct TRITONSERVER_MetricArgs;

typedef struct TRITONSERVER_MetricFamily TRITONSERVER_MetricFamily;
typedef struct TRITONSERVER_Metric TRITONSERVER_Metric;
typedef struct TRITONSERVER_MetricArgs TRITONSERVER_MetricArgs;

typedef enum TRITONSERVER_metrickind_enum {
  TRITONSERVER_METRIC_KIND_COUNTER = 0,
  TRITONSERVER_METRIC_KIND_GAUGE = 1,
  TRITONSERVER_METRIC_KIND_HISTOGRAM = 2
} TRITONSERVER_MetricKind;

// Families: the caller owns the family and deletes it after its metrics.
TRITONSERVER_Error* TRITONSERVER_MetricFamilyNew(
    TRITONSERVER_MetricFamily** family, const TRITONSERVER_MetricKind kind,
    const char* name, const char* description);
TRITONSERVER_Error* TRITONSERVER_MetricFamilyDelete(
    TRITONSERVER_MetricFamily* family);

// Metric arguments (histogram buckets), for MetricNewWithArgs.
TRITONSERVER_Error* TRITONSERVER_MetricArgsNew(TRITONSERVER_MetricArgs** args);
TRITONSERVER_Error* TRITONSERVER_MetricArgsSetHistogram(
    TRITONSERVER_MetricArgs* args, const double* buckets,
    const uint64_t buckets_count);
TRITONSERVER_Error* TRITONSERVER_MetricArgsDelete(
    TRITONSERVER_MetricArgs* args);

// Metrics: labels are STRING parameters the caller still owns afterwards;
// `args` is null for counters and gauges.
TRITONSERVER_Error* TRITONSERVER_MetricNewWithArgs(
    TRITONSERVER_Metric** metric, TRITONSERVER_MetricFamily* family,
    const TRITONSERVER_Parameter** labels, const uint64_t label_count,
    const TRITONSERVER_MetricArgs* args);
TRITONSERVER_Error* TRITONSERVER_MetricDelete(TRITONSERVER_Metric* metric);

// Counters and gauges only.
TRITONSERVER_Error* TRITONSERVER_MetricValue(
    TRITONSERVER_Metric* metric, double* value);
// Gauges any value; counters only values >= 0.
TRITONSERVER_Error* TRITONSERVER_MetricIncrement(
    TRITONSERVER_Metric* metric, double value);
// Gauges only.
TRITONSERVER_Error* TRITONSERVER_MetricSet(
    TRITONSERVER_Metric* metric, double value);
// Histograms only.
TRITONSERVER_Error* TRITONSERVER_MetricObserve(
    TRITONSERVER_Metric* metric, double value);
TRITONSERVER_Error* TRITONSERVER_GetMetricKind(
    TRITONSERVER_Metric* metric, TRITONSERVER_MetricKind* kind);

#ifdef __cplusplus
}  // extern "C"
#endif
