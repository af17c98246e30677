/*
 * GrandCentral: Grand Central Dispatch for Linux.
 *
 * base.h: the attribute and declaration macros the other headers are written with.
 * Every macro degrades to nothing on a compiler that lacks the feature, so the headers
 * build with gcc and clang, as C99, C11 and C++, with or without -fblocks. Feature
 * tests go through DISPATCH_HAS_* wrappers rather than defining __has_feature and
 * friends, which would change what the client's own #if tests see.
 */
#ifndef __DISPATCH_BASE__
#define __DISPATCH_BASE__

#ifndef __DISPATCH_INDIRECT__
#error "#include <dispatch/dispatch.h> rather than the headers it includes"
#endif

/* MARK: - Feature tests */

#if defined(__has_attribute)
#define DISPATCH_HAS_ATTRIBUTE(x) __has_attribute(x)
#else
#define DISPATCH_HAS_ATTRIBUTE(x) 0
#endif
#if defined(__has_feature)
#define DISPATCH_HAS_FEATURE(x) __has_feature(x)
#else
#define DISPATCH_HAS_FEATURE(x) 0
#endif
#if defined(__has_extension)
#define DISPATCH_HAS_EXTENSION(x) __has_extension(x)
#else
#define DISPATCH_HAS_EXTENSION(x) DISPATCH_HAS_FEATURE(x)
#endif
#if defined(__has_builtin)
#define DISPATCH_HAS_BUILTIN(x) __has_builtin(x)
#else
#define DISPATCH_HAS_BUILTIN(x) 0
#endif

#if defined(__GNUC__) || defined(__clang__)
#define DISPATCH_GNU_ATTRIBUTES 1
#else
#define DISPATCH_GNU_ATTRIBUTES 0
#endif

/* MARK: - Linkage
 *
 * The library builds with every symbol hidden except libdispatch's names, so the
 * declarations carry default visibility explicitly. */

#ifndef DISPATCH_EXTERN
#if defined(__cplusplus)
#define DISPATCH_EXTERN extern "C"
#else
#define DISPATCH_EXTERN extern
#endif
#endif

#if DISPATCH_GNU_ATTRIBUTES
#define DISPATCH_EXPORT DISPATCH_EXTERN __attribute__((__visibility__("default")))
#else
#define DISPATCH_EXPORT DISPATCH_EXTERN
#endif

/* Inline helpers are static so that every translation unit gets its own copy and no
 * symbol is emitted; __inline__ is accepted by gcc and clang even under -std=c99. */
#if DISPATCH_GNU_ATTRIBUTES
#define DISPATCH_INLINE static __inline__
#else
#define DISPATCH_INLINE static inline
#endif

/* MARK: - Function attributes */

#if DISPATCH_GNU_ATTRIBUTES
#define DISPATCH_NORETURN __attribute__((__noreturn__))
#define DISPATCH_NOTHROW __attribute__((__nothrow__))
#define DISPATCH_SENTINEL __attribute__((__sentinel__))
#define DISPATCH_PURE __attribute__((__pure__))
#define DISPATCH_CONST __attribute__((__const__))
#define DISPATCH_WARN_RESULT __attribute__((__warn_unused_result__))
#define DISPATCH_MALLOC __attribute__((__malloc__))
#define DISPATCH_ALWAYS_INLINE __attribute__((__always_inline__))
#define DISPATCH_UNAVAILABLE __attribute__((__unavailable__))
#define DISPATCH_UNAVAILABLE_MSG(msg) __attribute__((__unavailable__(msg)))
#define DISPATCH_DEPRECATED(msg) __attribute__((__deprecated__(msg)))
#define DISPATCH_FORMAT(archetype, fmt, first) \
		__attribute__((__format__(archetype, fmt, first)))
#else
#define DISPATCH_NORETURN
#define DISPATCH_NOTHROW
#define DISPATCH_SENTINEL
#define DISPATCH_PURE
#define DISPATCH_CONST
#define DISPATCH_WARN_RESULT
#define DISPATCH_MALLOC
#define DISPATCH_ALWAYS_INLINE
#define DISPATCH_UNAVAILABLE
#define DISPATCH_UNAVAILABLE_MSG(msg)
#define DISPATCH_DEPRECATED(msg)
#define DISPATCH_FORMAT(archetype, fmt, first)
#endif

/* gcc has no "unavailable" attribute; its "error" attribute rejects calls the same way. */
#if !DISPATCH_HAS_ATTRIBUTE(unavailable)
#undef DISPATCH_UNAVAILABLE
#undef DISPATCH_UNAVAILABLE_MSG
#if DISPATCH_GNU_ATTRIBUTES
#define DISPATCH_UNAVAILABLE __attribute__((__error__("unavailable in GrandCentral")))
#define DISPATCH_UNAVAILABLE_MSG(msg) __attribute__((__error__(msg)))
#else
#define DISPATCH_UNAVAILABLE
#define DISPATCH_UNAVAILABLE_MSG(msg)
#endif
#endif

#if DISPATCH_HAS_ATTRIBUTE(cold)
#define DISPATCH_COLD __attribute__((__cold__))
#else
#define DISPATCH_COLD
#endif

#if DISPATCH_HAS_ATTRIBUTE(not_tail_called)
#define DISPATCH_NOT_TAIL_CALLED __attribute__((__not_tail_called__))
#else
#define DISPATCH_NOT_TAIL_CALLED
#endif

/* A block parameter marked DISPATCH_NOESCAPE is only used during the call (clang). */
#if DISPATCH_HAS_ATTRIBUTE(noescape)
#define DISPATCH_NOESCAPE __attribute__((__noescape__))
#else
#define DISPATCH_NOESCAPE
#endif

/* Pointer arguments that must not be NULL. The library itself is compiled with these
 * turned off (__GRANDCENTRAL_BUILDING__): with them on, the compiler may delete the
 * NULL checks that turn misuse into a "BUG IN CLIENT" message instead of a crash. */
#if DISPATCH_GNU_ATTRIBUTES && !defined(__GRANDCENTRAL_BUILDING__)
#define DISPATCH_NONNULL1 __attribute__((__nonnull__(1)))
#define DISPATCH_NONNULL2 __attribute__((__nonnull__(2)))
#define DISPATCH_NONNULL3 __attribute__((__nonnull__(3)))
#define DISPATCH_NONNULL4 __attribute__((__nonnull__(4)))
#define DISPATCH_NONNULL5 __attribute__((__nonnull__(5)))
#define DISPATCH_NONNULL6 __attribute__((__nonnull__(6)))
#define DISPATCH_NONNULL7 __attribute__((__nonnull__(7)))
#define DISPATCH_NONNULL_ALL __attribute__((__nonnull__))
#else
#define DISPATCH_NONNULL1
#define DISPATCH_NONNULL2
#define DISPATCH_NONNULL3
#define DISPATCH_NONNULL4
#define DISPATCH_NONNULL5
#define DISPATCH_NONNULL6
#define DISPATCH_NONNULL7
#define DISPATCH_NONNULL_ALL
#endif

/* Objects are plain C pointers, not Objective-C objects: there is no ARC to tell that a
 * function returns a +1 reference, so these document the ownership and expand to nothing. */
#define DISPATCH_RETURNS_RETAINED
#define DISPATCH_RETURNS_RETAINED_BLOCK

/* Clang's nullability regions. GrandCentral's own headers do not use them (they would
 * make clang warn about the NULL that many parameters accept); they exist for client
 * code written against libdispatch's headers. */
#if DISPATCH_HAS_FEATURE(assume_nonnull)
#define DISPATCH_ASSUME_NONNULL_BEGIN _Pragma("clang assume_nonnull begin")
#define DISPATCH_ASSUME_NONNULL_END _Pragma("clang assume_nonnull end")
#else
#define DISPATCH_ASSUME_NONNULL_BEGIN
#define DISPATCH_ASSUME_NONNULL_END
#endif

/* Swift import annotations, for source compatibility; GrandCentral's Swift API does not
 * import these headers. */
#define DISPATCH_SWIFT_UNAVAILABLE(msg)
#define DISPATCH_SWIFT3_UNAVAILABLE(msg)
#define DISPATCH_SWIFT_NAME(name)
#define DISPATCH_REFINED_FOR_SWIFT

#ifdef __linux__
#define DISPATCH_LINUX_UNAVAILABLE() \
		DISPATCH_UNAVAILABLE_MSG("This interface is unavailable on Linux")
#else
#define DISPATCH_LINUX_UNAVAILABLE()
#endif

/* MARK: - Statements */

/* DISPATCH_EXPECT(x, v): x, with the hint that it usually equals v. */
#if DISPATCH_GNU_ATTRIBUTES
#define DISPATCH_EXPECT(x, v) __builtin_expect((x), (v))
#else
#define DISPATCH_EXPECT(x, v) (x)
#endif

/* Stops the compiler from moving memory accesses across this point; emits no
 * instruction. */
#if DISPATCH_GNU_ATTRIBUTES
#define dispatch_compiler_barrier() __asm__ __volatile__("" ::: "memory")
#else
#define dispatch_compiler_barrier() do { } while (0)
#endif

#if DISPATCH_HAS_BUILTIN(__builtin_assume)
#define DISPATCH_COMPILER_CAN_ASSUME(expr) __builtin_assume(expr)
#else
#define DISPATCH_COMPILER_CAN_ASSUME(expr) ((void)0)
#endif

#if defined(__cplusplus) && __cplusplus >= 201703L
#define DISPATCH_FALLTHROUGH [[fallthrough]]
#elif DISPATCH_HAS_ATTRIBUTE(fallthrough) && !defined(__cplusplus)
#define DISPATCH_FALLTHROUGH __attribute__((__fallthrough__))
#else
#define DISPATCH_FALLTHROUGH
#endif

/* MARK: - Types
 *
 * DISPATCH_ENUM declares name_t as an integer type of a fixed width, with the
 * enumerators as its values. C++11 gets a real enum with that underlying type; C (before
 * C23) cannot fix an enum's type, so it gets an anonymous enum plus a typedef. Either way
 * the type has the same size as libdispatch's.
 *
 * DISPATCH_OPTIONS is the same for bit sets: name_t stays the integer type even in C++,
 * so `A | B` converts to it without a cast. */
#if defined(__cplusplus) && __cplusplus >= 201103L
#define DISPATCH_ENUM(name, type, ...) \
		typedef enum : type { __VA_ARGS__ } name##_t
#define DISPATCH_OPTIONS(name, type, ...) \
		typedef type name##_t; \
		enum : name##_t { __VA_ARGS__ }
#else
#define DISPATCH_ENUM(name, type, ...) \
		enum { __VA_ARGS__ }; \
		typedef type name##_t
#define DISPATCH_OPTIONS(name, type, ...) \
		enum { __VA_ARGS__ }; \
		typedef type name##_t
#endif

/* A C argument of union type that accepts any of the union's member types without a
 * cast (gcc and clang). C++ uses a class hierarchy instead (object.h). */
#if !defined(__cplusplus) && DISPATCH_GNU_ATTRIBUTES
#define DISPATCH_TRANSPARENT_UNION __attribute__((__transparent_union__))
#else
#define DISPATCH_TRANSPARENT_UNION
#endif

/*!
 * @typedef dispatch_function_t
 * A work function: called with the context pointer that was submitted with it.
 */
typedef void (*dispatch_function_t)(void *);

#endif /* __DISPATCH_BASE__ */
