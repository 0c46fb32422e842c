/* Symbol visibility, C++ linkage and attribute macros shared by every public header. */
#ifndef SPMD_EXPORT_H
#define SPMD_EXPORT_H

#if defined(_WIN32) && defined(SPMD_BUILDING)
#define SPMD_API __declspec(dllexport)
#elif defined(__GNUC__) || defined(__clang__)
#define SPMD_API __attribute__((visibility("default")))
#else
#define SPMD_API
#endif

#ifdef __cplusplus
#define SPMD_BEGIN_DECLS extern "C" {
#define SPMD_END_DECLS }
#else
#define SPMD_BEGIN_DECLS
#define SPMD_END_DECLS
#endif

/* Fallible functions: ignoring their status is a warning. */
#if defined(__GNUC__) || defined(__clang__)
#define SPMD_NODISCARD __attribute__((warn_unused_result))
#else
#define SPMD_NODISCARD
#endif

#if defined(SPMD_NO_DEPRECATION_WARNINGS)
#define SPMD_DEPRECATED(msg)
#elif defined(__GNUC__) || defined(__clang__)
#define SPMD_DEPRECATED(msg) __attribute__((deprecated(msg)))
#else
#define SPMD_DEPRECATED(msg)
#endif

#endif /* SPMD_EXPORT_H */
