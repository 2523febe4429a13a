/*
 * lb_enum.h - the function that names the values of an enum, for logs,
 * JSON, /stats and /metrics.
 *
 * Header-only and dependent on nothing, so that every module includes it
 * without depending on another: balancer/ stays free of lb/ and conf/
 * (STYLE.md section 0), and conf/ and discover/ use the same one. Each
 * module keeps its own names table, indexed by its enum (in order or with
 * designated initializers) and static in its .c file; the function's
 * prototype stays in the module's header.
 */
#ifndef LB_ENUM_H
#define LB_ENUM_H

#include <stddef.h>

/* Defines `const char *fn(type value)`, which returns names[value], or
 * fallback when value is past the end of names or its entry is NULL (a gap
 * of designated initializers, or the NULL that ends a table the config
 * parser walks); a negative value is past the end. names must be the array
 * itself, whose size bounds the index (gcc's -Wsizeof-pointer-div, in
 * -Wall, warns about a pointer). Written at file scope, without a ';':
 *
 *   LB_ENUM_NAME(bal_state_name, enum bal_state, bal_state_names, "unknown")
 */
#define LB_ENUM_NAME(fn, type, names, fallback)                             \
    const char *fn(type value)                                              \
    {                                                                       \
        size_t i = (size_t)value;                                           \
                                                                            \
        return i < sizeof(names) / sizeof((names)[0]) && (names)[i] != NULL \
                   ? (names)[i] : (fallback);                               \
    }

#endif /* LB_ENUM_H */
