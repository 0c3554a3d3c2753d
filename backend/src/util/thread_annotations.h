// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// Lock annotations checked by clang's -Wthread-safety (the clang build
// that `make test` runs: make thread-safety); empty for other compilers.
// GUARDED_BY(mu) on a field: read and written only with mu held.
// REQUIRES(mu) on a function: its caller holds mu. EXCLUDES(mu): its
// caller must not hold mu (the function takes it).
#pragma once

#if defined(__clang__)
#define TRITONPY_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define TRITONPY_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) TRITONPY_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY TRITONPY_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) TRITONPY_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) TRITONPY_THREAD_ANNOTATION(pt_guarded_by(x))
#define REQUIRES(...) \
  TRITONPY_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define ACQUIRE(...) TRITONPY_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) TRITONPY_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define EXCLUDES(...) TRITONPY_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define RETURN_CAPABILITY(x) TRITONPY_THREAD_ANNOTATION(lock_returned(x))
#define NO_THREAD_SAFETY_ANALYSIS \
  TRITONPY_THREAD_ANNOTATION(no_thread_safety_analysis)
